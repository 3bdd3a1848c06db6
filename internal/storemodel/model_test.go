package storemodel

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

var (
	flagSeed = flag.Uint64("store.seed", 0, "seed of the operations (0: 1, or the clock's with -store.ops above 1000); the kills' timing is not seeded")
	flagOps  = flag.Int("store.ops", 150, "operations to run (at most 60 with -short)")
	flagKill = flag.Float64("store.kill", 0.1, "chance that an operation's process is killed while it runs (some finish first)")
	// The store starts as a collection created empty (vlc create, then
	// vlc add of the same vectors) that trains itself in the background
	// during the run, or as an index file compressed (vlc compress).
	flagEmpty = flag.String("store.start", "both", "how the store starts: compress, create, or both (a sub-test each)")
	// With graphs, the store's policy (vlc graph -at, vlc create
	// -graph-at) gives every segment of that many live rows a graph, which
	// the processes' background work builds beside their writes, and the
	// searches walk; the code is then the rotated one.
	flagGraphAt = flag.Int("store.graph-at", 0, "give segments of at least this many live rows a graph, built by the background work (0: none)")
	// flagGraphCompact stores those graphs' lists compact.
	flagGraphCompact = flag.Bool("store.graph-compact", false, "with -store.graph-at: the graphs' neighbour lists compact")
)

