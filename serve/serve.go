// Package serve answers vlc indexes over HTTP with JSON: search (one query
// or a batch, with k, nprobe, a radius and filters in the JSON syntax of
// Chroma and MongoDB), get (with the vector on request), count and list,
// add, upsert, delete and payload updates by id, the index's info, and
// collections created, dropped, compacted, retrained and snapshotted in a
// data folder, beside health checks, Prometheus metrics and an OpenAPI
// description. It is the handler behind `vlc serve`; a Go program can
// mount it in its own server.
//
// The server is meant to be small and safe by default: every request has
// a size limit and a deadline, bad input gets a 4xx naming the problem,
// and writes and administration need the bearer token when one is set
// (reads do not: search, get, count, list and metrics are open to whoever
// reaches the address). The server holds no store's write lock between
// requests: each write takes it for its own commit, so other processes
// (vlc add, vlc compact) write the same store meanwhile. Memory is
// bounded whatever the number of clients: a request's body is read first,
// its bytes held under a budget shared by all requests (Limits.BodyMemory),
// and only then does the request take one of a bounded number of slots
// (Limits.InFlight) to be decoded and answered, so that clients sending
// their bodies slowly hold memory under the budget but no slot, and do
// not hold up the others. A program mounting the handler should give its
// http.Server a ReadTimeout, as vlc serve does, so that a body that never
// ends is cut off (without one, the handler cuts off a body's reading at
// the request's timeout).
package serve

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/device"
	"golang.org/x/sync/semaphore"
)

// Limits bounds what one request may ask for. A request beyond a limit
// gets 413 (the body) or 400 (the others), naming the limit.
type Limits struct {
	BodyBytes int64         // request body (default 32 MiB)
	K         int           // hits per query (default 1,000)
	Batch     int           // queries per search, documents per add, ids per delete (default 1,000)
	NProbe    int           // lists per query (default 4,096; beyond an index's lists is clamped)
	Timeout   time.Duration // per request (default 30 s)
	// Hits bounds the candidates one search request may hold: queries
	// times k, times the re-rank factor when re-ranking (default 100,000).
	Hits int
	// BodyMemory bounds the bytes of request bodies held at once, all
	// requests together: bodies being read, and bodies read and waiting
	// for a slot or being answered (default 128 MiB, four bodies of the
	// default size; never less than BodyBytes). A body with a
	// Content-Length takes its bytes before it is read; one without (sent
	// chunked) takes them as it arrives, 4 KiB, then 8 KiB, doubling up
	// to 1 MiB at a time. A request waits for them, first come first
	// served, and gets 503 if its timeout passes first. They are given
	// back once the request is answered.
	BodyMemory int64
	// InFlight is the most requests answered at once (default 4 per
	// core). A request takes a slot once its body is read, so that
	// clients sending slowly hold none; others wait, their bodies held
	// under BodyMemory, and get 503 if their timeout passes first.
	// Decoding a body and searching happen in a slot.
	InFlight int
}

// MaxEf bounds a search request's ef: the rows a walk's beam keeps.
const MaxEf = 4096

// DefaultLimits are the limits of a zero Limits field.
var DefaultLimits = Limits{BodyBytes: 32 << 20, K: 1000, Batch: 1000, NProbe: 4096, Timeout: 30 * time.Second, Hits: 100_000, BodyMemory: 128 << 20, InFlight: 4 * runtime.GOMAXPROCS(0)}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.BodyBytes > 0 {
		d.BodyBytes = l.BodyBytes
	}
	if l.K > 0 {
		d.K = l.K
	}
	if l.Batch > 0 {
		d.Batch = l.Batch
	}
	if l.NProbe > 0 {
		d.NProbe = l.NProbe
	}
	if l.Timeout > 0 {
		d.Timeout = l.Timeout
	}
	if l.Hits > 0 {
		d.Hits = l.Hits
	}
	if l.BodyMemory > 0 {
		d.BodyMemory = l.BodyMemory
	}
	d.BodyMemory = max(d.BodyMemory, d.BodyBytes) // room for one body of the limit
	if l.InFlight > 0 {
		d.InFlight = l.InFlight
	}
	return d
}

