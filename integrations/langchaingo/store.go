// Package langchaingo is a LangChainGo vector store (vectorstores.VectorStore
// of github.com/tmc/langchaingo) kept in an embedded vlc index: a file on
// disk, compressed, memory-mapped and searched in process, with no server.
//
//	store, err := langchaingo.New("docs.vlc", embedder)
//	defer store.Close()
//	ids, err := store.AddDocuments(ctx, docs)
//	found, err := store.SimilaritySearch(ctx, "query", 4,
//		vectorstores.WithFilters(map[string]any{"lang": "en"}),
//		vectorstores.WithScoreThreshold(0.5))
//
// An empty store (no file at the path) is trained by its first
// AddDocuments: vlc.Build learns the anchors (about sqrt(n) of them) and
// the code from those documents and writes the index; later calls add
// segments encoded against what was learnt, without training again. So
// make the first call a representative batch; when later documents drift
// away from it (Index().Info().Drift), Index().Retrain trains anew.
//
// The metric is cosine. vlc's distance is then 1 - cosine similarity, and
// a document's Score is the similarity, 1 - distance, clamped to [-1, 1]
// (the distance comes from the compressed codes, so it is approximate:
// within 1e-3 of the exact one in this package's tests, at the default 8
// bits). vectorstores.WithScoreThreshold keeps
// the hits whose Score is at least the threshold (0, the default, keeps
// every hit).
//
// Each document's page content and metadata are its payload, the JSON
// object {"content": ..., "metadata": {...}, "namespace": ...}; metadata
// values come back as encoding/json decodes them (numbers as float64).
// vectorstores.WithFilters takes a map over the metadata in the JSON
// filter syntax of Chroma and MongoDB (vlc.ParseFilter): {"lang": "en"}
// (equal; 2 matches 2.0), {"lang": {"$in": ["en", "fr"]}}, {"year":
// {"$gte": 2020, "$lt": 2024}}, {"$or": [{...}, {...}]}, with $eq, $ne,
// $gt, $gte, $lt, $lte, $in, $nin, $exists, $and, $or and $not; each key
// is a metadata key (a dotted path steps into nested metadata). WithFilter
// takes a vlc.Filter instead, over the whole payload. The filter runs
// inside the search, over the candidates before ranking, so up to
// numDocuments matching documents come back even when most documents do
// not match.
//
// Documents are deleted by id (DeleteDocuments). AddDocuments refuses an
// id the store holds (vlc.ErrDuplicateID) unless the store was opened
// WithUpsert, which makes it replace those documents in the same commit.
package langchaingo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"sync"

	"github.com/google/uuid"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
)

// ErrClosed is wrapped by the errors of a closed store's calls.
var ErrClosed = index.ErrClosed

// Store is a vector store in a vlc index at a path. Safe for concurrent
// use; one process writes an index at a time (vlc.ErrLocked otherwise).
type Store struct {
	path     string
	embedder embeddings.Embedder

	build     vlc.Options
	open      vlc.OpenOptions
	opened    bool // WithOpenOptions was given
	nprobe    int
	namespace string
	idKey     string
	upsert    bool

	mu     sync.Mutex // guards ix and closed; held while the first AddDocuments builds
	ix     *vlc.Store // nil while the store is empty
	closed bool
}

var _ vectorstores.VectorStore = (*Store)(nil)

// New opens the store at path, or makes an empty one when no file is
// there (the first AddDocuments writes it). embedder embeds documents and
// queries; vectorstores.WithEmbedder overrides it per call, and it may be
// nil when every call gives one.
func New(path string, embedder embeddings.Embedder, opts ...Option) (*Store, error) {
	s := &Store{path: path, embedder: embedder}
	for _, o := range opts {
		o(s)
	}
	if s.build.Metric == "" {
		s.build.Metric = "cosine"
	}
	if s.build.Metric != "cosine" {
		return nil, fmt.Errorf("%w: WithBuildOptions gives metric %q", ErrMetric, s.build.Metric)
	}
	if s.build.Logger == nil {
		s.build.Logger = slog.New(slog.DiscardHandler)
	}
	if s.nprobe < 0 {
		return nil, fmt.Errorf("%w: WithNProbe(%d)", index.ErrArgument, s.nprobe)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	ix, err := vlc.OpenWith(path, s.open)
	if err != nil {
		return nil, err
	}
	info, err := ix.Info()
	if err == nil && info.Meta.Metric != index.Cosine {
		err = fmt.Errorf("%w: %s has metric %s", ErrMetric, path, info.Meta.Metric)
	}
	if err != nil {
		ix.Close()
		return nil, err
	}
	s.ix = ix
	return s, nil
}

// Close closes the index; the store's calls then return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ix == nil {
		return nil
	}
	return s.ix.Close()
}

// Index returns the vlc index (nil while the store is empty), for what
// the store does not wrap: Compact, Retrain, Info, Get, Count, List.
func (s *Store) Index() *vlc.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ix
}

