package langchaingo

import (
	"errors"

	"github.com/tmc/langchaingo/vectorstores"
	"github.com/vlc-embed/vlc"
)

// Option configures a Store made by New.
type Option func(*Store)

// WithBuildOptions sets the options of the vlc.Build that the first
// AddDocuments of an empty store runs (bits, code, anchors, seed, backend,
// logger). Metric must be "" or "cosine": the store's scores are cosine
// similarities. A nil Logger discards Build's log (not slog.Default).
func WithBuildOptions(opt vlc.Options) Option {
	return func(s *Store) { s.build = opt }
}

// WithOpenOptions sets how the store's index is opened (vlc.OpenWith):
// Device searches it on a GPU (vlc.OpenSearchDevice opens one by backend
// name: "cuda", "webgpu", "auto"), Manual turns off background work. The
// device must outlive the Store.
func WithOpenOptions(opt vlc.OpenOptions) Option {
	return func(s *Store) { s.open, s.opened = opt, true }
}

// WithNProbe sets the lists a search reads (0: vlc.DefaultNProbe). More
// lists, better recall, slower search.
func WithNProbe(n int) Option {
	return func(s *Store) { s.nprobe = n }
}

// WithNameSpace sets the namespace of documents added and searched when
// the call gives none with vectorstores.WithNameSpace (default "").
func WithNameSpace(ns string) Option {
	return func(s *Store) { s.namespace = ns }
}

// WithIDKey names a metadata key whose string value, when present and
// not empty, is a document's id in the store (a chunk name, a key of your
// own); documents without it get a random UUID. schema.Document has no id
// field, so by default every document gets a UUID.
func WithIDKey(key string) Option {
	return func(s *Store) { s.idKey = key }
}

// WithUpsert makes AddDocuments replace the documents whose ids the store
// holds (an id from WithIDKey's metadata key), the old and the new never
// both found: vlc.Store.Upsert. Without it such an id is refused
// (vlc.ErrDuplicateID) and nothing is added.
func WithUpsert() Option {
	return func(s *Store) { s.upsert = true }
}

// WithFilter is a search option taking a vlc.Filter: vlc.Match of a
// filter.Expr, vlc.ParseFilter's, or vlc.AllowIDs. Its fields are paths
// into the stored payload, {"content", "metadata", "namespace"}: write
// "metadata.lang", not "lang". It is used as it is, so the namespace
// (WithNameSpace) does not restrict it.
func WithFilter(f vlc.Filter) vectorstores.Option {
	return vectorstores.WithFilters(f)
}

// Errors of the store. A closed store's calls return an error wrapping
// ErrClosed; a vector of the wrong dimension, one wrapping index.ErrDim.
var (
	ErrNoEmbedder                 = errors.New("langchaingo: no embedder (New's or vectorstores.WithEmbedder)")
	ErrEmbedderWrongNumberVectors = errors.New("langchaingo: number of vectors from embedder does not match number of documents")
	ErrInvalidScoreThreshold      = errors.New("langchaingo: score threshold must be between 0 and 1")
	ErrInvalidFilters             = errors.New("langchaingo: filters must be a map[string]any (or map[string]string) in the JSON filter syntax over the metadata, or a vlc.Filter (WithFilter)")
	ErrUnsupportedOptions         = errors.New("langchaingo: unsupported options")
	ErrInvalidNumDocuments        = errors.New("langchaingo: number of documents must be at least 1")
	ErrMetric                     = errors.New("langchaingo: the index's metric must be cosine")
)
