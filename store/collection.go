package store

import (
	"context"
	"fmt"
	"log/slog"

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
	// Options gives them ("" and 0: the defaults, rotated at 4 bits).
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
}

// Defaults of Policy.
const (
	DefaultTrainAt       = 4096
	DefaultRetrainGrowth = 4
	DefaultMergeFactor   = 10
)

// ErrExists is returned by Create for a path that holds a file already.
var ErrExists = errs.New(errs.ErrDuplicate, "a file exists at the path")

// Create makes an empty collection at path (which must not exist) with
// schema s, and opens it. Until it holds Policy.TrainAt vectors it keeps
// them exactly; then it trains, in the background.
func Create(ctx context.Context, path string, s Schema) (*Store, error) {
	return nil, fmt.Errorf("store.Create: %w: not yet built", errs.ErrUnavailable)
}

// CreateTemp makes an empty collection in a new temporary folder, removed
// by Close: a collection for the life of a process. Snapshot saves it.
func CreateTemp(s Schema) (*Store, error) {
	return nil, fmt.Errorf("store.CreateTemp: %w: not yet built", errs.ErrUnavailable)
}

// Snapshot writes a copy of the current version to path (which must not
// exist): a store that opens on its own, sharing the segment files by
// hard links where the file system allows (they are never modified).
func (ix *Store) Snapshot(ctx context.Context, path string) error {
	return fmt.Errorf("Snapshot: %w: not yet built", errs.ErrUnavailable)
}

// ParseFilter reads a filter in the JSON syntax of Chroma and MongoDB
// (package filter): {"cat": "a"}, {"n": {"$gte": 10}}, {"$or": [...]}.
func ParseFilter(data []byte) (Filter, error) {
	return nil, fmt.Errorf("ParseFilter: %w: not yet built", errs.ErrUnavailable)
}

// Remove deletes the store or index file at path and its segment folder,
// taking the store's lock so that no write of another process is cut
// short. Handles open on it keep reading the version they hold.
func Remove(ctx context.Context, path string) error {
	return fmt.Errorf("store.Remove: %w: not yet built", errs.ErrUnavailable)
}

// options are the build options of the collection's training.
func (s *Schema) options(logger *slog.Logger) (pipeline.Options, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opt := pipeline.Options{Code: s.Code, Bits: s.Bits, Subspaces: s.Subspaces, Ratio: s.Ratio, Metric: s.Metric, Seed: s.Seed, Logger: logger}
	return opt.Prepare("")
}