// Server serves a set of open indexes by name. Its handler is safe for
// concurrent use. The indexes given to New stay the caller's to close;
// those the server opened (the collections of Config.Data) are closed by
// Close.
type Server struct {
	mu        sync.RWMutex       // guards indexes
	indexes   map[string]*served // by name
	originals map[string]vlc.Originals
	token     string
	data      string          // Config.Data
	maintain  bool            // Config.Maintain
	device    device.Searcher // Config.Device
	limits    Limits
	metrics   *metrics
	mux       *http.ServeMux
	routes    []string // the API's patterns, as registered
	// searching admits GOMAXPROCS searches at a time: each already uses
	// every core for a batch, and more at once only adds scheduling
	// (many concurrent clients on few cores).
	searching chan struct{}
	inFlight  chan struct{}       // Limits.InFlight
	bodies    *semaphore.Weighted // Limits.BodyMemory
	bodyBytes atomic.Int64        // taken from bodies now, for the metric
}

// Config configures New.
type Config struct {
	// Token, when not empty, is the bearer token that writes (add,
	// upsert, delete, payloads) and administration (create, drop,
	// compact, retrain, snapshot, maintain) must present:
	// "Authorization: Bearer TOKEN".
	Token  string
	Limits Limits
	// Originals gives, by index name, the original vectors a search may
	// re-rank with ("rerank": true); an index without them refuses it.
	Originals map[string]vlc.Originals
	// Data is a folder of collections: New serves each NAME.vlc in it as
	// NAME (making the folder if it is missing), POST /v1/indexes creates
	// collections there, and only those may be dropped. Without it the
	// server serves the indexes given to New and creates none.
	Data string
	// Maintain runs each collection's due background work (merging small
	// segments, training, vlc.Store.Maintain) in the background after
	// every write to it, and opens the collections of Data with the
	// store's own background work on. Without it those are opened
	// vlc.OpenOptions{Manual: true} (open the indexes given to New the
	// same way), and nothing runs that work on its own:
	// POST /v1/indexes/{name}/maintain runs it, as do the compact and
	// retrain endpoints and vlc compact and vlc retrain from a shell.
	Maintain bool
	// Device, when set, searches the collections of Data (and those
	// created or snapshotted over HTTP) on a GPU: each segment in the
	// device's memory (vlc.OpenOptions.Device). Open the indexes given to
	// New with the same option. It must outlive the Server.
	Device device.Searcher
}

// New returns a server for the indexes, by name (names are path segments:
// letters, digits, '.', '_' and '-'), and the collections in cfg.Data.
func New(indexes map[string]*vlc.Store, cfg Config) (*Server, error) {
	for name := range indexes {
		if !validName(name) {
			return nil, fmt.Errorf("serve: index name %q: use letters, digits, '.', '_' and '-'", name)
		}
	}
	for name := range cfg.Originals {
		if indexes[name] == nil {
			return nil, fmt.Errorf("serve: originals for %q, which is not an index served", name)
		}
	}
	s := &Server{indexes: map[string]*served{}, originals: cfg.Originals, token: cfg.Token, data: cfg.Data, maintain: cfg.Maintain, device: cfg.Device,
		limits: cfg.Limits.withDefaults(), searching: make(chan struct{}, runtime.GOMAXPROCS(0))}
	for name, ix := range indexes {
		s.indexes[name] = newServed(ix, false)
	}
	if cfg.Data != "" {
		if err := s.openData(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.inFlight = make(chan struct{}, s.limits.InFlight)
	s.bodies = semaphore.NewWeighted(s.limits.BodyMemory)
	s.metrics = newMetrics(s)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /openapi.json", s.openapi)
	s.route(mux, "GET /v1/indexes", "indexes", s.list)
	s.route(mux, "POST /v1/indexes", "create", s.write(s.create))
	s.route(mux, "GET /v1/indexes/{name}", "info", s.info)
	s.route(mux, "DELETE /v1/indexes/{name}", "drop", s.write(s.drop))
	s.route(mux, "POST /v1/indexes/{name}/search", "search", s.search)
	s.route(mux, "POST /v1/indexes/{name}/count", "count", s.count)
	s.route(mux, "POST /v1/indexes/{name}/list", "list", s.listRecords)
	s.route(mux, "GET /v1/indexes/{name}/documents/{id}", "get", s.get)
	s.route(mux, "POST /v1/indexes/{name}/documents", "add", s.write(s.add))
	s.route(mux, "POST /v1/indexes/{name}/upsert", "upsert", s.write(s.upsert))
	s.route(mux, "POST /v1/indexes/{name}/payloads", "payloads", s.write(s.setPayloads))
	s.route(mux, "POST /v1/indexes/{name}/delete", "delete", s.write(s.delete))
	s.route(mux, "POST /v1/indexes/{name}/compact", "compact", s.write(s.compact))
	s.route(mux, "POST /v1/indexes/{name}/retrain", "retrain", s.write(s.retrain))
	s.route(mux, "POST /v1/indexes/{name}/snapshot", "snapshot", s.write(s.snapshot))
	s.route(mux, "POST /v1/indexes/{name}/maintain", "maintain", s.write(s.maintainNow))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no such endpoint: %s %s (see /openapi.json)", r.Method, r.URL.Path)
	})
	s.mux = mux
	return s, nil
}

