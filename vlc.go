// Package vlc compresses float embeddings into a small, memory-mapped,
// searchable index, and keeps it as a store a service can add to, delete
// from and filter, with its own ids and payloads.
//
//	st, err := vlc.Build(ctx, "docs.vlc", docs, vlc.Options{Metric: "cosine"})
//	hits, err := st.Search(ctx, query, vlc.SearchOptions{K: 10})
//	ids, err := st.Add(ctx, more)
//	err = st.Delete(ctx, []string{"doc-17"})
//
// Compress builds from a file (.f16, .npy, .fvecs) in place of memory;
// Open opens what either wrote. Zero options mean the CLI's defaults.
//
// This package is the front of two others, and every name a caller needs
// is here: package store keeps the store (segments, manifest, lock,
// writes, search, filters) and package pipeline builds an index file
// (plan, train, assign, encode, write). docs/ARCHITECTURE.md draws the
// layers.
package vlc

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/filter"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/errs"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/pipeline"
	"github.com/vlc-embed/vlc/store"
	"github.com/vlc-embed/vlc/vecfile"
)

// The store and what its methods take and return.
type (
	// Store is an open index and the vectors added to and deleted from
	// it since it was built (package store has the details).
	Store = store.Store
	// Document is a vector with the caller's id and an optional payload.
	Document = pipeline.Document
	// Hit is one search result: an id, its payload and distance.
	Hit           = store.Hit
	SearchOptions = store.SearchOptions
	// Filter restricts a search's hits (AllowIDs, Where).
	Filter = store.Filter
	// Originals gives the original vectors a search re-ranks with.
	Originals = store.Originals
	// Rows is a read-only matrix of vectors, such as a file opened with
	// package vecfile.
	Rows   = index.Rows
	Record = store.Record
	Info   = store.Info
	// SegmentInfo describes one file of a store.
	SegmentInfo  = store.SegmentInfo
	MergeSummary = store.MergeSummary
	// Schema and Policy are what Create makes an empty collection with.
	Schema = store.Schema
	Policy = store.Policy
	// ListOptions and Page page through a store's records (List).
	ListOptions = store.ListOptions
	Page        = store.Page
	GetOption   = store.GetOption
	// OpenOptions are OpenWith's: background work on or off, and the
	// device that searches the segments (OpenOptions.Device).
	OpenOptions = store.OpenOptions
	// SearchDevice is a backend opened by name to search stores on
	// (OpenSearchDevice); DeviceInfo is how a store sits on it.
	SearchDevice = store.SearchDevice
	DeviceInfo   = store.DeviceInfo
)

// What builds an index and what it reports.
type (
	// Options for Compress, Build and Retrain; zero values mean the
	// defaults.
	Options = pipeline.Options
	// Summary describes a finished compression.
	Summary = pipeline.Summary
	// OptionError names the Options fields that were refused, and why.
	OptionError = pipeline.OptionError
)

// Defaults and limits.
const (
	DefaultK               = store.DefaultK
	DefaultNProbe          = store.DefaultNProbe
	DefaultRerankFactor    = store.DefaultRerankFactor
	DefaultSamplePerAnchor = pipeline.DefaultSamplePerAnchor
	DriftWarn              = store.DriftWarn
	MaxIDBytes             = index.MaxKeyBytes
	MaxPayloadBytes        = index.MaxPayloadBytes
)

// The categories every error of vlc and its packages falls in, to test
// with errors.Is: a package's own sentinels (index.ErrDim,
// vecfile.ErrSize, ...) match their category too. Each error's message
// names the file, row, id, option or flag it is about.
var (
	ErrArgument    = errs.ErrArgument    // a value given that cannot be used: an option (*OptionError), vector, id, range
	ErrNotFound    = errs.ErrNotFound    // an id the store does not hold live
	ErrDuplicate   = errs.ErrDuplicate   // an id given twice, or already held
	ErrCorrupt     = errs.ErrCorrupt     // a damaged vlc file
	ErrFormat      = errs.ErrFormat      // a file this build cannot read (not vlc's, newer, an unknown input layout)
	ErrLocked      = errs.ErrLocked      // another process held the store's write lock too long
	ErrNotRegular  = errs.ErrNotRegular  // a path that is not a regular file
	ErrOutOfMemory = errs.ErrOutOfMemory // no device memory for the work
	ErrChanged     = errs.ErrChanged     // a file rewritten or truncated while it was mapped
	ErrClosed      = errs.ErrClosed      // a use after Close (fs.ErrClosed)
	ErrUnavailable = errs.ErrUnavailable // a backend not built in or unable to start
)

