package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/vlc-embed/vlc/graph"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/quant"

	"github.com/vlc-embed/vlc/pipeline"

	"github.com/vlc-embed/vlc/internal/errs"
)

// Schema is what a collection is created with before it holds a vector:
// the dimension, metric and code its vectors will have, the payload
// fields it indexes for filters, and when it trains.
type Schema struct {
	Dim    int    `json:"dim"`
	Metric string `json:"metric,omitempty"` // "l2" (""), "ip" or "cosine"
	// Code, Bits and Subspaces are the code the collection trains to, as
	// Options gives them ("" and 0: Options' defaults, rotated at 8 bits).
	Code      string `json:"code,omitempty"`
	Bits      int    `json:"bits,omitempty"`
	Subspaces int    `json:"subspaces,omitempty"`
	// Ratio, instead of Bits, asks for the bits that make the index
	// about this fraction of the vectors' float16 size (Options.Ratio).
	Ratio float64 `json:"ratio,omitempty"`
	Seed  uint64  `json:"seed,omitempty"`
	// Indexed are the payload fields (dotted paths into the JSON object)
	// kept in an index per segment, so that a filter on them starts from
	// the matching rows.
	Indexed []string `json:"indexed,omitempty"`
	Policy  Policy   `json:"policy"`
}

// Policy is when a collection's background work runs. Zero values mean
// the defaults; -1 turns a rule off.
type Policy struct {
	// TrainAt is the live vectors at which an untrained collection
	// trains its anchors (default DefaultTrainAt). Until then it holds
	// its vectors exactly and every search scans them all.
	TrainAt int `json:"train_at,omitempty"`
	// RetrainGrowth retrains once the live vectors reach this multiple of
	// those the anchors were trained on (default DefaultRetrainGrowth).
	RetrainGrowth float64 `json:"retrain_growth,omitempty"`
	// RetrainDrift retrains once Info.Drift reaches it (default DriftWarn).
	RetrainDrift float64 `json:"retrain_drift,omitempty"`
	// MergeFactor is how many segments of one size tier are merged into
	// one (default DefaultMergeFactor): the segments number about
	// MergeFactor-1 per tenfold of the rows.
	MergeFactor int `json:"merge_factor,omitempty"`
	// GraphAt, when above 0, gives every segment of at least this many
	// live rows a graph (package graph) that searches walk
	// (SearchOptions.Ef): the background work builds it, after a merge,
	// a training or an Add that leaves such a segment without one, from
	// the rows' decoded vectors (the store keeps no others), and commits
	// the segment rewritten with it (graphjob.go). 0 (the default): no
	// segment gets one in the background. Only the rotated code and the
	// l2 metric take a graph (graph.Supported); segments of other codes
	// are left to their lists.
	GraphAt int `json:"graph_at,omitempty"`
	// GraphDegree, GraphAlpha and GraphNProbe are those graphs'
	// graph.BuildOptions Degree, Alpha and NProbe (0: 32, 1.1 and 8, vlc
	// graph's defaults; GraphNProbe -1 measures every pair of rows).
	GraphDegree int     `json:"graph_degree,omitempty"`
	GraphAlpha  float64 `json:"graph_alpha,omitempty"`
	GraphNProbe int     `json:"graph_nprobe,omitempty"`
	// GraphCompact stores those graphs' neighbour lists sorted and
	// delta-coded (graph.BuildOptions.Compact): smaller, the same
	// neighbours. (A split code, BuildOptions.Bits, is not offered: it
	// codes rows from their original vectors, which the store does not
	// keep.) A build that predates it ignores it and stores fixed slots.
	GraphCompact bool `json:"graph_compact,omitempty"`
}

// SetPolicy replaces the store's Policy (a collection's, in its schema,
// or that of a store grown from an index file, which then merges and
// builds graphs by it but still trains only when told: its TrainAt,
// RetrainGrowth and RetrainDrift must stay 0) and commits it as a write;
// the background work due under it starts after (or at the next
// Maintain, for a store opened Manual). A lone index file becomes a
// store of one segment, as with Add. Info.Policy reads it back.
func (ix *Store) SetPolicy(ctx context.Context, p Policy) error {
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	if sc := w.snap.man.Schema; sc != nil {
		c := *sc
		c.Policy = p
		if _, err := c.check(); err != nil {
			return err
		}
	} else if err := p.check(false); err != nil {
		return err
	} else if p.GraphAt > 0 {
		if err := graph.Supported(w.snap.segs[0].ix); errors.Is(err, graph.ErrUnsupported) {
			return fmt.Errorf("%w: policy graph_at %d: %v", errs.ErrArgument, p.GraphAt, err)
		}
	}
	v, err := w.next()
	if err != nil {
		return err
	}
	if sc := v.man.Schema; sc != nil {
		c := *sc // a version's, read by others: changed in a copy
		c.Indexed = slices.Clone(sc.Indexed)
		c.Policy = p
		v.man.Schema = &c
	} else if p == (Policy{}) {
		v.man.Policy = nil
	} else {
		v.man.Policy = &p
	}
	return w.commit(v)
}

