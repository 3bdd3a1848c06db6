package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	vlc "github.com/vlc-embed/vlc"
)

// served is an index the server answers for, and its background work.
type served struct {
	ix *vlc.Store
	// owned marks a collection of Config.Data: the server opened it,
	// closes it and may drop it.
	owned bool

	ctx    context.Context // ends when the index stops being served
	cancel context.CancelFunc
	wg     sync.WaitGroup // the maintenance goroutine, while one runs
	mu     sync.Mutex     // guards running and again
	// running: a goroutine runs Maintain; again: a write came during
	// that run, so it runs once more (its work may be due now).
	running, again bool
}

func newServed(ix *vlc.Store, owned bool) *served {
	ctx, cancel := context.WithCancel(context.Background())
	return &served{ix: ix, owned: owned, ctx: ctx, cancel: cancel}
}

// maintainLater runs the index's due background work (Maintain) in a
// goroutine of its own: one run at a time, and one more when writes came
// during it, so that a burst of writes costs one or two runs.
func (sv *served) maintainLater(name string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.ctx.Err() != nil {
		return
	}
	if sv.running {
		sv.again = true
		return
	}
	sv.running = true
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		for {
			if err := sv.ix.Maintain(sv.ctx); err != nil && sv.ctx.Err() == nil {
				slog.Warn("background maintenance failed; the next write tries again", "index", name, "err", err)
			}
			sv.mu.Lock()
			if !sv.again || sv.ctx.Err() != nil {
				sv.running = false
				sv.mu.Unlock()
				return
			}
			sv.again = false
			sv.mu.Unlock()
		}
	}()
}

// stop ends the index's background work and waits for it.
func (sv *served) stop() {
	sv.cancel()
	sv.wg.Wait()
}

// wrote is called after a write to the index named name has committed.
func (s *Server) wrote(name string) {
	if !s.maintain {
		return
	}
	if sv := s.lookup(name); sv != nil {
		sv.maintainLater(name)
	}
}

// dataSuffix is the file name ending of a collection in Config.Data.
const dataSuffix = ".vlc"