// Finer errors within ErrArgument and ErrDuplicate, for callers that
// treat them apart.
var (
	ErrDim         = index.ErrDim // a vector's dimension is not the index's
	ErrDuplicateID = index.ErrDuplicateKey
	ErrID          = index.ErrKey
	ErrPayload     = index.ErrPayload
	ErrRange       = pipeline.ErrRange      // a value beyond float16
	ErrUnderflow   = pipeline.ErrUnderflow  // a vector too small for float32 distances
	ErrZeroVector  = pipeline.ErrZeroVector // a zero vector under cosine
	ErrModel       = store.ErrModel         // Merge's inputs were not encoded under one model
	ErrExists      = store.ErrExists        // Create or Snapshot over a file that exists (an ErrDuplicate)
)

// Open opens the index file or store at path.
func Open(path string) (*Store, error) { return store.Open(path) }

// Compress reads the vectors in input (.f16 with Options.Dim, .npy or
// .fvecs), learns anchors, encodes every vector and writes the index to
// output atomically: an existing file there is replaced only by a complete
// index, and a store there (an index that took writes) only with
// Options.Replace.
//
// Should another program truncate input while it is read, Compress returns
// an error naming it (vecfile.ErrChanged) rather than ending the process,
// except while a GPU backend copies it (the fault is then in C code).
func Compress(ctx context.Context, input, output string, opt Options) (sum *Summary, err error) {
	defer fault.Catch(&err, debug.SetPanicOnFault(true), input, vecfile.ErrChanged)
	start := time.Now()
	opt, err = opt.Prepare(output)
	if err != nil {
		return nil, err
	}
	if in, err := os.Stat(input); err == nil {
		if out, err := os.Stat(output); err == nil && os.SameFile(in, out) {
			return nil, fmt.Errorf("output %s is the input file: writing the index would destroy the vectors", output)
		}
	}
	release, err := store.Claim(ctx, output, opt.Replace)
	if err != nil {
		return nil, err
	}
	defer func() { release(err == nil) }()
	src, file, err := pipeline.OpenInput(input, opt)
	if err != nil {
		return nil, err
	}
	defer func() {
		t0 := time.Now()
		file.Close()
		enctrace.Printf("compress trace: closing the input took %v\n", time.Since(t0).Round(time.Millisecond))
	}()
	model, err := readModel(opt)
	if err != nil {
		return nil, err
	}
	return pipeline.Run(ctx, pipeline.Job{Source: src, Output: output, Options: opt, Model: model, Start: start})
}

// Build trains an index on docs held in memory, writes it to path
// atomically (as Compress does a file: on any backend, normalised for the
// cosine metric, trained on float16) and opens it. Documents without an
// ID are named by their position ("0", "1", ...); ids must be unique.
// Options.Dim, IDs, Payloads, Start and End are Compress's and must be
// left zero; AnchorsFrom encodes the documents under a model, as it does
// a file. A store at path (an index that took writes) is replaced only
// with Options.Replace.
func Build(ctx context.Context, path string, docs []Document, opt Options) (*Store, error) {
	start := time.Now()
	switch {
	case opt.IDs != nil || opt.Payloads != nil:
		return nil, &OptionError{Fields: []string{"IDs", "Payloads"}, Reason: "Build takes the ids and payloads from its documents"}
	case opt.Start != 0 || opt.End != 0:
		return nil, &OptionError{Fields: []string{"Start", "End"}, Reason: "Build takes every document; Start and End choose rows of Compress's input"}
	case len(docs) == 0:
		return nil, fmt.Errorf("%w: no documents to build from", index.ErrArgument)
	}
	metric, _ := index.ParseMetric(opt.Metric) // checked by Prepare below
	if err := pipeline.CheckDocuments(docs, len(docs[0].Vector), metric); err != nil {
		return nil, err
	}
	if opt.Dim != 0 && opt.Dim != len(docs[0].Vector) {
		return nil, fmt.Errorf("%w: documents have dimension %d, Options.Dim says %d", index.ErrDim, len(docs[0].Vector), opt.Dim)
	}
	opt, err := opt.Prepare(path)
	if err != nil {
		return nil, err
	}
	release, err := store.Claim(ctx, path, opt.Replace)
	if err != nil {
		return nil, err
	}
	model, err := readModel(opt)
	if err == nil {
		_, err = pipeline.Run(ctx, pipeline.Job{Source: pipeline.DocumentSource("documents", docs), Output: path, Options: opt, Model: model, Start: start})
	}
	release(err == nil)
	if err != nil {
		return nil, err
	}
	return Open(path)
}