func TestMain(m *testing.M) {
	if path := os.Getenv(workerEnv); path != "" {
		runWorker(path)
		return
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The vlc command, built once for every sub-test.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
	noGo    bool
)

// buildVLC builds the vlc command (once) and returns its path.
func buildVLC(t *testing.T, _ string) string {
	t.Helper()
	binOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			noGo, binErr = true, err
			return
		}
		if binDir, binErr = os.MkdirTemp("", "storemodel-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "vlc")
		if out, err := exec.Command(goTool, "build", "-o", binPath, "github.com/vlc-embed/vlc/cmd/vlc").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if noGo {
		t.Skipf("no go command to build vlc with: %v", binErr)
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// model is what the store acknowledged: the versions of its live set
// (id -> generation of the vector it holds), oldest first.
type model struct {
	versions []map[string]uint64
	handed   map[string]bool // ids the store picked for vectors added without one
	mu       sync.Mutex
	issued   map[uint64]string // every generation an add sent, and its id ("" when the store picks)
}

func (m *model) cur() map[string]uint64 { return m.versions[len(m.versions)-1] }

func (m *model) commit(next map[string]uint64) { m.versions = append(m.versions, next) }

func (m *model) issue(d doc) {
	m.mu.Lock()
	m.issued[d.G] = d.ID
	m.mu.Unlock()
}

// plausible reports whether a reader may see id holding generation g at
// some moment: an add sent that pair.
func (m *model) plausible(id string, g uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	want, ok := m.issued[g]
	return ok && (want == id || want == "")
}

// session is one run of the test: the store, its clients, the model, and
// the counts the closing line reports.
type session struct {
	t       *testing.T
	seed    uint64
	r       *rand.Rand
	dir     string
	store   string
	bin     string
	m       *model
	clients []client
	views   []int // per client: the version its reads see
	check   *vlc.Store
	nextG   uint64
	log     []string
	stderr  *stderrLog // of the workers and vlc serve
	counts  map[string]int
}

func (s *session) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
	if len(s.log) > 60 {
		s.log = s.log[1:]
	}
}

// diverged ends the test: what the store answered is not what it
// acknowledged.
func (s *session) diverged(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("DIVERGENCE (seed %d, op %d): %s\nlast operations:\n  %s\nthe workers' and vlc serve's stderr, last lines:\n%s\nrerun: go test ./internal/storemodel -run TestStoreModel -store.seed %d -store.ops %d",
		s.seed, s.counts["ops"], fmt.Sprintf(format, args...), strings.Join(s.log, "\n  "), s.stderr, s.seed, *flagOps)
}

// TestStoreModel runs seeded random operations on one store from two
// library workers, the vlc command line and vlc serve (refreshing every
// 20 ms beside its own writes), with two readers
// searching throughout and processes SIGKILLed at random moments, and
// checks every answer against the model of what was acknowledged: writes
// succeed or fail as the newest version says (an id live, an id not
// live), reads give exactly the live ids and generations of the version
// the client holds, an exact search over the model's vectors agrees with
// the store's re-ranked search, a killed write is whole or absent, ids
// the store picks never repeat, and files vlc did not write survive.
func TestStoreModel(t *testing.T) {
	for _, start := range []string{"compress", "create"} {
		if *flagEmpty == start || *flagEmpty == "both" {
			t.Run(start, func(t *testing.T) { storeModel(t, start) })
		}
	}
}

func storeModel(t *testing.T, how string) {
	ops := *flagOps
	if testing.Short() && ops > 60 {
		ops = 60
	}
	seed := *flagSeed
	if seed == 0 {
		seed = 1
		if ops > 1000 {
			seed = uint64(time.Now().UnixNano())
		}
	}
	t.Logf("seed %d, %d operations, kill chance %.2f", seed, ops, *flagKill)
	dir := t.TempDir()
	s := &session{t: t, seed: seed, r: rand.New(rand.NewPCG(seed, 1)), dir: dir, store: filepath.Join(dir, "s.vlc"),
		m: &model{handed: map[string]bool{}, issued: map[uint64]string{}}, counts: map[string]int{}, stderr: &stderrLog{}}
	s.bin = buildVLC(t, dir)

	// The store: 300 vectors compressed, ids their row numbers.
	const n0 = 300
	rows := make([][]float32, n0)
	lines := make([]string, n0)
	first := map[string]uint64{}
	for i := range rows {
		s.nextG++
		rows[i], lines[i] = vector(s.nextG), string(payload(s.nextG))
		first[strconv.Itoa(i)] = s.nextG
		s.m.issue(doc{ID: strconv.Itoa(i), G: s.nextG})
	}
	base, pl := filepath.Join(dir, "base.f16"), filepath.Join(dir, "base.jsonl")
	if err := vecfile.WriteF16(base, rows); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pl, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var code []string
	if *flagGraphAt > 0 {
		code = []string{"-code", "rotated"}
		t.Logf("graphs for segments of %d live rows", *flagGraphAt)
	}
	if how == "compress" {
		if out, err := exec.Command(s.bin, append([]string{"compress", base, "-dim", strconv.Itoa(dim), "-o", s.store, "-payloads", pl, "-anchors", "8", "-backend", "cpu", "-quiet"}, code...)...).CombinedOutput(); err != nil {
			t.Fatalf("compress: %v\n%s", err, out)
		}
		if *flagGraphAt > 0 {
			args := []string{"graph", "-at", strconv.Itoa(*flagGraphAt), "-quiet", s.store}
			if *flagGraphCompact {
				args = append(args, "-compact")
			}
			if out, err := exec.Command(s.bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("graph -at: %v\n%s", err, out)
			}
		}
	} else {
		// Exact until 360 live vectors, then trained in the background
		// by whichever process writes.
		args := []string{"create", s.store, "-dim", strconv.Itoa(dim), "-train-at", "360"}
		if *flagGraphAt > 0 {
			args = append(append(args, code...), "-graph-at", strconv.Itoa(*flagGraphAt))
			if *flagGraphCompact {
				args = append(args, "-graph-compact")
			}
		}
		if out, err := exec.Command(s.bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("create: %v\n%s", err, out)
		}
		ids := filepath.Join(dir, "base.ids")
		var idLines []string
		for i := range n0 {
			idLines = append(idLines, strconv.Itoa(i))
		}
		if err := os.WriteFile(ids, []byte(strings.Join(idLines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(s.bin, "add", s.store, base, "-ids", ids, "-payloads", pl).CombinedOutput(); err != nil {
			t.Fatalf("add: %v\n%s", err, out)
		}
	}
	s.m.versions = []map[string]uint64{first}
	// A file vlc did not write, in the segment folder: it must survive.
	foreign := filepath.Join(s.store+".d", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := &proc{label: fmt.Sprintf("lib%d", i+1), log: s.stderr, start: func() *exec.Cmd {
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), workerEnv+"="+s.store)
			return cmd
		}}
		if err := p.launch(); err != nil {
			t.Fatal(err)
		}
		s.clients = append(s.clients, p)
	}
	s.clients = append(s.clients, &cli{bin: s.bin, store: s.store, dir: dir})
	srv := &server{bin: s.bin, store: s.store, log: s.stderr}
	if err := srv.launch(); err != nil {
		t.Fatal(err)
	}
	s.clients = append(s.clients, srv)
	t.Cleanup(func() {
		for _, c := range s.clients {
			c.close()
		}
	})
	s.views = make([]int, len(s.clients))
	if s.check, err = vlc.Open(s.store); err != nil {
		t.Fatal(err)
	}
	defer s.check.Close()

	// Readers: their own handles, refreshed and searched in a loop. They
	// cannot know which version they read, so they check what holds for
	// every version: each hit a vector an add sent under that id, no id
	// twice, no error.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	readErr := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix, err := vlc.Open(s.store)
			if err != nil {
				readErr <- err
				return
			}
			defer ix.Close()
			for q := uint64(1); !stop.Load(); q++ {
				err := ix.Refresh()
				var hits []vlc.Hit
				if err == nil {
					hits, err = ix.Search(context.Background(), vector(q), vlc.SearchOptions{K: 5000, NProbe: 1 << 16})
				}
				if err != nil {
					readErr <- fmt.Errorf("reader: %w", err)
					return
				}
				seen := map[string]bool{}
				for _, h := range hits {
					g, ok := generation(h.Payload)
					if seen[h.ID] || !ok || !s.m.plausible(h.ID, g) {
						readErr <- fmt.Errorf("reader: hit %s (payload %s) twice or never added so", h.ID, h.Payload)
						return
					}
					seen[h.ID] = true
				}
				reads.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	start := time.Now()
	for op := 0; op < ops; op++ {
		s.counts["ops"]++
		s.step()
		if op%20 == 19 {
			s.fullCheck("every 20 operations")
		}
		select {
		case err := <-readErr:
			s.diverged("%v", err)
		default:
		}
	}
	stop.Store(true)
	wg.Wait()
	close(readErr)
	for err := range readErr {
		s.diverged("%v", err)
	}
	s.fullCheck("at the end")
	if out, err := exec.Command(s.bin, "verify", s.store).CombinedOutput(); err != nil {
		s.diverged("vlc verify: %v: %s", err, out)
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "mine" {
		s.diverged("the file vlc did not write in the segment folder: %q, %v", b, err)
	}
	t.Logf("%d operations in %v: %d writes acknowledged, %d refused as they should be, %d killed (%d applied, %d not); %d reads by the clients, %d by the concurrent readers; %d locked; %d versions; 0 divergences",
		s.counts["ops"], time.Since(start).Round(time.Millisecond), s.counts["acked"], s.counts["refused"], s.counts["killed"],
		s.counts["applied"], s.counts["absent"], s.counts["reads"], reads.Load(), s.counts["locked"], len(s.m.versions))
	if *flagGraphAt > 0 {
		t.Logf("graphs: %d of the %d segments the full checks saw held one", s.counts["graphs seen"], s.counts["segments seen"])
		if s.counts["graphs seen"] == 0 {
			t.Errorf("graph-at %d: no segment held a graph at any full check", *flagGraphAt)
		}
	}
	if s.counts["locked"] > 0 {
		t.Errorf("%d writes found the store locked, though no two writes of this test overlap: a lock outlived its write", s.counts["locked"])
	}
}

// step runs one random operation on a random client and checks it.
func (s *session) step() {
	r := s.r
	ci := r.IntN(len(s.clients))
	c := s.clients[ci]
	cur := s.m.cur()
	var req request
	write := r.IntN(2) == 0
	if write {
		req = s.pickWrite(c, cur)
	} else {
		req = s.pickRead(c, ci)
	}
	kill := time.Duration(-1)
	if r.Float64() < *flagKill && req.Op != "refresh" {
		// Kill within the operation: a library call or a request takes a
		// few milliseconds, a command as many more to start.
		kill = time.Duration(r.IntN(6_000)) * time.Microsecond
		if _, ok := c.(*cli); ok {
			kill = time.Duration(5_000+r.IntN(30_000)) * time.Microsecond
		}
	}
	s.logf("%s %s %s%s", c.name(), req.Op, brief(req), map[bool]string{true: fmt.Sprintf(" (kill at %v)", kill)}[kill >= 0])
	resp, killed, err := c.do(req, kill)
	if err != nil {
		s.diverged("%s %s: %v", c.name(), req.Op, err)
	}
	if killed {
		s.counts["killed"]++
		s.logf("  killed")
		if isWrite(req.Op) {
			s.resolve(req)
		}
		s.views[ci] = len(s.m.versions) - 1 // started again: it reads the newest version
		s.fullCheck("after a kill")
		return
	}
	if resp.Kind == "locked" {
		s.counts["locked"]++
		s.logf("  locked: %s", resp.Err)
		return
	}
	if isWrite(req.Op) {
		s.checkWrite(c, ci, req, resp)
		return
	}
	s.counts["reads"]++
	s.checkRead(c, ci, req, resp)
}

func isWrite(op string) bool {
	switch op {
	case "add", "upsert", "delete", "compact", "retrain", "merge":
		return true
	}
	return false
}

func brief(req request) string {
	switch {
	case len(req.Docs) > 0:
		ids := make([]string, len(req.Docs))
		for i, d := range req.Docs {
			ids[i] = d.ID + "=" + strconv.FormatUint(d.G, 10)
		}
		return strings.Join(ids, " ")
	case len(req.IDs) > 0:
		return strings.Join(req.IDs, " ")
	case req.Query != 0:
		return fmt.Sprintf("q%d k%d", req.Query, req.K)
	}
	return ""
}

// pickWrite draws a write: mostly adds and deletes (an id already live
// now and then, which must be refused), compactions and retraining; the
// live count kept between 60 and 700.
func (s *session) pickWrite(c client, cur map[string]uint64) request {
	r := s.r
	live := slices.Sorted(func(yield func(string) bool) {
		for id := range cur {
			if !yield(id) {
				return
			}
		}
	})
	x := r.IntN(100)
	switch {
	case len(cur) > 700:
		x = 50 // delete
	case len(cur) < 60:
		x = 0 // add
	}
	switch {
	case x < 12:
		// Upsert: ids live (replaced) and new, each once.
		n := 1 + r.IntN(6)
		req := request{Op: "upsert"}
		used := map[string]bool{}
		for range n {
			s.nextG++
			d := doc{G: s.nextG, ID: "d" + strconv.FormatUint(s.nextG, 10)}
			if r.IntN(2) == 0 && len(live) > 0 {
				d.ID = live[r.IntN(len(live))]
			}
			if used[d.ID] {
				d.ID = "d" + strconv.FormatUint(d.G, 10)
			}
			used[d.ID] = true
			s.m.issue(d)
			req.Docs = append(req.Docs, d)
		}
		return req
	case x < 45:
		n := 1 + r.IntN(8)
		req := request{Op: "add"}
		noID := r.IntN(6) == 0
		used := map[string]bool{}
		for range n {
			s.nextG++
			d := doc{G: s.nextG}
			if !noID {
				switch y := r.IntN(10); {
				case y == 0 && len(live) > 0:
					d.ID = live[r.IntN(len(live))] // live: the add must be refused
				case y < 4:
					d.ID = strconv.Itoa(r.IntN(n0Ids)) // maybe a deleted row of the input
				default:
					d.ID = "d" + strconv.FormatUint(d.G, 10)
				}
				if used[d.ID] {
					d.ID = "d" + strconv.FormatUint(d.G, 10)
				}
				used[d.ID] = true
			}
			s.m.issue(d)
			req.Docs = append(req.Docs, d)
		}
		return req
	case x < 80:
		n := 1 + r.IntN(6)
		req := request{Op: "delete"}
		used := map[string]bool{}
		for range n {
			id := live[r.IntN(len(live))]
			if r.IntN(12) == 0 {
				id = "gone-" + strconv.Itoa(r.IntN(5)) // not live: the delete must be refused
			}
			if !used[id] {
				used[id] = true
				req.IDs = append(req.IDs, id)
			}
		}
		return req
	case x < 90 || !canRetrain(c):
		if _, ok := c.(*cli); ok && r.IntN(3) == 0 {
			return request{Op: "merge", Out: filepath.Join(s.dir, fmt.Sprintf("merged-%d.vlc", s.counts["ops"]))}
		}
		if !canRetrain(c) { // vlc serve has no compaction endpoint
			return request{Op: "add", Docs: []doc{s.freshDoc()}}
		}
		return request{Op: "compact"}
	default:
		return request{Op: "retrain"}
	}
}

// n0Ids is how many row numbers an add reuses as ids: those of the
// compressed input, deleted or not.
const n0Ids = 300

func (s *session) freshDoc() doc {
	s.nextG++
	d := doc{ID: "d" + strconv.FormatUint(s.nextG, 10), G: s.nextG}
	s.m.issue(d)
	return d
}

func canRetrain(c client) bool {
	_, ok := c.(*server)
	return !ok
}

// pickRead draws a read: a search that returns every live vector, a get
// of an id live or not, the count, the exact top 10 by re-ranking
// (library), or a refresh (library).
func (s *session) pickRead(c client, ci int) request {
	r := s.r
	q := uint64(1_000_000 + r.IntN(1_000_000))
	_, lib := c.(*proc)
	switch x := r.IntN(100); {
	case x < 30:
		return request{Op: "scan", Query: q, K: 5000}
	case x < 55:
		view := s.m.versions[s.views[ci]]
		var id string
		switch r.IntN(3) {
		case 0:
			id = "d" + strconv.Itoa(r.IntN(int(s.nextG)+1))
		default:
			ids := slices.Collect(func(yield func(string) bool) {
				for id := range view {
					if !yield(id) {
						return
					}
				}
			})
			slices.Sort(ids)
			id = ids[r.IntN(len(ids))]
		}
		return request{Op: "get", IDs: []string{id}}
	case x < 70:
		return request{Op: "len"}
	case x < 85 && lib:
		return request{Op: "topk", Query: q, K: 10}
	case lib:
		return request{Op: "refresh"}
	}
	return request{Op: "scan", Query: q, K: 5000}
}

// checkWrite compares a write's answer with what the newest version
// says it must be, and applies it to the model.
func (s *session) checkWrite(c client, ci int, req request, resp response) {
	cur := s.m.cur()
	want := ""
	switch req.Op {
	case "add":
		for _, d := range req.Docs {
			if _, live := cur[d.ID]; d.ID != "" && live {
				want = "duplicate"
			}
		}
	case "delete":
		for _, id := range req.IDs {
			if _, live := cur[id]; !live {
				want = "notfound"
			}
		}
	}
	if resp.Kind != want {
		s.diverged("%s %s %s: answered %q (%s), the newest version says %q", c.name(), req.Op, brief(req), resp.Kind, resp.Err, want)
	}
	// A write reads the newest version before it changes anything, so
	// its handle sees it from now on, refused or not.
	defer func() { s.views[ci] = len(s.m.versions) - 1 }()
	if want != "" {
		s.counts["refused"]++
		s.logf("  refused: %s", resp.Err)
		return
	}
	s.counts["acked"]++
	switch req.Op {
	case "add":
		if req.Docs[0].ID == "" && resp.IDs == nil { // the CLI names only the first and last
			s.learnAdded(req, "vlc add")
			return
		}
		next := clone(cur)
		for i, d := range req.Docs {
			id := resp.IDs[i]
			if d.ID != "" && id != d.ID {
				s.diverged("%s add: document %d got id %s, asked %s", c.name(), i, id, d.ID)
			}
			if d.ID == "" {
				if s.m.handed[id] {
					s.diverged("%s add: id %s handed out again", c.name(), id)
				}
				if _, live := cur[id]; live {
					s.diverged("%s add: picked id %s, which is live", c.name(), id)
				}
				s.m.handed[id] = true
			}
			next[id] = d.G
		}
		s.m.commit(next)
	case "upsert":
		next := clone(cur)
		for i, d := range req.Docs {
			if resp.IDs != nil && resp.IDs[i] != d.ID {
				s.diverged("%s upsert: document %d got id %s, asked %s", c.name(), i, resp.IDs[i], d.ID)
			}
			next[d.ID] = d.G
		}
		s.m.commit(next)
	case "delete":
		next := clone(cur)
		for _, id := range req.IDs {
			delete(next, id)
		}
		s.m.commit(next)
	case "merge":
		s.checkMerged(req.Out)
	}
}

// learnAdded learns the ids the store picked for an add whose answer did
// not list them: the new ids of the newest version, which must be
// exactly as many, hold the add's generations and never have been
// picked before.
func (s *session) learnAdded(req request, who string) {
	cur := s.m.cur()
	obs := s.observe()
	next := clone(cur)
	want := map[uint64]bool{}
	for _, d := range req.Docs {
		want[d.G] = true
	}
	for id, g := range obs {
		if _, known := cur[id]; known {
			continue
		}
		if !want[g] || s.m.handed[id] {
			s.diverged("%s: new id %s holds generation %d (handed before: %v); the add sent %v", who, id, g, s.m.handed[id], brief(req))
		}
		delete(want, g)
		s.m.handed[id] = true
		next[id] = g
	}
	if len(want) != 0 {
		s.diverged("%s: %d of the add's vectors are missing", who, len(want))
	}
	s.m.commit(next)
}

// resolve decides a killed write from the store: whole or absent.
func (s *session) resolve(req request) {
	cur := s.m.cur()
	obs := s.observe()
	switch req.Op {
	case "upsert":
		next := clone(cur)
		for _, d := range req.Docs {
			next[d.ID] = d.G
		}
		switch {
		case sameLive(obs, cur):
			s.counts["absent"]++
			s.logf("  resolved: not applied")
		case sameLive(obs, next):
			s.counts["applied"]++
			s.logf("  resolved: applied")
			s.m.commit(next)
		default:
			s.diverged("a killed upsert is half there: the store %s, the model before it %s", summary(obs), summary(cur))
		}
	case "add":
		if sameLive(obs, cur) {
			s.counts["absent"]++
			s.logf("  resolved: not applied")
			return
		}
		s.counts["applied"]++
		s.logf("  resolved: applied")
		if req.Docs[0].ID == "" {
			s.learnAdded(req, "killed add")
			return
		}
		next := clone(cur)
		for _, d := range req.Docs {
			next[d.ID] = d.G
		}
		if !sameLive(obs, next) {
			s.diverged("a killed add is half there: the store %s, the model before it %s", summary(obs), summary(cur))
		}
		s.m.commit(next)
	case "delete":
		if sameLive(obs, cur) {
			s.counts["absent"]++
			s.logf("  resolved: not applied")
			return
		}
		next := clone(cur)
		for _, id := range req.IDs {
			delete(next, id)
		}
		if !sameLive(obs, next) {
			s.diverged("a killed delete is half there: the store %s, the model %s", summary(obs), summary(cur))
		}
		s.counts["applied"]++
		s.logf("  resolved: applied")
		s.m.commit(next)
	default: // compact, retrain, merge: the live set stays
		if !sameLive(obs, cur) {
			s.diverged("a killed %s changed the live vectors: the store %s, the model %s", req.Op, summary(obs), summary(cur))
		}
		s.counts["absent"]++
	}
}

// observe reads the newest version through the test's own handle: every
// live id and the generation it holds.
func (s *session) observe() map[string]uint64 {
	if err := s.check.Refresh(); err != nil {
		s.diverged("refresh: %v", err)
	}
	hits, err := s.check.Search(context.Background(), vector(7), vlc.SearchOptions{K: 5000, NProbe: 1 << 16})
	if err != nil {
		s.diverged("search: %v", err)
	}
	obs := map[string]uint64{}
	for _, h := range hits {
		g, ok := generation(h.Payload)
		if _, twice := obs[h.ID]; twice || !ok {
			s.diverged("search: hit %s twice, or payload %q", h.ID, h.Payload)
		}
		obs[h.ID] = g
	}
	if n := s.check.Len(); n != len(obs) {
		s.diverged("Len %d, a search over every list %d", n, len(obs))
	}
	return obs
}

// fullCheck compares the newest version with the model.
func (s *session) fullCheck(when string) {
	obs := s.observe()
	if !sameLive(obs, s.m.cur()) {
		// Tell a handle that refreshed into a wrong version from a store
		// whose files are wrong: what a fresh open reads.
		fresh := "unreadable"
		if ix, err := vlc.Open(s.store); err == nil {
			hits, err := ix.Search(context.Background(), vector(7), vlc.SearchOptions{K: 5000, NProbe: 1 << 16})
			if err == nil {
				got := map[string]uint64{}
				for _, h := range hits {
					got[h.ID], _ = generation(h.Payload)
				}
				fresh = fmt.Sprintf("%s, the model's: %v", summary(got), sameLive(got, s.m.cur()))
			}
			ix.Close()
		}
		s.diverged("%s: the test's handle, refreshed, reads %s; the model %s; a fresh open reads %s", when, summary(obs), summary(s.m.cur()), fresh)
	}
	for id, g := range obs {
		if rec, err := s.check.Get(id); err != nil {
			s.diverged("%s: Get(%s): %v", when, id, err)
		} else if got, _ := generation(rec.Payload); got != g {
			s.diverged("%s: Get(%s) holds generation %d, the search %d", when, id, got, g)
		}
	}
	if in, err := s.check.Info(); err == nil {
		for _, seg := range in.Segments {
			s.counts["segments seen"]++
			if seg.Graph {
				s.counts["graphs seen"]++
			}
		}
	}
}

// checkRead compares a read's answer with the version the client holds:
// the newest for a command (a new process); vlc serve refreshes on its
// own (-refresh), and a library worker's handle when its background work
// commits, so for them any version from the last one they showed to the
// newest, and a later answer never shows an older one than an earlier
// answer did.
func (s *session) checkRead(c client, ci int, req request, resp response) {
	who := fmt.Sprintf("%s %s %s (it holds version %d of %d)", c.name(), req.Op, brief(req), s.views[ci], len(s.m.versions)-1)
	if req.Op == "refresh" {
		if resp.Err != "" {
			s.diverged("%s: %s", who, resp.Err)
		}
		s.views[ci] = len(s.m.versions) - 1
		return
	}
	lo, hi := s.views[ci], s.views[ci]
	switch c.(type) {
	case *cli:
		lo, hi = len(s.m.versions)-1, len(s.m.versions)-1
	case *server, *proc:
		// vlc serve refreshes on its own; a library handle refreshes when
		// its background work (a merge, a training) commits.
		hi = len(s.m.versions) - 1
	}
	if resp.Err != "" && !(req.Op == "get" && resp.Kind == "notfound") {
		s.diverged("%s: %s", who, resp.Err)
	}
	got := map[string]uint64{}
	for _, h := range resp.Hits {
		if _, twice := got[h.ID]; twice {
			s.diverged("%s: id %s twice", who, h.ID)
		}
		got[h.ID] = h.G
	}
	matches := func(view map[string]uint64) bool {
		switch req.Op {
		case "get":
			g, live := view[req.IDs[0]]
			return live && resp.Err == "" && resp.G == g || !live && resp.Kind == "notfound"
		case "len":
			return resp.Len == len(view)
		case "scan":
			return sameLive(got, view)
		case "topk":
			want := exactTop(view, vector(req.Query), req.K)
			if len(resp.Hits) != len(want) {
				return false
			}
			for i, h := range resp.Hits {
				w := want[i]
				if h.ID != w.ID || h.G != w.G || math.Abs(float64(h.D-w.D)) > 1e-4*math.Max(1, float64(w.D)) {
					return false
				}
			}
			return true
		}
		return false
	}
	for v := lo; v <= hi; v++ {
		if matches(s.m.versions[v]) {
			if v > s.views[ci] {
				s.views[ci] = v // what it showed, it holds (or newer)
			}
			return
		}
	}
	view := s.m.versions[lo]
	switch req.Op {
	case "get":
		s.diverged("%s: answered generation %d (%s); the version holds %d (live: %v)", who, resp.G, resp.Err, view[req.IDs[0]], view[req.IDs[0]] != 0)
	case "len":
		s.diverged("%s: %d, want %d", who, resp.Len, len(view))
	case "scan":
		s.diverged("%s: the search %s, the version %s", who, summary(got), summary(view))
	case "topk":
		s.diverged("%s: hits %v, the exact search over the model's vectors %v", who, resp.Hits, exactTop(view, vector(req.Query), req.K))
	}
}

// exactTop is the k nearest of the version's vectors to q, by squared L2
// in float64.
func exactTop(view map[string]uint64, q []float32, k int) []hit {
	var all []hit
	for id, g := range view {
		v := vector(g)
		var d float64
		for j := range v {
			x := float64(v[j]) - float64(q[j])
			d += x * x
		}
		all = append(all, hit{ID: id, D: float32(d), G: g})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].D < all[j].D || all[i].D == all[j].D && all[i].ID < all[j].ID })
	return all[:min(k, len(all))]
}

// checkMerged checks a merge's output: the live vectors of the newest
// version, in one index file.
func (s *session) checkMerged(out string) {
	ix, err := vlc.Open(out)
	if err != nil {
		s.diverged("merge output: %v", err)
	}
	defer ix.Close()
	defer os.Remove(out)
	hits, err := ix.Search(context.Background(), vector(3), vlc.SearchOptions{K: 5000, NProbe: 1 << 16})
	if err != nil {
		s.diverged("merge output: %v", err)
	}
	got := map[string]uint64{}
	for _, h := range hits {
		got[h.ID], _ = generation(h.Payload)
	}
	if in, _ := ix.Info(); len(in.Segments) != 1 || !sameLive(got, s.m.cur()) {
		s.diverged("merge output: %d segments, %s; the model %s", len(in.Segments), summary(got), summary(s.m.cur()))
	}
}

func clone(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameLive(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// summary names the size of a live set and a few of its ids.
func summary(m map[string]uint64) string {
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range m {
			if !yield(id) {
				return
			}
		}
	})
	return fmt.Sprintf("%d ids (%s ...)", len(ids), strings.Join(ids[:min(8, len(ids))], " "))
}