func validName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// route registers an API handler: its context given the request
// deadline, its body (a POST's) read first under the body budget, then a
// slot taken for the work, a panic in it answered with 500, and its count
// and latency recorded under endpoint.
func (s *Server) route(mux *http.ServeMux, pattern, endpoint string, h func(http.ResponseWriter, *http.Request) (int, error)) {
	s.routes = append(s.routes, pattern)
	hasBody := strings.HasPrefix(pattern, "POST ")
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(r.Context(), s.limits.Timeout)
		defer cancel()
		r = r.WithContext(ctx)
		name := r.PathValue("name")
		if s.lookup(name) == nil {
			name = "" // no label per unknown name a client makes up
		}
		if hasBody {
			held, status, err := s.readBody(w, r)
			defer s.releaseBody(held)
			if err != nil {
				// The rest of the body is not waited for (the server
				// would read up to 256 KiB of it before the reply).
				w.Header().Set("Connection", "close")
				fail(w, status, "%v", err)
				s.metrics.observe(endpoint, name, status, time.Since(start))
				return
			}
		}
		select { // the body is in: a slow sender holds no slot
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
		case <-ctx.Done():
			fail(w, http.StatusServiceUnavailable, "server busy: no slot within the request timeout")
			s.metrics.observe(endpoint, name, http.StatusServiceUnavailable, time.Since(start))
			return
		}
		status := func() (status int) {
			defer func() {
				if p := recover(); p != nil {
					status = http.StatusInternalServerError
					fail(w, status, "internal error: %v", p)
				}
			}()
			status, err := h(w, r)
			if err != nil {
				if status < 400 {
					status = statusOf(err)
				}
				fail(w, status, "%v", err)
			}
			return status
		}()
		s.metrics.observe(endpoint, name, status, time.Since(start))
	})
}

// readBody reads r's body into memory, at most Limits.BodyBytes, its bytes
// taken from the body budget (Limits.BodyMemory) before they are read, and
// replaces r.Body by the bytes read. It returns the bytes of the budget it
// took, which the caller gives back (releaseBody) once the request is
// answered, also when it fails, with the status and error to answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (held int64, status int, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return 0, 0, nil
	}
	limit := s.limits.BodyBytes
	if r.ContentLength > limit {
		return 0, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over the limit of %d bytes", limit)
	}
	ctx := r.Context()
	// A server without a ReadTimeout would wait for a body that never
	// ends, its bytes taken: stop reading at the request's deadline.
	if hs, _ := ctx.Value(http.ServerContextKey).(*http.Server); hs == nil || hs.ReadTimeout <= 0 {
		if d, ok := ctx.Deadline(); ok {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(d) == nil {
				defer rc.SetReadDeadline(time.Time{})
			}
		}
	}
	take := func(n int64) error {
		if err := s.bodies.Acquire(ctx, n); err != nil {
			return errors.New("server busy: no memory for the request body within the request timeout")
		}
		held += n
		s.bodyBytes.Add(n)
		return nil
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var parts []io.Reader
	if r.ContentLength >= 0 {
		if err := take(r.ContentLength); err != nil {
			return held, http.StatusServiceUnavailable, err
		}
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, buf); err != nil {
			status, err := bodyError(ctx, err)
			return held, status, err
		}
		parts = append(parts, bytes.NewReader(buf))
	} else {
		for size, total := int64(4<<10), int64(0); ; size = min(2*size, 1<<20) {
			n := min(size, limit-total)
			if n == 0 {
				n = 1 // a byte past the limit: the end of the body, or the reader's error
			} else if err := take(n); err != nil {
				return held, http.StatusServiceUnavailable, err
			}
			buf := make([]byte, n)
			got, err := fill(body, buf)
			total += int64(got)
			if got > 0 {
				parts = append(parts, bytes.NewReader(buf[:got]))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				status, err := bodyError(ctx, err)
				return held, status, err
			}
		}
	}
	r.Body = io.NopCloser(io.MultiReader(parts...))
	return held, 0, nil
}

