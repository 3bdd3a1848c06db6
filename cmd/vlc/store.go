package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/store"
)

// readIDs reads one id a line (a trailing \r dropped; blank lines are
// ids too, and refused as empty), naming the file and line of an error.
func readIDs(path string) ([]string, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(lines))
	for i, l := range lines {
		ids[i] = string(l)
	}
	return ids, nil
}

// readPayloads reads a JSON Lines file: one JSON value a line, kept as
// its bytes, the payload of the row of the same number.
func readPayloads(path string) ([][]byte, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		if !json.Valid(l) {
			return nil, fmt.Errorf("%s: line %d is not one JSON value", path, i+1)
		}
	}
	return lines, nil
}

func readLines(path string) ([][]byte, error) {
	b, err := regfile.ReadFile(path) // a FIFO is refused, not waited on
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	return lines, nil
}

func runAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return put(ctx, "add", args, stdout, stderr)
}

func runUpsert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return put(ctx, "upsert", args, stdout, stderr)
}

// maintainHelp is the help of the -maintain flag of the writing commands.
const maintainHelp = "after the write, run the store's due background work (merge small segments, train or retrain) before exiting; false leaves it to the next writer"

// put is vlc add and, for name "upsert", vlc upsert, which replaces the
// live vectors of the ids given where add refuses them.
func put(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	idsFile := fs.String("ids", "", "ids of the new vectors, one a line (default: the next free numbers)")
	payloads := fs.String("payloads", "", "payloads of the new vectors, a JSON Lines `file` (one JSON value a line)")
	maintain := fs.Bool("maintain", true, maintainHelp)
	pos, err := parse(fs, args, []string{"INDEX", "VECTORS"}, stdout)
	if err != nil {
		return err
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	m, err := openLike(pos[1], ix.Dim())
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.CheckFinite(); err != nil {
		return err
	}
	docs := make([]vlc.Document, m.Len())
	for i := range docs {
		docs[i].Vector = m.Row(i, nil)
	}
	if *idsFile != "" {
		ids, err := readIDs(*idsFile)
		if err != nil {
			return err
		}
		if len(ids) != len(docs) {
			return fmt.Errorf("%s has %d ids, %s %d vectors", *idsFile, len(ids), pos[1], len(docs))
		}
		for i, id := range ids {
			if id == "" {
				return fmt.Errorf("%s: line %d: empty id", *idsFile, i+1)
			}
			docs[i].ID = id
		}
	}
	if *payloads != "" {
		pl, err := readPayloads(*payloads)
		if err != nil {
			return err
		}
		if len(pl) != len(docs) {
			return fmt.Errorf("%s has %d payloads, %s %d vectors", *payloads, len(pl), pos[1], len(docs))
		}
		for i := range docs {
			docs[i].Payload = pl[i]
		}
	}
	write, verb := ix.Add, "added"
	if name == "upsert" {
		write, verb = ix.Upsert, "upserted"
	}
	added, err := write(ctx, docs)
	if err != nil {
		return err
	}
	// The ids are the result (a script keeps them); the summary is for
	// people.
	w := bufio.NewWriter(stdout)
	for _, id := range added {
		fmt.Fprintln(w, textID(id))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: %s %d vectors (ids %s .. %s); %d live\n", pos[0], verb, len(added), textID(added[0]), textID(added[len(added)-1]), ix.Len())
	if *maintain {
		if err := runMaintain(ctx, ix, stderr); err != nil {
			return err
		}
	}
	return driftNote(ix, stderr)
}

// runMaintain runs the store's due background work after a write the
// command has acknowledged, so that a process that writes and exits still
// merges and trains, and says what changed. An error keeps the write:
// the work is due again at the next write.
func runMaintain(ctx context.Context, ix *vlc.Store, stderr io.Writer) error {
	before, err := ix.Info()
	if err != nil {
		return err
	}
	if err := ix.Maintain(ctx); err != nil {
		return fmt.Errorf("the write is done, but the maintenance after it failed (it runs again after the next write): %w", err)
	}
	after, err := ix.Info()
	if err != nil {
		return err
	}
	if len(after.Segments) != len(before.Segments) || after.Lists != before.Lists {
		fmt.Fprintf(stderr, "%s: maintenance: %d segment(s) -> %d, %d lists -> %d\n", ix.Path(), len(before.Segments), len(after.Segments), before.Lists, after.Lists)
	}
	if g := graphFiles(after); g != graphFiles(before) {
		fmt.Fprintf(stderr, "%s: maintenance: graphs built; %s\n", ix.Path(), graphCount(after))
	}
	return nil
}

// graphFiles names the segment files that hold a graph.
func graphFiles(in vlc.Info) string {
	var b strings.Builder
	for _, s := range in.Segments {
		if s.Graph {
			b.WriteString(s.File + "\n")
		}
	}
	return b.String()
}

// driftNote warns when the rows added since training sit far from the
// anchors, and says what to do.
func driftNote(ix *vlc.Store, w io.Writer) error {
	in, err := ix.Info()
	if err != nil {
		return err
	}
	if in.Drift > vlc.DriftWarn {
		fmt.Fprintf(w, "warning: the added vectors lie %.2fx as far (squared) from their anchors as the trained ones: the anchors no longer fit them and recall suffers; run vlc retrain %s\n", in.Drift, ix.Path())
	}
	return nil
}

func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	idsFile := fs.String("ids", "", "ids to delete, one a line (or give them as arguments)")
	maintain := fs.Bool("maintain", true, maintainHelp)
	pos, err := parse(fs, args, []string{"INDEX..."}, stdout)
	if err != nil {
		return err
	}
	ids := pos[1:]
	if *idsFile != "" {
		more, err := readIDs(*idsFile)
		if err != nil {
			return err
		}
		ids = append(ids, more...)
	}
	if len(ids) == 0 {
		return fmt.Errorf("no ids to delete: give -ids FILE or ids after INDEX")
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	if err := ix.Delete(ctx, ids); err != nil {
		return err
	}
	distinct := map[string]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	fmt.Fprintf(stderr, "%s: deleted %d ids; %d live\n", pos[0], len(distinct), ix.Len())
	if *maintain {
		return runMaintain(ctx, ix, stderr)
	}
	return nil
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	vector := fs.Bool("vector", false, "print the vector too, after a tab, as a JSON array: the vector as its code gives it back, not the vector added")
	asJSON := fs.Bool("json", false, "print one JSON object: {\"id\", \"payload\" (or \"payload_base64\"), \"vector\"}")
	pos, err := parse(fs, args, []string{"INDEX", "ID"}, stdout)
	if err != nil {
		return err
	}
	ix, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	var opts []vlc.GetOption
	if *vector {
		opts = append(opts, vlc.WithVector())
	}
	rec, err := ix.Get(pos[1], opts...)
	if err != nil {
		return err
	}
	return writeRecord(stdout, rec, *asJSON)
}

func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	if err := ix.Compact(ctx); err != nil {
		return err
	}
	in, err := ix.Info()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: %d live vectors in %d segment(s), %d bytes\n", pos[0], in.Rows, len(in.Segments), in.Bytes)
	return nil
}

func runRetrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("retrain", flag.ContinueOnError)
	backend := fs.String("backend", "auto", "training backend")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	ix, err := openWriter(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	sum, err := ix.Retrain(ctx, vlc.Options{Backend: *backend})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: retrained on %d vectors: %d anchors, energy %.6g, %.3f of float16\n", pos[0], sum.N, sum.Anchors, sum.Energy, sum.SizeRatio)
	return nil
}

// openWriter opens a store for a command that writes and exits, without
// the background work a write would start: exit would cut it short. The
// command runs it itself (Maintain), or leaves it to the next writer.
func openWriter(path string) (*vlc.Store, error) {
	return store.OpenWith(path, store.OpenOptions{Manual: true})
}
