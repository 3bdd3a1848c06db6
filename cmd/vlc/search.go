package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/errs"
	"github.com/vlc-embed/vlc/vecfile"
)

// searchFlags are the flags search and eval share.
type searchFlags struct {
	query, rerank            string
	backend                  string
	devices                  string
	spread                   string        // -spread as given
	spreadHow                device.Spread // -spread, read by checkDevices
	k, nprobe                int
	rerankFactor             int
	ef, seedProbe, scanLists int // the graph's beam width and starting rows (graphsearch.go)
	// device is the name of the device onDevice opened (Device.Name);
	// dev the device, until the close onDevice returns.
	device string
	dev    device.Device
}

func (f *searchFlags) register(fs *flag.FlagSet, k int) {
	fs.StringVar(&f.query, "query", "", "query vectors `file` (.f16, .npy or .fvecs)")
	fs.IntVar(&f.k, "k", k, "hits per query")
	fs.IntVar(&f.nprobe, "nprobe", 16, "lists to scan per query (clamped to the number of lists)")
	fs.StringVar(&f.rerank, "rerank", "", "original vectors `file` to re-rank the best candidates exactly")
	fs.IntVar(&f.rerankFactor, "rerank-factor", 10, "re-rank this many times k candidates")
	fs.StringVar(&f.backend, "backend", "cpu", "where to search: cpu, or a GPU (cuda, webgpu) holding the index in its memory, or auto (cuda, then webgpu, then cpu)")
	fs.StringVar(&f.spread, "spread", "lists", "with -devices, how the index is spread over them: lists (each device a share of the lists) or queries (each device the whole index, a share of each batch)")
	fs.StringVar(&f.devices, "devices", "", "with -backend, split the index's lists over several devices of the backend and search on all at once: all, or device numbers such as 0,1 (a number twice: two shares on one device)")
	f.registerGraph(fs)
}

// checkDevices refuses a -devices list that does not parse, or one
// given where the search runs on the CPU.
func (f *searchFlags) checkDevices() error {
	how, err := device.ParseSpread(f.spread)
	if err != nil {
		return fmt.Errorf("-spread: %w", err)
	}
	f.spreadHow = how
	if f.devices == "" {
		return nil
	}
	if _, err := device.ParseDevices(f.devices); err != nil {
		return fmt.Errorf("%w: -devices %s: want all, or device numbers separated by commas (0,1)", errs.ErrArgument, f.devices)
	}
	if f.backend == "cpu" || f.backend == "" {
		return fmt.Errorf("%w: -devices %s splits the index over GPUs: give -backend cuda, webgpu or auto too", errs.ErrArgument, f.devices)
	}
	return nil
}

// onDevice opens the backend f.backend names (on the devices f.devices
// names: the index split over them) and uploads ix to it. For cpu it
// returns nil; for auto, nil when no backend that can search
// starts (saying so on stderr). The returned close frees the device's
// copy, then the device.
func (f *searchFlags) onDevice(ix *index.Index, stderr io.Writer) (*index.DeviceIndex, func(), error) {
	if f.backend == "cpu" || f.backend == "" {
		return nil, func() {}, nil
	}
	dev, skipped, err := device.OpenDevices(f.backend, f.devices)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range skipped {
		slog.Info("backend skipped", "reason", s)
	}
	sd, ok := device.SearcherOf(dev, f.spreadHow)
	if !ok && f.backend == "auto" {
		why := "none is built in"
		if len(skipped) > 0 {
			why = strings.Join(skipped, "; ")
		}
		fmt.Fprintf(stderr, "vlc: no GPU backend could search (%s): searching on the CPU\n", why)
		dev.Close()
		return nil, func() {}, nil
	}
	if !ok {
		dev.Close()
		return nil, nil, fmt.Errorf("%w: the backend %s has no device search", device.ErrNoSearch, f.backend)
	}
	di, err := ix.OnDevice(sd)
	if err != nil {
		dev.Close()
		if f.backend == "auto" && errors.Is(err, device.ErrNoSearch) {
			fmt.Fprintf(stderr, "vlc: searching on the CPU: %v\n", err)
			return nil, func() {}, nil
		}
		return nil, nil, err
	}
	f.device, f.dev = dev.Name(), dev
	slog.Info("searching on a device", "backend", dev.Name(), "device_mib", di.DeviceBytes()>>20)
	return di, func() { di.Close(); dev.Close() }, nil
}

// opened holds what a search reads: the index, the queries and, with
// -rerank, the original vectors.
type opened struct {
	ix    *index.Index
	q, rr *vecfile.Matrix // rr is nil without -rerank
}