// payload is what the store keeps with each vector.
type payload struct {
	Content   string         `json:"content"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
}

// AddDocuments embeds the documents' page contents (EmbedDocuments), stores
// them with their content and metadata and returns their ids, in order.
// It honours vectorstores.WithEmbedder, WithNameSpace and WithDeduplicater
// (documents it reports as duplicates are skipped and get no id);
// WithScoreThreshold and WithFilters are search options and give
// ErrUnsupportedOptions. The first call on an empty store builds the index
// from its documents (see the package's documentation).
func (s *Store) AddDocuments(ctx context.Context, docs []schema.Document, options ...vectorstores.Option) ([]string, error) {
	opts := getOptions(options)
	if opts.ScoreThreshold != 0 || opts.Filters != nil {
		return nil, fmt.Errorf("%w: AddDocuments takes no score threshold or filters", ErrUnsupportedOptions)
	}
	if opts.Deduplicater != nil {
		kept := make([]schema.Document, 0, len(docs))
		for _, d := range docs {
			if !opts.Deduplicater(ctx, d) {
				kept = append(kept, d)
			}
		}
		docs = kept
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, nil
	}
	embedder, err := s.embedderFor(opts)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.PageContent
	}
	vectors, err := embedder.EmbedDocuments(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vectors) != len(docs) {
		return nil, fmt.Errorf("%w: %d vectors for %d documents", ErrEmbedderWrongNumberVectors, len(vectors), len(docs))
	}
	ns := s.nameSpace(opts)
	vdocs := make([]vlc.Document, len(docs))
	for i, d := range docs {
		p, err := json.Marshal(payload{Content: d.PageContent, Metadata: d.Metadata, Namespace: ns})
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		vdocs[i] = vlc.Document{ID: s.idOf(d), Vector: vectors[i], Payload: p}
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.ix == nil {
		defer s.mu.Unlock()
		if _, err := os.Stat(s.path); err == nil {
			// Another process built the index since New: add to it.
			ix, err := vlc.OpenWith(s.path, s.open)
			if err != nil {
				return nil, err
			}
			s.ix = ix
			return s.put(ctx, ix, vdocs)
		}
		ix, err := vlc.Build(ctx, s.path, vdocs, s.build)
		if err != nil {
			return nil, err
		}
		if s.opened { // opened as WithOpenOptions says
			ix.Close()
			if ix, err = vlc.OpenWith(s.path, s.open); err != nil {
				return nil, err
			}
		}
		s.ix = ix
		ids := make([]string, len(vdocs))
		for i, d := range vdocs {
			ids[i] = d.ID
		}
		return ids, nil
	}
	ix := s.ix
	s.mu.Unlock()
	return s.put(ctx, ix, vdocs)
}

// put adds docs to ix, replacing those whose ids it holds when the store
// upserts.
func (s *Store) put(ctx context.Context, ix *vlc.Store, docs []vlc.Document) ([]string, error) {
	if s.upsert {
		return ix.Upsert(ctx, docs)
	}
	return ix.Add(ctx, docs)
}

// DeleteDocuments deletes the documents of the given ids (those
// AddDocuments returned) in one commit. An id the store does not hold is
// an error wrapping vlc.ErrNotFound, and then nothing is deleted.
func (s *Store) DeleteDocuments(ctx context.Context, ids []string) error {
	s.mu.Lock()
	ix, closed := s.ix, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case len(ids) == 0:
		return nil
	case ix == nil:
		return fmt.Errorf("%w: %q (the store is empty)", vlc.ErrNotFound, ids[0])
	}
	return ix.Delete(ctx, ids)
}

// SimilaritySearch embeds the query (EmbedQuery) and returns up to
// numDocuments documents nearest to it, nearest first, with their page
// content, metadata and Score (cosine similarity). It honours
// vectorstores.WithScoreThreshold (0 to 1: hits scoring less are dropped;
// 0 keeps every hit, those of negative similarity too),
// WithFilters (a JSON filter over the metadata, or WithFilter's
// vlc.Filter; applied before ranking), WithNameSpace and WithEmbedder. An
// empty store returns no documents.
func (s *Store) SimilaritySearch(ctx context.Context, query string, numDocuments int, options ...vectorstores.Option) ([]schema.Document, error) {
	opts := getOptions(options)
	if numDocuments < 1 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidNumDocuments, numDocuments)
	}
	if opts.ScoreThreshold < 0 || opts.ScoreThreshold > 1 || math.IsNaN(float64(opts.ScoreThreshold)) {
		return nil, fmt.Errorf("%w: %v", ErrInvalidScoreThreshold, opts.ScoreThreshold)
	}
	filter, err := searchFilter(opts.Filters, s.nameSpace(opts))
	if err != nil {
		return nil, err
	}
	if opts.Deduplicater != nil {
		return nil, fmt.Errorf("%w: SimilaritySearch takes no deduplicater", ErrUnsupportedOptions)
	}
	embedder, err := s.embedderFor(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ix, closed := s.ix, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case ix == nil:
		return nil, nil
	}
	q, err := embedder.EmbedQuery(ctx, query)
	if err != nil {
		return nil, err
	}
	if len(q) != ix.Dim() {
		return nil, fmt.Errorf("%w: the query embeds to %d values, the index has dimension %d", index.ErrDim, len(q), ix.Dim())
	}
	hits, err := ix.Search(ctx, q, vlc.SearchOptions{K: numDocuments, NProbe: s.nprobe, Filter: filter})
	if err != nil {
		return nil, err
	}
	out := make([]schema.Document, 0, len(hits))
	for _, h := range hits {
		score := min(1, max(-1, 1-h.Distance))
		if opts.ScoreThreshold > 0 && score < opts.ScoreThreshold { // 0: no threshold
			continue
		}
		var p payload
		if err := json.Unmarshal(h.Payload, &p); err != nil {
			return nil, fmt.Errorf("document %q: payload: %w", h.ID, err)
		}
		out = append(out, schema.Document{PageContent: p.Content, Metadata: p.Metadata, Score: score})
	}
	return out, nil
}

// usable returns ErrClosed for a closed store.
func (s *Store) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Store) embedderFor(opts vectorstores.Options) (embeddings.Embedder, error) {
	if opts.Embedder != nil {
		return opts.Embedder, nil
	}
	if s.embedder == nil {
		return nil, ErrNoEmbedder
	}
	return s.embedder, nil
}

func (s *Store) nameSpace(opts vectorstores.Options) string {
	if opts.NameSpace != "" {
		return opts.NameSpace
	}
	return s.namespace
}

// idOf is the document's id: its metadata's value at the id key, when
// that is a string that is not empty, else a new UUID.
func (s *Store) idOf(d schema.Document) string {
	if s.idKey != "" {
		if id, ok := d.Metadata[s.idKey].(string); ok && id != "" {
			return id
		}
	}
	return uuid.NewString()
}

func getOptions(options []vectorstores.Option) vectorstores.Options {
	var opts vectorstores.Options
	for _, o := range options {
		o(&opts)
	}
	return opts
}

// searchFilter is the search's filter: a vlc.Filter (WithFilter) as it
// is; else the namespace's documents that the metadata filter (a map in
// the JSON filter syntax, or nil) allows.
func searchFilter(filters any, ns string) (vlc.Filter, error) {
	var where map[string]any
	switch f := filters.(type) {
	case vlc.Filter:
		return f, nil
	case nil:
	case map[string]any:
		where = f
	case map[string]string:
		where = make(map[string]any, len(f))
		for k, v := range f {
			where[k] = v
		}
	default:
		return nil, fmt.Errorf("%w: got %T", ErrInvalidFilters, filters)
	}
	meta, err := metadataWhere(where)
	if err != nil {
		return nil, err
	}
	// A document of the namespace "" has no "namespace" key.
	inNS := map[string]any{"namespace": ns}
	if ns == "" {
		inNS = map[string]any{"$or": []any{map[string]any{"namespace": map[string]any{"$exists": false}}, map[string]any{"namespace": ""}}}
	}
	text, err := json.Marshal(map[string]any{"$and": []any{meta, inNS}})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFilters, err)
	}
	f, err := vlc.ParseFilter(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilters, err)
	}
	return f, nil
}

// metadataWhere rewrites a filter over the metadata into one over the
// payload: each field key k becomes "metadata.k", inside $and, $or and
// $not too; operator objects and values stay as they are.
func metadataWhere(where map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(where))
	for k, v := range where {
		switch k {
		case "$and", "$or":
			list, ok := v.([]any)
			if !ok {
				if maps, isMaps := v.([]map[string]any); isMaps {
					for _, m := range maps {
						list = append(list, m)
					}
					ok = true
				}
			}
			if !ok {
				return nil, fmt.Errorf("%w: %s wants a list of filters, got %T", ErrInvalidFilters, k, v)
			}
			subs := make([]any, len(list))
			for i, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%w: %s[%d] is a %T, not a filter (a map)", ErrInvalidFilters, k, i, e)
				}
				sub, err := metadataWhere(m)
				if err != nil {
					return nil, err
				}
				subs[i] = sub
			}
			out[k] = subs
		case "$not":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: $not wants a filter (a map), got %T", ErrInvalidFilters, v)
			}
			sub, err := metadataWhere(m)
			if err != nil {
				return nil, err
			}
			out[k] = sub
		default:
			if len(k) > 0 && k[0] == '$' {
				return nil, fmt.Errorf("%w: unknown operator %s at the top of a filter (want a metadata key, $and, $or or $not)", ErrInvalidFilters, k)
			}
			out["metadata."+k] = v
		}
	}
	return out, nil
}
