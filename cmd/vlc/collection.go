package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/serve"
	"github.com/vlc-embed/vlc/store"
)

func runCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("create", flag.ContinueOnError)
	dim := fset.Int("dim", 0, "dimension of the vectors the collection will hold (required)")
	metric := fset.String("metric", "l2", "distance: l2, ip or cosine")
	codeName := fset.String("code", "", "residual code it trains to: rotated, pq, sq8 or auto (empty: the default)")
	bits := fset.Int("bits", 0, "bits per dimension of the residual codes: 1, 2, 4 or 8 (0: the default)")
	ratio := fset.Float64("ratio", 0, "instead of -bits: the most bits whose index fits in this `fraction` of the float16 size")
	subspaces := fset.Int("subspaces", 0, "pq only, instead of -bits: bytes of code per vector")
	seed := fset.Uint64("seed", 1, "random seed of training")
	indexed := fset.String("index", "", "payload `fields` to index for filters, comma-separated (dotted paths into the JSON object)")
	trainAt := fset.Int("train-at", 0, fmt.Sprintf("live vectors at which the collection trains its anchors; until then searches are exact (0: %d; -1: never)", store.DefaultTrainAt))
	graphAt := fset.Int("graph-at", 0, "give every segment of at least this many live rows a graph that searches walk, built in the background (after training, merges and writes) from the rows' decoded vectors; 0: none (vlc graph -at changes it later)")
	graphCompact := fset.Bool("graph-compact", false, "with -graph-at: store those graphs' neighbour lists sorted and delta-coded (smaller), not in fixed slots")
	pos, err := parse(fset, args, []string{"PATH"}, stdout)
	if err != nil {
		return err
	}
	if *dim == 0 {
		return errors.New("-dim is required: the dimension of the vectors the collection will hold")
	}
	if *dim < 0 {
		return fmt.Errorf("-dim %d: must be at least 1", *dim)
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["bits"] && set["ratio"] {
		return fmt.Errorf("-bits %d and -ratio %g both given: give the bits, or the size to pick them for, not both", *bits, *ratio)
	}
	if *trainAt < -1 {
		return fmt.Errorf("-train-at %d: give the vectors to train at, 0 for the default or -1 never to train", *trainAt)
	}
	if *graphAt < 0 {
		return fmt.Errorf("-graph-at %d: give the live rows from which a segment gets a graph, or 0 for none", *graphAt)
	}
	if *graphCompact && *graphAt == 0 {
		return errors.New("-graph-compact without -graph-at: it shapes the graphs -graph-at asks for")
	}
	fields, err := splitFields(*indexed)
	if err != nil {
		return err
	}
	path := pos[0]
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w: vlc create makes a new collection (vlc drop %s removes the old one)", path, store.ErrExists, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	st, err := vlc.Create(ctx, path, vlc.Schema{
		Dim: *dim, Metric: *metric, Code: *codeName, Bits: *bits, Ratio: *ratio, Subspaces: *subspaces, Seed: *seed,
		Indexed: fields, Policy: vlc.Policy{TrainAt: *trainAt, GraphAt: *graphAt, GraphCompact: *graphCompact},
	})
	if oe := (*vlc.OptionError)(nil); errors.As(err, &oe) {
		return errors.New(oe.Message(flagName))
	}
	if err != nil {
		return err
	}
	defer st.Close()
	train := fmt.Sprintf("trains at %d vectors", *trainAt)
	switch *trainAt {
	case 0:
		train = fmt.Sprintf("trains at %d vectors", store.DefaultTrainAt)
	case -1:
		train = "never trains"
	}
	if *graphAt > 0 {
		train += fmt.Sprintf("; graphs for segments of %d live rows", *graphAt)
		if *graphCompact {
			train += ", compact lists"
		}
	}
	fmt.Fprintf(stderr, "%s: empty collection of dimension %d, metric %s; %s\n", path, *dim, *metric, train)
	return nil
}