// openData opens every NAME.vlc file in the data folder as collection
// NAME (making the folder when it is missing).
func (s *Server) openData() error {
	if err := os.MkdirAll(s.data, 0o755); err != nil {
		return fmt.Errorf("serve: data folder: %w", err)
	}
	entries, err := os.ReadDir(s.data)
	if err != nil {
		return fmt.Errorf("serve: data folder: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), dataSuffix)
		if !ok || !e.Type().IsRegular() || !validName(name) {
			continue
		}
		path := filepath.Join(s.data, e.Name())
		if s.indexes[name] != nil {
			return fmt.Errorf("serve: %s and an index given by name are both named %q", path, name)
		}
		ix, err := s.open(path)
		if err != nil {
			return fmt.Errorf("serve: data folder: %w", err)
		}
		s.indexes[name] = newServed(ix, true)
	}
	return nil
}

// open opens a collection of the data folder: with the store's own
// background work after writes when the server maintains, else without.
func (s *Server) open(path string) (*vlc.Store, error) {
	return vlc.OpenWith(path, vlc.OpenOptions{Manual: !s.maintain, Device: s.device})
}

// Close stops the background work of every index and closes the
// collections the server opened (those of Config.Data, and those created
// or snapshotted over HTTP); the indexes given to New stay open. The
// handler must not be used after Close.
func (s *Server) Close() error {
	s.mu.Lock()
	all := s.indexes
	s.indexes = map[string]*served{}
	s.mu.Unlock()
	var errs []error
	for name, sv := range all {
		sv.stop()
		if sv.owned {
			if err := sv.ix.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Refresh picks up the changes other processes made to every index
// served (vlc.Store.Refresh), and returns the errors of those that
// failed, by name; those go on serving the version they held.
func (s *Server) Refresh() error {
	var errs []error
	for _, name := range s.names() {
		sv := s.lookup(name)
		if sv == nil {
			continue // dropped meanwhile
		}
		if err := sv.ix.Refresh(); err != nil && !errors.Is(err, vlc.ErrClosed) {
			errs = append(errs, fmt.Errorf("index %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Names returns the names of the indexes served now, sorted.
func (s *Server) Names() []string { return s.names() }

// errNoData refuses what needs Config.Data.
var errNoData = errors.New("the server has no data folder for collections (vlc serve -data DIR)")

// CreateRequest makes an empty collection: vlc.Schema's fields in JSON.
type CreateRequest struct {
	Name      string        `json:"name"`
	Dim       int           `json:"dim"`
	Metric    string        `json:"metric,omitempty"`
	Code      string        `json:"code,omitempty"`
	Bits      int           `json:"bits,omitempty"`
	Subspaces int           `json:"subspaces,omitempty"`
	Ratio     float64       `json:"ratio,omitempty"`
	Seed      uint64        `json:"seed,omitempty"`
	Indexed   []string      `json:"indexed,omitempty"`
	Policy    *PolicyFields `json:"policy,omitempty"`
}

// PolicyFields is vlc.Policy in JSON: when a collection trains and
// merges (0: the default, -1: never), and which segments get a graph.
type PolicyFields struct {
	TrainAt       int     `json:"train_at,omitempty"`
	RetrainGrowth float64 `json:"retrain_growth,omitempty"`
	RetrainDrift  float64 `json:"retrain_drift,omitempty"`
	MergeFactor   int     `json:"merge_factor,omitempty"`
	GraphAt       int     `json:"graph_at,omitempty"`
	GraphDegree   int     `json:"graph_degree,omitempty"`
	GraphAlpha    float64 `json:"graph_alpha,omitempty"`
	GraphNProbe   int     `json:"graph_nprobe,omitempty"`
	GraphCompact  bool    `json:"graph_compact,omitempty"`
}

func (c CreateRequest) schema() vlc.Schema {
	sc := vlc.Schema{Dim: c.Dim, Metric: c.Metric, Code: c.Code, Bits: c.Bits, Subspaces: c.Subspaces,
		Ratio: c.Ratio, Seed: c.Seed, Indexed: c.Indexed}
	if p := c.Policy; p != nil {
		sc.Policy = vlc.Policy{TrainAt: p.TrainAt, RetrainGrowth: p.RetrainGrowth, RetrainDrift: p.RetrainDrift, MergeFactor: p.MergeFactor,
			GraphAt: p.GraphAt, GraphDegree: p.GraphDegree, GraphAlpha: p.GraphAlpha, GraphNProbe: p.GraphNProbe, GraphCompact: p.GraphCompact}
	}
	return sc
}

// collectionPath is where collection name lives in the data folder.
func (s *Server) collectionPath(name string) string {
	return filepath.Join(s.data, name+dataSuffix)
}

// checkNewName refuses a name that cannot be a new collection.
func (s *Server) checkNewName(name string) (int, error) {
	switch {
	case s.data == "":
		return http.StatusConflict, errNoData
	case !validName(name):
		return http.StatusBadRequest, fmt.Errorf("collection name %q: use letters, digits, '.', '_' and '-'", name)
	case s.lookup(name) != nil:
		return http.StatusConflict, fmt.Errorf("an index named %q is served already", name)
	}
	return 0, nil
}

// add serves a collection the server opened under name; it fails when
// another request took the name meanwhile.
func (s *Server) addCollection(name string, ix *vlc.Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.indexes[name] != nil {
		return fmt.Errorf("an index named %q is served already", name)
	}
	s.indexes[name] = newServed(ix, true)
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) (int, error) {
	var req CreateRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	if st, err := s.checkNewName(req.Name); err != nil {
		return st, err
	}
	if req.Dim < 1 {
		return http.StatusBadRequest, fmt.Errorf("dim %d: a collection needs the dimension of its vectors (at least 1)", req.Dim)
	}
	path := s.collectionPath(req.Name)
	ix, err := vlc.Create(context.WithoutCancel(r.Context()), path, req.schema())
	if err != nil {
		return 0, err
	}
	if !s.maintain { // opened again without the store's background work
		ix.Close()
		if ix, err = s.open(path); err != nil {
			return 0, err
		}
	}
	if err := s.addCollection(req.Name, ix); err != nil {
		ix.Close()
		return http.StatusConflict, err
	}
	b, err := s.describe(req.Name, ix)
	if err != nil {
		return 0, err
	}
	return replyStatus(w, http.StatusCreated, b)
}

// drop stops serving a collection of the data folder and removes its
// files. Searches in flight finish on the version they hold.
func (s *Server) drop(w http.ResponseWriter, r *http.Request) (int, error) {
	name := r.PathValue("name")
	s.mu.Lock()
	sv := s.indexes[name]
	switch {
	case sv == nil:
		s.mu.Unlock()
		return 0, &notFound{fmt.Sprintf("no index named %q (have: %s)", name, strings.Join(s.namesLocked(), ", "))}
	case !sv.owned:
		s.mu.Unlock()
		return http.StatusConflict, fmt.Errorf("index %q was given on the command line, not created in the data folder: the server does not drop it", name)
	}
	delete(s.indexes, name)
	s.mu.Unlock()
	sv.stop()
	if err := vlc.Remove(context.WithoutCancel(r.Context()), sv.ix.Path()); err != nil {
		s.mu.Lock()
		s.indexes[name] = newServed(sv.ix, true) // still there: served again
		s.mu.Unlock()
		return 0, err
	}
	sv.ix.Close()
	return reply(w, struct {
		Dropped string `json:"dropped"`
	}{name})
}

// namesLocked is names with s.mu held.
func (s *Server) namesLocked() []string {
	out := make([]string, 0, len(s.indexes))
	for n := range s.indexes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// admin runs an index's administrative call (compact, retrain,
// maintain), not cut short by the request's deadline once started, and
// answers the index's description after it.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, run func(context.Context, *vlc.Store) error) (int, error) {
	ix, name, err := s.index(r)
	if err != nil {
		return 0, err
	}
	if st, err := decodeOptional(r, &struct{}{}); err != nil {
		return st, err
	}
	if err := s.readOnly(name); err != nil {
		return http.StatusConflict, err
	}
	if err := run(context.WithoutCancel(r.Context()), ix); err != nil {
		return 0, err
	}
	b, err := s.describe(name, ix)
	if err != nil {
		return 0, err
	}
	return reply(w, b)
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request) (int, error) {
	return s.admin(w, r, func(ctx context.Context, ix *vlc.Store) error { return ix.Compact(ctx) })
}

func (s *Server) retrain(w http.ResponseWriter, r *http.Request) (int, error) {
	return s.admin(w, r, func(ctx context.Context, ix *vlc.Store) error {
		_, err := ix.Retrain(ctx, vlc.Options{})
		return err
	})
}

func (s *Server) maintainNow(w http.ResponseWriter, r *http.Request) (int, error) {
	return s.admin(w, r, func(ctx context.Context, ix *vlc.Store) error { return ix.Maintain(ctx) })
}

// SnapshotRequest names the collection a snapshot becomes.
type SnapshotRequest struct {
	Name string `json:"name"`
}

// snapshot copies an index's current version into a new collection of
// the data folder, and serves it.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) (int, error) {
	ix, _, err := s.index(r)
	if err != nil {
		return 0, err
	}
	var req SnapshotRequest
	if st, err := decode(r, &req); err != nil {
		return st, err
	}
	if st, err := s.checkNewName(req.Name); err != nil {
		return st, err
	}
	path := s.collectionPath(req.Name)
	if err := ix.Snapshot(context.WithoutCancel(r.Context()), path); err != nil {
		return 0, err
	}
	copied, err := s.open(path)
	if err != nil {
		return 0, err
	}
	if err := s.addCollection(req.Name, copied); err != nil {
		copied.Close()
		return http.StatusConflict, err
	}
	b, err := s.describe(req.Name, copied)
	if err != nil {
		return 0, err
	}
	return replyStatus(w, http.StatusCreated, b)
}