// graphOptions are the build options of the graphs GraphAt asks for.
func (p Policy) graphOptions() graph.BuildOptions {
	opt := graph.BuildOptions{Degree: p.GraphDegree, Alpha: float32(p.GraphAlpha), NProbe: cmp.Or(p.GraphNProbe, DefaultGraphNProbe), Compact: p.GraphCompact}
	if opt.NProbe < 0 {
		opt.NProbe = 0 // every pair
	}
	return opt
}

// check validates the policy; collection says whether it is a
// collection's (created empty, which trains itself) or that of a store
// grown from an index file (which does not).
func (p Policy) check(collection bool) error {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("%w: policy %s %v: %s", errs.ErrArgument, field, value, reason)
	}
	switch {
	case p.TrainAt < -1:
		return bad("train_at", p.TrainAt, "must be -1 (never), 0 (the default) or more")
	case p.RetrainGrowth != -1 && (p.RetrainGrowth < 0 || p.RetrainGrowth > 0 && p.RetrainGrowth <= 1 || math.IsNaN(p.RetrainGrowth)):
		return bad("retrain_growth", p.RetrainGrowth, "must be -1 (never), 0 (the default) or above 1")
	case p.RetrainDrift != -1 && (p.RetrainDrift < 0 || math.IsNaN(p.RetrainDrift)):
		return bad("retrain_drift", p.RetrainDrift, "must be -1 (never), 0 (the default) or more")
	case p.MergeFactor < 0 || p.MergeFactor == 1:
		return bad("merge_factor", p.MergeFactor, "must be 0 (the default) or at least 2")
	case p.GraphAt < 0:
		return bad("graph_at", p.GraphAt, "must be 0 (no graphs, the default) or the live rows from which a segment gets one")
	case p.GraphDegree < 0 || p.GraphDegree > 1024:
		return bad("graph_degree", p.GraphDegree, "must be 0 (the default, 32) or 1 to 1024")
	case p.GraphAlpha != 0 && !(p.GraphAlpha >= 1 && p.GraphAlpha <= 1e30):
		return bad("graph_alpha", p.GraphAlpha, "must be 0 (the default, 1.1) or at least 1")
	case p.GraphNProbe < -1:
		return bad("graph_nprobe", p.GraphNProbe, "must be -1 (every pair of rows), 0 (the default, 8) or more")
	case !collection && (p.TrainAt != 0 || p.RetrainGrowth != 0 || p.RetrainDrift != 0):
		return fmt.Errorf("%w: policy train_at %d, retrain_growth %v, retrain_drift %v: a store grown from an index file trains only when told (Retrain), so these stay 0", errs.ErrArgument, p.TrainAt, p.RetrainGrowth, p.RetrainDrift)
	}
	return nil
}

// Defaults of Policy.
const (
	DefaultTrainAt       = 4096
	DefaultRetrainGrowth = 4
	DefaultMergeFactor   = 10
	// DefaultGraphNProbe is the lists the index's own search probes for
	// a row's candidate neighbours in a graph the policy asks for, as vlc
	// graph's -nprobe: a build of n log n distances, not n^2.
	DefaultGraphNProbe = 8
)

// ErrExists is returned by Create for a path that holds a file already.
var ErrExists = errs.New(errs.ErrDuplicate, "a file exists at the path")

// Create makes an empty collection at path (which must not exist) with
// schema s, and opens it. Until it holds Policy.TrainAt vectors it keeps
// them exactly (a flat code: float32 values, one list, every search
// scans all); then it trains, in the background. Its first segment
// holds one placeholder row, deleted, that carries the model (Info
// counts it as deleted until a merge drops it).
func Create(ctx context.Context, path string, s Schema) (*Store, error) {
	metric, err := s.check()
	if err != nil {
		return nil, err
	}
	l, err := lockStore(ctx, path)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s: %w: remove it first, or open it", path, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dir := segmentDir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := segmentName(0)
	first := make([]float32, s.Dim)
	first[0] = 1
	meta := index.Meta{Code: uint32(quant.KindFlat), Metric: metric, Seed: s.Seed}
	err = index.WriteContext(ctx, filepath.Join(dir, name), index.Plan{
		Rows: matrix{first}, Anchors: make([]float32, s.Dim), Assign: []int32{0}, Meta: meta, Keys: []string{placeholderID},
	})
	if err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	sc := s
	sc.Indexed = slices.Clone(s.Indexed)
	man := manifest{NextSegment: 1, Schema: &sc, Segments: []segmentEntry{{File: name, Rows: 1}}}
	gone := roaring.New()
	gone.Add(0)
	if err := writeManifest(path, man, []*roaring.Bitmap{gone}, roaring.New()); err != nil {
		os.Remove(filepath.Join(dir, name))
		return nil, err
	}
	return Open(path)
}

// placeholderID names the deleted row an empty collection's first
// segment holds; being deleted, it never clashes with an id added.
const placeholderID = "vlc:placeholder"