// readModel is Options.AnchorsFrom's model, nil where it names none.
func readModel(opt Options) (*pipeline.Model, error) {
	if opt.AnchorsFrom == "" {
		return nil, nil
	}
	return store.ReadModel(opt.AnchorsFrom, opt)
}

// Merge writes to output, atomically, one index holding the live rows of
// every input (index files or stores, encoded under one model), input
// after input; store.Merge has the details.
func Merge(ctx context.Context, output string, inputs []string) (*MergeSummary, error) {
	return store.Merge(ctx, output, inputs)
}

// RowOriginals serves Originals from a matrix whose row i is the vector
// with id i in decimal: the input file of an index compressed without
// ids (store.RowOriginals has the details).
func RowOriginals(rows Rows) Originals { return store.RowOriginals(rows) }

// Create makes an empty collection at path with schema s, and opens it
// (store.Create).
func Create(ctx context.Context, path string, s Schema) (*Store, error) {
	return store.Create(ctx, path, s)
}

// CreateTemp makes an empty collection in a temporary folder that Close
// removes; Snapshot saves it.
func CreateTemp(s Schema) (*Store, error) { return store.CreateTemp(s) }

// ParseFilter reads a filter in the JSON syntax of Chroma and MongoDB:
// {"cat": "a"}, {"n": {"$gte": 10, "$lt": 20}}, {"$or": [...]}.
func ParseFilter(data []byte) (Filter, error) { return store.ParseFilter(data) }

// OpenWith is Open with options (OpenOptions.Manual: no background work;
// OpenOptions.Device: search on a GPU).
func OpenWith(path string, opt OpenOptions) (*Store, error) { return store.OpenWith(path, opt) }

// OpenSearchDevice opens a backend by name ("cpu", "cuda", "webgpu" or
// "auto") on devices ("" for one) to search stores on: pass its Searcher
// as OpenOptions.Device (nil, searching on the CPU, for cpu and for auto
// without a GPU backend that searches: Note says why). Close it after
// the stores. Several devices hold each store as spread says: SpreadLists
// (each device a share of the lists) or SpreadQueries (each device the
// whole store, a share of each batch).
func OpenSearchDevice(backend, devices string, spread Spread) (*SearchDevice, error) {
	return store.OpenSearchDevice(backend, devices, spread)
}

// Spread is how a search uses several devices.
type Spread = device.Spread

// The spreads over several devices.
const (
	SpreadLists   = device.SpreadLists
	SpreadQueries = device.SpreadQueries
)

// ParseSpread reads "lists" or "queries" (a -spread flag's value).
func ParseSpread(s string) (Spread, error) { return device.ParseSpread(s) }

// Remove deletes a store (or index file) and its segment folder.
func Remove(ctx context.Context, path string) error { return store.Remove(ctx, path) }

// Match is a filter over the JSON payloads, built with package filter
// (filter.Eq, filter.In, filter.Gte, filter.And, ...) or read by filter.Parse.
func Match(e filter.Expr) Filter { return store.Match(e) }

// WithVector asks Get for the decoded vector too.
func WithVector() GetOption { return store.WithVector() }

// AllowIDs is a filter that allows only the given ids.
func AllowIDs(ids ...string) Filter { return store.AllowIDs(ids...) }

// Where is a filter that allows the vectors keep returns true for.
func Where(keep func(id string, payload []byte) bool) Filter { return store.Where(keep) }