// Close closes whatever was opened.
func (o *opened) Close() {
	if o.rr != nil {
		o.rr.Close()
	}
	if o.q != nil {
		o.q.Close()
	}
	if o.ix != nil {
		o.ix.Close()
	}
}

// open opens the index (checksums verified), the queries and the re-rank
// file; on error nothing stays open.
func (f *searchFlags) open(path string) (_ *opened, err error) {
	if f.query == "" {
		return nil, fmt.Errorf("-query is required")
	}
	if f.k < 1 {
		return nil, fmt.Errorf("-k must be at least 1, got %d", f.k)
	}
	o := &opened{}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	if o.ix, err = openFile(path, f.rerank != ""); err != nil {
		return nil, err
	}
	if o.q, err = openLike(f.query, o.ix.Dim()); err == nil {
		err = o.q.CheckFinite()
	}
	if err != nil {
		return nil, fmt.Errorf("queries: %w", err)
	}
	if f.rerank != "" {
		if o.rr, err = openLike(f.rerank, o.ix.Dim()); err == nil && o.rr.Len() != o.ix.Len() {
			err = fmt.Errorf("%s has %d vectors, the index %d", f.rerank, o.rr.Len(), o.ix.Len())
		}
		if err != nil {
			return nil, fmt.Errorf("re-rank: %w", err)
		}
	}
	return o, nil
}

// openFile opens the one index file a search on a device (or eval) reads:
// the file at path, or the one segment of a store without deletions (a
// store vlc compact left so). rerank refuses the segment: its rows are
// named by ids, and the re-rank file is read by row.
func openFile(path string, rerank bool) (*index.Index, error) {
	ix, err := index.Open(path, index.Options{Verify: true})
	if !errors.Is(err, index.ErrNotIndex) {
		return ix, err
	}
	st, serr := vlc.Open(path)
	if serr != nil {
		return nil, err
	}
	defer st.Close()
	in, serr := st.Info()
	if serr != nil {
		return nil, serr
	}
	switch {
	case len(in.Segments) != 1 || in.Deleted != 0:
		return nil, fmt.Errorf("%s is a store of %d segments with %d deleted vectors: this reads one index file; vlc compact makes the store one segment, or search with -backend cpu", path, len(in.Segments), in.Deleted)
	case rerank:
		return nil, fmt.Errorf("%s is a store: -rerank with -backend or eval reads the re-rank file by row; search the store with -backend cpu", path)
	}
	return index.Open(in.Segments[0].File, index.Options{Verify: true})
}

func (f *searchFlags) options(rr *vecfile.Matrix, k int) index.SearchOptions {
	opt := index.SearchOptions{K: k, NProbe: f.nprobe, RerankFactor: f.rerankFactor}
	if rr != nil {
		opt.Rerank = rr
	}
	return opt
}