// releaseBody gives back bytes readBody took from the body budget.
func (s *Server) releaseBody(held int64) {
	if held > 0 {
		s.bodyBytes.Add(-held)
		s.bodies.Release(held)
	}
}

// fill reads into buf until it is full or the reader fails (io.EOF at
// the end).
func fill(rd io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := rd.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// bodyError is the status and error for a body that could not be read.
func bodyError(ctx context.Context, err error) (int, error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body over the limit of %d bytes", mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return http.StatusRequestTimeout, errors.New("request body not received in time")
	}
	return http.StatusBadRequest, fmt.Errorf("request body: %v", err)
}

// write wraps a handler that changes an index: it needs the token.
func (s *Server) write(h func(http.ResponseWriter, *http.Request) (int, error)) func(http.ResponseWriter, *http.Request) (int, error) {
	return func(w http.ResponseWriter, r *http.Request) (int, error) {
		if s.token != "" {
			auth := r.Header.Get("Authorization")
			scheme, got, ok := strings.Cut(auth, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") { // the scheme is case-insensitive (RFC 7235)
				w.Header().Set("WWW-Authenticate", `Bearer realm="vlc"`)
				return http.StatusUnauthorized, errors.New("writes need the bearer token: Authorization: Bearer TOKEN")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
				return http.StatusForbidden, errors.New("wrong bearer token")
			}
		}
		return h(w, r)
	}
}

// notFound is an error answered with 404 as it is.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }

// statusOf maps an error of the library to a status.
func statusOf(err error) int {
	var mbe *http.MaxBytesError
	var nf *notFound
	switch {
	case errors.As(err, &nf):
		return http.StatusNotFound
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, vlc.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return 499 // the client went away
	case errors.Is(err, vlc.ErrArgument):
		return http.StatusBadRequest
	case errors.Is(err, vlc.ErrDuplicate), errors.Is(err, vlc.ErrLocked):
		// The request is sound but the index's state refuses it: an id
		// already there (add repeats its own ids as 400, before this),
		// or another writer's lock.
		return http.StatusConflict
	case errors.Is(err, vlc.ErrUnavailable):
		// A capability this build (or this version of the store) lacks.
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// errorBody is every error's JSON.
type errorBody struct {
	Error string `json:"error"`
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody{fmt.Sprintf(format, args...)})
}

func reply(w http.ResponseWriter, v any) (int, error) {
	return replyStatus(w, http.StatusOK, v)
}

func replyStatus(w http.ResponseWriter, status int, v any) (int, error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status, nil
}

// decode reads a JSON body into v, strictly: unknown fields and trailing
// data are errors, so that a misspelt option is not silently ignored. The
// body is in memory already (readBody).
func decode(r *http.Request, v any) (int, error) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("request body: %v", err)
	}
	if dec.More() {
		return http.StatusBadRequest, errors.New("request body: data after the JSON object")
	}
	return 0, nil
}

// decodeOptional is decode for a body that may be left out: an empty
// body leaves v as it is.
func decodeOptional(r *http.Request, v any) (int, error) {
	if r.Body == nil {
		return 0, nil
	}
	br := bufio.NewReader(r.Body)
	if _, err := br.Peek(1); err == io.EOF {
		return 0, nil
	}
	r.Body = io.NopCloser(br)
	return decode(r, v)
}

func (s *Server) index(r *http.Request) (*vlc.Store, string, error) {
	name := r.PathValue("name")
	sv := s.lookup(name)
	if sv == nil {
		return nil, name, &notFound{fmt.Sprintf("no index named %q (have: %s)", name, strings.Join(s.names(), ", "))}
	}
	return sv.ix, name, nil
}

// lookup returns the index served as name, or nil.
func (s *Server) lookup(name string) *served {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.indexes[name]
}