// check validates the schema and returns its metric.
func (s *Schema) check() (index.Metric, error) {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("%w: schema %s %v: %s", errs.ErrArgument, field, value, reason)
	}
	if s.Dim < 1 {
		return 0, bad("dim", s.Dim, "must be at least 1")
	}
	metric, err := index.ParseMetric(cmp.Or(s.Metric, "l2"))
	if err != nil {
		return 0, err
	}
	if _, err := s.options(nil); err != nil {
		return 0, err
	}
	for i, f := range s.Indexed {
		if f == "" || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.Contains(f, "..") {
			return 0, bad(fmt.Sprintf("indexed[%d]", i), strconv.Quote(f), "must be a field name or a dotted path")
		}
	}
	if err := s.Policy.check(true); err != nil {
		return 0, err
	}
	if s.Policy.GraphAt > 0 {
		if metric != index.L2 {
			return 0, bad("policy graph_at", s.Policy.GraphAt, fmt.Sprintf("a graph takes the l2 metric only, not %s", s.Metric))
		}
		if s.Code != "" && s.Code != "auto" && s.Code != "rotated" {
			return 0, bad("policy graph_at", s.Policy.GraphAt, fmt.Sprintf("a graph takes the rotated code only, not %s", s.Code))
		}
	}
	return metric, nil
}

// CreateTemp makes an empty collection in a new temporary folder, removed
// by Close: a collection for the life of a process. Snapshot saves it.
func CreateTemp(s Schema) (*Store, error) {
	dir, err := os.MkdirTemp("", "vlc-collection-")
	if err != nil {
		return nil, err
	}
	ix, err := Create(context.Background(), filepath.Join(dir, "collection.vlc"), s)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ix.tempDir = dir
	return ix, nil
}

// Snapshot writes a copy of the current version to path (which must not
// exist): a store that opens on its own, sharing the segment files by
// hard links where the file system allows (they are never modified) and
// copying them where it does not.
func (ix *Store) Snapshot(ctx context.Context, path string) error {
	// The store's lock, held while the files are linked, keeps a
	// compaction or merge from removing them meanwhile; the snapshot is
	// of the newest version.
	w, err := ix.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer w.end()
	snap := w.snap
	l, err := lockStore(ctx, path)
	if err != nil {
		return err
	}
	defer l.unlock()
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w: a snapshot never replaces a file", path, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := segmentDir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	man := snap.man
	deleted := snap.deleted
	origin := snap.origin
	if snap.lone() {
		meta := snap.segs[0].ix.Meta()
		man = manifest{NextID: meta.N, TrainedEnergy: meta.Energy, Segments: []segmentEntry{{Rows: snap.segs[0].ix.Len(), Energy: meta.Energy}}}
		origin = firstOrigin(snap.segs[0].ix, roaring.New())
		if !snap.segs[0].ix.HasKeys() {
			man.InputRows = snap.segs[0].ix.Len()
		}
	}
	man.Segments = slices.Clone(man.Segments)
	from := make([]string, len(snap.segs))
	for i, s := range snap.segs {
		from[i] = ix.path
		if s.file != "" {
			from[i] = filepath.Join(segmentDir(ix.path), s.file)
		}
	}
	var made []string
	fail := func(err error) error {
		for _, f := range made {
			os.Remove(f)
		}
		return err
	}
	man.NextSegment = 0
	for i := range snap.segs {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		name := segmentName(man.NextSegment)
		man.NextSegment++
		dst := filepath.Join(dir, name)
		linked := os.Link(from[i], dst) == nil
		if !linked {
			if err := copyFile(from[i], dst); err != nil {
				return fail(err)
			}
		}
		made = append(made, dst)
		// The file linked (or copied) must be the one the version maps.
		st, err := os.Stat(dst)
		if err != nil || linked && !os.SameFile(st, snap.segs[i].info) || !linked && st.Size() != snap.segs[i].ix.Size() {
			return fail(fmt.Errorf("%s: segment %d (%s) is not the file the version read (written over by a program that does not take the lock?)", ix.path, i, from[i]))
		}
		man.Segments[i].File = name
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	if err := writeManifest(path, man, deleted, origin); err != nil {
		return fail(err)
	}
	return nil
}

// Remove deletes the store or index file at path and its segment folder,
// taking the store's lock so that no write of another process is cut
// short. Handles open on it keep reading the version they hold (their
// files stay mapped); their next write fails.
func Remove(ctx context.Context, path string) error {
	l, err := lockStore(ctx, path)
	if err != nil {
		return err
	}
	st, err := os.Lstat(path)
	if err != nil {
		l.unlock()
		return err
	}
	if !st.Mode().IsRegular() {
		l.unlock()
		return fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if err := os.Remove(path); err != nil {
		l.unlock()
		return err
	}
	err = os.RemoveAll(segmentDir(path))
	l.remove() // unlinked while held: a waiter locks a new file
	return err
}

// options are the build options of the collection's training.
func (s *Schema) options(logger *slog.Logger) (pipeline.Options, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opt := pipeline.Options{Code: s.Code, Bits: s.Bits, Subspaces: s.Subspaces, Ratio: s.Ratio, Metric: s.Metric, Seed: s.Seed, Logger: logger}
	return opt.Prepare("")
}