func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	var sf searchFlags
	sf.register(fs, 10)
	payload := fs.Bool("payload", false, "print each hit's payload after its distance (with -json: as \"payload\", or \"payload_base64\" when it is not JSON)")
	asJSON := fs.Bool("json", false, "print JSON Lines: one object per query, {\"query\": Q, \"hits\": [{\"id\", \"distance\"}, ...]} (the hits as vlc serve's)")
	filter := fs.String("filter", "", "return "+filterHelp)
	radius := fs.Float64("radius", 0, "drop the hits farther than this `distance` (of at most -k; 0: none; under ip distances are negative inner products)")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	f, err := parseFilter(*filter)
	if err != nil {
		return err
	}
	if sf.query == "" {
		return fmt.Errorf("-query is required")
	}
	if sf.k < 1 {
		return fmt.Errorf("-k must be at least 1, got %d", sf.k)
	}
	if sf.nprobe < 1 {
		return fmt.Errorf("-nprobe must be at least 1, got %d", sf.nprobe)
	}
	if err := sf.checkDevices(); err != nil {
		return err
	}
	out := newHitWriter(stdout, *asJSON, *payload)
	if sf.backend != "cpu" && (f != nil || *radius != 0) {
		return fmt.Errorf("-filter and -radius search on the CPU: leave out -backend %s", sf.backend)
	}
	if walk, err := sf.useGraph(fs, pos[0], f != nil); err != nil {
		return err
	} else if walk {
		return searchGraph(ctx, pos[0], &sf, float32(*radius), out)
	}
	if sf.backend != "cpu" {
		return searchOnDevice(ctx, pos[0], &sf, out, stderr)
	}
	ix, err := vlc.Open(pos[0])
	if err != nil {
		return err
	}
	defer ix.Close()
	in, err := ix.Info()
	if err != nil {
		return err
	}
	q, err := openLike(sf.query, ix.Dim())
	if err == nil {
		err = q.CheckFinite()
	}
	if err != nil {
		return fmt.Errorf("queries: %w", err)
	}
	defer q.Close()
	opt := vlc.SearchOptions{K: sf.k, NProbe: sf.nprobe, RerankFactor: sf.rerankFactor, Filter: f, Radius: float32(*radius)}
	if _, err := sf.storeWalk(fs, pos[0], in, &opt); err != nil {
		return err
	}
	if sf.rerank != "" {
		rr, err := openLike(sf.rerank, ix.Dim())
		if err != nil {
			return fmt.Errorf("re-rank: %w", err)
		}
		defer rr.Close()
		// Row i is the vector of id i: the file of an index written
		// without ids has exactly its rows; a store's may have more
		// (deleted) or fewer (added ones).
		if in.InputRows > 0 && rr.Len() != in.InputRows {
			return fmt.Errorf("re-rank: %s has %d vectors, the input the index was built from %d", sf.rerank, rr.Len(), in.InputRows)
		}
		if in.FromInput < in.Rows {
			fmt.Fprintf(stderr, "vlc search: re-rank: %d of the %d live vectors are not rows of %s (added after the index was built, or named by ids of their own): they keep their codes' estimated distance\n", in.Rows-in.FromInput, in.Rows, sf.rerank)
		}
		opt.Rerank = vlc.RowOriginals(rr)
	}
	hits, err := ix.SearchRows(ctx, q, opt)
	if err != nil {
		return err
	}
	nprobeSet := false
	fs.Visit(func(f *flag.Flag) { nprobeSet = nprobeSet || f.Name == "nprobe" })
	if nprobeSet && sf.nprobe > in.Lists {
		fmt.Fprintf(stderr, "vlc search: -nprobe %d clamped to %d (the index has %d lists)\n", sf.nprobe, in.Lists, in.Lists)
	}
	for i, hs := range hits {
		if err := out.query(i, hs); err != nil {
			return err
		}
	}
	return out.flush()
}

// searchOnDevice is vlc search with -backend: the index file (not a
// store with added or deleted vectors: vlc compact makes one) uploaded to
// the device, the queries searched there in one batch.
func searchOnDevice(ctx context.Context, path string, sf *searchFlags, out *hitWriter, stderr io.Writer) error {
	o, err := sf.open(path)
	if err != nil {
		return err
	}
	defer o.Close()
	di, release, err := sf.onDevice(o.ix, stderr)
	if err != nil {
		return err
	}
	defer release()
	var hits [][]index.Hit
	opt := sf.options(o.rr, sf.k)
	if di != nil {
		hits, err = di.SearchBatch(ctx, o.q, opt)
	} else {
		hits, err = o.ix.SearchBatch(ctx, o.q, opt)
	}
	if err != nil {
		return err
	}
	return writeIndexHits(o, hits, out)
}

// writeIndexHits prints the hits of a search of o's index file, each
// row named by its id (the row number where the file has none).
func writeIndexHits(o *opened, hits [][]index.Hit, out *hitWriter) error {
	for i, hs := range hits {
		found := make([]vlc.Hit, len(hs))
		for r, h := range hs {
			found[r] = vlc.Hit{ID: strconv.Itoa(h.ID), Distance: h.Distance}
			if o.ix.HasKeys() {
				k, err := o.ix.Key(h.ID)
				if err != nil {
					return err
				}
				found[r].ID = string(k)
			}
			if out.payloads {
				var err error
				if found[r].Payload, err = o.ix.Payload(h.ID); err != nil {
					return err
				}
			}
		}
		if err := out.query(i, found); err != nil {
			return err
		}
	}
	return out.flush()
}

// openLike opens a vector file that must have dimension dim (the index's);
// a raw .f16 file, which does not record its dimension, is read at dim.
func openLike(path string, dim int) (*vecfile.Matrix, error) {
	m, err := vecfile.Open(path, vecfile.Options{Dim: dim})
	if errors.Is(err, vecfile.ErrLikelyDim) {
		return nil, fmt.Errorf("%w (read at the index's dimension, %d)", err, dim)
	}
	if errors.Is(err, vecfile.ErrDim) {
		if m2, err2 := vecfile.Open(path, vecfile.Options{}); err2 == nil {
			m2.Close()
			return nil, fmt.Errorf("%s has dimension %d, the index %d: %w", path, m2.Dim(), dim, index.ErrDim)
		}
	}
	return m, err
}