// splitFields reads -index's comma-separated field names.
func splitFields(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("-index %q: field %d is empty", s, i+1)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseFilter reads -filter's JSON ("" is no filter).
func parseFilter(s string) (vlc.Filter, error) {
	if s == "" {
		return nil, nil
	}
	f, err := vlc.ParseFilter([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("-filter: %w", err)
	}
	return f, nil
}

const filterHelp = "only the vectors whose payload matches this JSON filter: {\"cat\": \"a\"}, {\"n\": {\"$gte\": 10}}, with $eq $ne $gt $gte $lt $lte $in $nin $exists $and $or $not"

func runCount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("count", flag.ContinueOnError)
	filter := fset.String("filter", "", "count "+filterHelp)
	pos, err := parse(fset, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	f, err := parseFilter(*filter)
	if err != nil {
		return err
	}
	ix, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	n, err := ix.Count(f)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, n)
	return nil
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("list", flag.ContinueOnError)
	after := fset.String("after", "", "start after this `id` (the last one of the page before)")
	limit := fset.Int("limit", store.DefaultListLimit, "records to print at most (0: all)")
	filter := fset.String("filter", "", "list "+filterHelp)
	vectors := fset.Bool("vectors", false, "print each record's vector as its code gives it back (not the vector added)")
	asJSON := fset.Bool("json", false, "print JSON Lines, one object a record: {\"id\", \"payload\" (or \"payload_base64\"), \"vector\"}")
	pos, err := parse(fset, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("-limit %d: must be at least 1, or 0 for all", *limit)
	}
	f, err := parseFilter(*filter)
	if err != nil {
		return err
	}
	ix, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	w := bufio.NewWriter(stdout)
	opt := vlc.ListOptions{After: *after, Filter: f, Vectors: *vectors}
	printed := 0
	for {
		opt.Limit = store.DefaultListLimit
		if *limit > 0 {
			opt.Limit = min(*limit-printed, 10000)
		}
		page, err := ix.List(ctx, opt)
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			if err := writeRecord(w, rec, *asJSON); err != nil {
				return err
			}
		}
		printed += len(page.Records)
		opt.After = page.Next
		if page.Next == "" || printed == *limit {
			break
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if opt.After != "" {
		fmt.Fprintf(stderr, "%s: %d records printed; more follow: -after %s\n", pos[0], printed, textID(opt.After))
	}
	return nil
}

// writeRecord prints a record as get and list do: ID, a tab and the
// payload, then with a vector a tab and the vector as a JSON array; or
// with asJSON one JSON object, the shape of vlc serve's documents.
func writeRecord(w io.Writer, rec vlc.Record, asJSON bool) error {
	if asJSON {
		body := serve.DocumentBody{ID: rec.ID, Vector: rec.Vector}
		if len(rec.Payload) > 0 {
			if json.Valid(rec.Payload) {
				body.Payload = rec.Payload
			} else {
				body.PayloadBase64 = rec.Payload
			}
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(body)
	}
	if rec.Vector == nil {
		_, err := fmt.Fprintf(w, "%s\t%s\n", textID(rec.ID), textPayload(rec.Payload))
		return err
	}
	_, err := fmt.Fprintf(w, "%s\t%s\t%s\n", textID(rec.ID), textPayload(rec.Payload), vectorText(rec.Vector))
	return err
}

// vectorText is a vector as a JSON array, each number in the fewest
// digits that read back as the same float32.
func vectorText(v []float32) string {
	b := make([]byte, 0, 12*len(v)+2)
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

func runDrop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("drop", flag.ContinueOnError)
	pos, err := parse(fset, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(pos[0]); err != nil {
		return err
	}
	if err := vlc.Remove(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: removed\n", pos[0])
	return nil
}

func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	pos, err := parse(fset, args, []string{"INDEX", "OUT"}, stdout)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(pos[1]); err == nil {
		return fmt.Errorf("%s: %w: a snapshot goes to a new path", pos[1], store.ErrExists)
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	if err := ix.Snapshot(ctx, pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s -> %s: snapshot of %d live vectors\n", pos[0], pos[1], ix.Len())
	return nil
}

func runSetPayload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("set-payload", flag.ContinueOnError)
	pos, err := parse(fset, args, []string{"INDEX", "ID", "PAYLOAD"}, stdout)
	if err != nil {
		return err
	}
	if !json.Valid([]byte(pos[2])) {
		return fmt.Errorf("%w: the payload %q is not one JSON value", vlc.ErrPayload, pos[2])
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	if err := ix.SetPayloads(ctx, []vlc.Record{{ID: pos[1], Payload: []byte(pos[2])}}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: set the payload of %s\n", pos[0], textID(pos[1]))
	return nil
}