func (s *Server) names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.indexes))
	for n := range s.indexes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when every index answers Info (it is open and
// readable), else 503 naming the first that does not.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	for _, n := range s.names() {
		sv := s.lookup(n)
		if sv == nil {
			continue // dropped meanwhile
		}
		if _, err := sv.ix.Info(); err != nil {
			fail(w, http.StatusServiceUnavailable, "index %q: %v", n, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintln(w, "ready")
}

// InfoBody is an index's description.
type InfoBody struct {
	Name     string  `json:"name"`
	Dim      int     `json:"dim"`
	Metric   string  `json:"metric"`
	Lists    int     `json:"lists"`
	Live     int     `json:"live"`
	Deleted  int     `json:"deleted"`
	Bytes    int64   `json:"bytes"`
	Segments int     `json:"segments"`
	Graphs   int     `json:"graphs"` // segments that hold a graph
	Drift    float64 `json:"drift"`
}

func (s *Server) describe(name string, ix *vlc.Store) (InfoBody, error) {
	in, err := ix.Info()
	if err != nil {
		return InfoBody{}, err
	}
	b := InfoBody{Name: name, Dim: in.Dim, Metric: in.Meta.Metric.String(), Lists: in.Lists, Live: in.Rows,
		Deleted: in.Deleted, Bytes: in.Bytes, Segments: len(in.Segments), Drift: in.Drift}
	for _, seg := range in.Segments {
		if seg.Graph {
			b.Graphs++
		}
	}
	return b, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) (int, error) {
	out := []InfoBody{}
	for _, n := range s.names() {
		sv := s.lookup(n)
		if sv == nil {
			continue // dropped meanwhile
		}
		b, err := s.describe(n, sv.ix)
		if err != nil {
			return 0, err
		}
		out = append(out, b)
	}
	return reply(w, out)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, name, err := s.index(r)
	if err != nil {
		return 0, err
	}
	b, err := s.describe(name, ix)
	if err != nil {
		return 0, err
	}
	return reply(w, b)
}

// SearchRequest is a search: one vector, or a batch of them.
type SearchRequest struct {
	Vector  vector   `json:"vector,omitempty"`
	Vectors []vector `json:"vectors,omitempty"`
	// VectorsF32 is a batch as base64 of little-endian float32 values,
	// row after row: a fifth of the bytes of JSON numbers and no parsing
	// (for clients holding arrays, such as numpy's tobytes()).
	VectorsF32 []byte `json:"vectors_f32,omitempty"`
	K          *int   `json:"k,omitempty"`      // default 10
	NProbe     *int   `json:"nprobe,omitempty"` // default 16
	// Ef is the width of a walk of a segment's graph, where a segment
	// holds one (vlc.SearchOptions.Ef): 0 or absent for the graph's
	// default, -1 to scan the lists of every segment, at most MaxEf.
	Ef *int `json:"ef,omitempty"`
	// Where is a filter in the JSON syntax of Chroma and MongoDB
	// (vlc.ParseFilter): {"cat": "a"}, {"n": {"$gte": 10, "$lt": 20}},
	// {"$or": [...]}. Filter is the older form (ids, or equality of
	// fields); a search gives one or the other.
	Where  json.RawMessage `json:"where,omitempty"`
	Filter *Filter         `json:"filter,omitempty"`
	// Radius, when set, drops the hits farther than it (at most k hits
	// still come back).
	Radius *float32 `json:"radius,omitempty"`
	// Payloads asks for each hit's payload (default: true).
	Payloads *bool `json:"payloads,omitempty"`
	// Rerank re-scores the best RerankFactor*k candidates (default 10)
	// exactly from the index's original vectors (served with
	// -rerank NAME=FILE) and returns the best k of those.
	Rerank       bool `json:"rerank,omitempty"`
	RerankFactor int  `json:"rerank_factor,omitempty"`
}

// Filter restricts hits: to the given ids, and/or to payloads that are
// JSON objects holding every key of Where with an equal value.
type Filter struct {
	IDs   []string                   `json:"ids,omitempty"`
	Where map[string]json.RawMessage `json:"where,omitempty"`
}

// HitBody is one hit. Payload is the stored payload when it is JSON,
// else PayloadBase64 holds it.
type HitBody struct {
	ID            string          `json:"id"`
	Distance      float32         `json:"distance"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
}

// SearchResponse holds the hits of a one-vector search in Hits, of a
// batch in Results (one list per vector, in order).
type SearchResponse struct {
	Hits    []HitBody   `json:"hits,omitempty"`
	Results [][]HitBody `json:"results,omitempty"`
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, _, err := s.index(r)
	if err != nil {
		return 0, err
	}
	var req SearchRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	queries := make([][]float32, len(req.Vectors))
	for i, v := range req.Vectors {
		queries[i] = v
	}
	given := 0
	for _, b := range []bool{req.Vector != nil, req.Vectors != nil, req.VectorsF32 != nil} {
		if b {
			given++
		}
	}
	if req.VectorsF32 != nil {
		d := 4 * ix.Dim()
		if len(req.VectorsF32)%d != 0 || len(req.VectorsF32) == 0 {
			return http.StatusBadRequest, fmt.Errorf("vectors_f32 holds %d bytes, not a whole number of %d-value rows (%d bytes each)", len(req.VectorsF32), ix.Dim(), d)
		}
		rows := len(req.VectorsF32) / d
		if rows > s.limits.Batch {
			return http.StatusBadRequest, fmt.Errorf("%d vectors in one search, over the limit of %d", rows, s.limits.Batch)
		}
		all := make([]float32, rows*ix.Dim())
		for i := range all {
			all[i] = math.Float32frombits(binary.LittleEndian.Uint32(req.VectorsF32[4*i:]))
		}
		queries = make([][]float32, rows)
		for i := range queries {
			queries[i] = all[i*ix.Dim() : (i+1)*ix.Dim()]
		}
	}
	switch {
	case given > 1:
		return http.StatusBadRequest, errors.New(`give one of "vector", "vectors" and "vectors_f32"`)
	case req.Vector != nil:
		queries = [][]float32{req.Vector}
	case len(queries) == 0:
		return http.StatusBadRequest, errors.New(`no query: give "vector" (one), or "vectors" or "vectors_f32" (a batch)`)
	case len(req.Vectors) > s.limits.Batch:
		return http.StatusBadRequest, fmt.Errorf("%d vectors in one search, over the limit of %d", len(req.Vectors), s.limits.Batch)
	}
	for i, q := range queries {
		if len(q) != ix.Dim() {
			return http.StatusBadRequest, fmt.Errorf("vector %d has %d values, the index %d", i, len(q), ix.Dim())
		}
		for j, v := range q {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return http.StatusBadRequest, fmt.Errorf("vector %d, value %d is %v", i, j, v)
			}
		}
	}
	opt := vlc.SearchOptions{K: vlc.DefaultK, NProbe: vlc.DefaultNProbe}
	if req.K != nil {
		if opt.K = *req.K; opt.K < 1 || opt.K > s.limits.K {
			return http.StatusBadRequest, fmt.Errorf("k %d: must be 1 to %d (the limit); leave it out for %d", opt.K, s.limits.K, vlc.DefaultK)
		}
	}
	if req.NProbe != nil {
		if opt.NProbe = *req.NProbe; opt.NProbe < 1 || opt.NProbe > s.limits.NProbe {
			return http.StatusBadRequest, fmt.Errorf("nprobe %d: must be 1 to %d (the limit); leave it out for %d", opt.NProbe, s.limits.NProbe, vlc.DefaultNProbe)
		}
	}
	if req.Ef != nil {
		if opt.Ef = *req.Ef; opt.Ef < -1 || opt.Ef > MaxEf {
			return http.StatusBadRequest, fmt.Errorf("ef %d: must be -1 (the lists) to %d; leave it out for the graph's default", opt.Ef, MaxEf)
		}
	}
	if req.Rerank {
		orig := s.originals[r.PathValue("name")]
		if orig == nil {
			return http.StatusBadRequest, errors.New("re-rank: this index is served without its original vectors (vlc serve -rerank NAME=FILE)")
		}
		if req.RerankFactor < 0 || req.RerankFactor > s.limits.K {
			return http.StatusBadRequest, fmt.Errorf("rerank_factor %d: must be 1 to %d, or 0 for the default %d", req.RerankFactor, s.limits.K, vlc.DefaultRerankFactor)
		}
		opt.Rerank, opt.RerankFactor = orig, req.RerankFactor
	} else if req.RerankFactor != 0 {
		return http.StatusBadRequest, errors.New(`rerank_factor without "rerank": true`)
	}
	if opt.Filter, err = filterOf(req.Where, req.Filter); err != nil {
		return http.StatusBadRequest, err
	}
	if req.Radius != nil {
		opt.Radius = *req.Radius
	}
	withPayloads := req.Payloads == nil || *req.Payloads
	hits := len(queries) * opt.K
	if opt.Rerank != nil {
		hits *= cmp.Or(opt.RerankFactor, vlc.DefaultRerankFactor)
	}
	if hits > s.limits.Hits {
		return http.StatusBadRequest, fmt.Errorf("%d queries x k %d (x the re-rank factor) is %d candidates, over the limit of %d a request", len(queries), opt.K, hits, s.limits.Hits)
	}
	select {
	case s.searching <- struct{}{}:
		defer func() { <-s.searching }() // held until the reply is written
	case <-r.Context().Done():
		return 0, r.Context().Err()
	}
	var found [][]vlc.Hit
	if req.Vector != nil { // one query: no batch set-up
		var h []vlc.Hit
		h, err = ix.Search(r.Context(), req.Vector, opt)
		found = [][]vlc.Hit{h}
	} else {
		found, err = ix.SearchBatch(r.Context(), queries, opt)
	}
	if err != nil {
		return 0, err
	}
	if in, err := ix.DeviceInfo(); err == nil && in.OnDevice > 0 {
		s.metrics.deviceBatch.Observe(float64(len(found)))
	}
	// The field is there even when empty: {"hits": []}, not {}.
	if req.Vector != nil {
		return reply(w, struct {
			Hits []HitBody `json:"hits"`
		}{hitBodies(found[0], withPayloads)})
	}
	results := make([][]HitBody, len(found))
	for i, h := range found {
		results[i] = hitBodies(h, withPayloads)
	}
	return reply(w, struct {
		Results [][]HitBody `json:"results"`
	}{results})
}

func hitBodies(hits []vlc.Hit, payloads bool) []HitBody {
	out := make([]HitBody, len(hits))
	for i, h := range hits {
		out[i] = HitBody{ID: h.ID, Distance: h.Distance}
		if payloads {
			out[i].Payload, out[i].PayloadBase64 = payloadBody(h.Payload)
		}
	}
	return out
}

// payloadBody returns a payload as JSON when it is JSON, else as bytes
// for base64.
func payloadBody(p []byte) (json.RawMessage, []byte) {
	if len(p) == 0 {
		return nil, nil
	}
	if json.Valid(p) {
		return p, nil
	}
	return nil, p
}

// build turns the filter into the library's: ids by AllowIDs, where by a
// test of each candidate's payload.
func (f *Filter) build() (vlc.Filter, error) {
	if f.IDs != nil && len(f.Where) > 0 {
		return nil, errors.New(`filter: give "ids" or "where", not both`)
	}
	if f.IDs != nil { // an empty list allows nothing
		return vlc.AllowIDs(f.IDs...), nil
	}
	// Each value in a canonical form (decoded, encoded again) once, not
	// once for every candidate a search tests.
	want := make(map[string]string, len(f.Where))
	for k, raw := range f.Where {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("filter: where %q: %v", k, err)
		}
		want[k] = canonical(v)
	}
	return vlc.Where(func(_ string, payload []byte) bool { return matches(payload, want) }), nil
}

// matches reports whether payload is a JSON object holding every key of
// want with an equal value (numbers compared as float64).
func matches(payload []byte, want map[string]string) bool {
	if len(want) == 0 {
		return true
	}
	var obj map[string]any
	if json.Unmarshal(payload, &obj) != nil {
		return false
	}
	for k, v := range want {
		got, ok := obj[k]
		if !ok || canonical(got) != v {
			return false
		}
	}
	return true
}

// canonical is a decoded JSON value encoded again: equal values give
// equal text (numbers as float64, object keys sorted).
func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// DocumentBody is a document to add, and what get and list return (the
// vector only when asked for: the vector as the code gives it back, not
// the one added). Payload is any JSON value, stored as its bytes;
// PayloadBase64 stores raw bytes.
type DocumentBody struct {
	ID            string          `json:"id"`
	Vector        vector          `json:"vector,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, _, err := s.index(r)
	if err != nil {
		return 0, err
	}
	var opts []vlc.GetOption
	switch v := r.URL.Query().Get("vector"); v {
	case "", "false":
	case "true":
		opts = append(opts, vlc.WithVector())
	default:
		return http.StatusBadRequest, fmt.Errorf("vector=%q: want true or false", v)
	}
	rec, err := ix.Get(r.PathValue("id"), opts...)
	if err != nil {
		return 0, err
	}
	return reply(w, documentBody(rec))
}

// AddRequest adds documents; AddResponse gives their ids in order (ids
// chosen by the index for documents without one). An id already in the
// index is 409 Conflict naming it, an id given twice in one request 400;
// either way nothing is added.
type AddRequest struct {
	Documents []DocumentBody `json:"documents"`
}

type AddResponse struct {
	IDs []string `json:"ids"`
}

// readOnly refuses writes to an index served with its original vectors:
// they are looked up by row number, which added or reused ids would not
// match.
func (s *Server) readOnly(name string) error {
	if s.originals[name] != nil {
		return fmt.Errorf("index %q is served with its original vectors for re-ranking (-rerank), and is read-only", name)
	}
	return nil
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) (int, error) {
	return s.put(w, r, (*vlc.Store).Add)
}

// upsert is add, except that a document whose id the index holds
// replaces it (in one commit).
func (s *Server) upsert(w http.ResponseWriter, r *http.Request) (int, error) {
	return s.put(w, r, (*vlc.Store).Upsert)
}

// put decodes an add's documents and writes them with write (Add or
// Upsert).
func (s *Server) put(w http.ResponseWriter, r *http.Request, write func(*vlc.Store, context.Context, []vlc.Document) ([]string, error)) (int, error) {
	ix, name, err := s.index(r)
	if err != nil {
		return 0, err
	}
	if err := s.readOnly(name); err != nil {
		return http.StatusConflict, err
	}
	var req AddRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	switch {
	case len(req.Documents) == 0:
		return http.StatusBadRequest, errors.New(`no "documents" to add`)
	case len(req.Documents) > s.limits.Batch:
		return http.StatusBadRequest, fmt.Errorf("%d documents in one add, over the limit of %d", len(req.Documents), s.limits.Batch)
	}
	docs := make([]vlc.Document, len(req.Documents))
	first := make(map[string]int, len(req.Documents)) // document by id
	for i, d := range req.Documents {
		if j, dup := first[d.ID]; dup && d.ID != "" {
			return http.StatusBadRequest, fmt.Errorf("documents %d and %d have the same id %q", j, i, d.ID)
		}
		first[d.ID] = i
		payload, err := d.payload(i)
		if err != nil {
			return http.StatusBadRequest, err
		}
		if len(d.Vector) != ix.Dim() {
			return http.StatusBadRequest, fmt.Errorf("document %d: vector has %d values, the index %d", i, len(d.Vector), ix.Dim())
		}
		docs[i] = vlc.Document{ID: d.ID, Vector: d.Vector, Payload: payload}
	}
	// The write is made and committed (synced) before the reply: an id
	// acknowledged survives a crash. It is not cut short by the
	// request's deadline once started.
	ids, err := write(ix, context.WithoutCancel(r.Context()), docs)
	if err != nil {
		return 0, err
	}
	s.wrote(name)
	return reply(w, AddResponse{IDs: ids})
}

// payload is the document's payload bytes: its JSON, or its base64's
// bytes (nil when it has neither).
func (d DocumentBody) payload(i int) ([]byte, error) {
	if d.Payload != nil && d.PayloadBase64 != nil {
		return nil, fmt.Errorf(`document %d: give "payload" or "payload_base64", not both`, i)
	}
	if d.Payload != nil {
		return d.Payload, nil
	}
	return d.PayloadBase64, nil
}

// DeleteRequest deletes documents by id. An id the index does not hold
// is a 404 naming it, and then nothing is deleted.
type DeleteRequest struct {
	IDs []string `json:"ids"`
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, name, err := s.index(r)
	if err != nil {
		return 0, err
	}
	if err := s.readOnly(name); err != nil {
		return http.StatusConflict, err
	}
	var req DeleteRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	switch {
	case len(req.IDs) == 0:
		return http.StatusBadRequest, errors.New(`no "ids" to delete`)
	case len(req.IDs) > s.limits.Batch:
		return http.StatusBadRequest, fmt.Errorf("%d ids in one delete, over the limit of %d", len(req.IDs), s.limits.Batch)
	}
	if err := ix.Delete(context.WithoutCancel(r.Context()), req.IDs); err != nil {
		return 0, err
	}
	s.wrote(name)
	distinct := map[string]bool{}
	for _, id := range req.IDs {
		distinct[id] = true
	}
	return reply(w, struct {
		Deleted int `json:"deleted"`
	}{len(distinct)})
}

//go:embed openapi.json
var openapiJSON []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openapiJSON)
}

// DeviceInfo is how the index served as name sits on its device
// (vlc.Store.DeviceInfo).
func (s *Server) DeviceInfo(name string) (vlc.DeviceInfo, error) {
	sv := s.lookup(name)
	if sv == nil {
		return vlc.DeviceInfo{}, fmt.Errorf("%w: no index named %q", vlc.ErrNotFound, name)
	}
	return sv.ix.DeviceInfo()
}
