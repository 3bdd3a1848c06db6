package index_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/vecfile"
)

// searchCase is one query with its options; want is the serial result.
type searchCase struct {
	q    []float32
	opt  index.SearchOptions
	want []index.Hit
}

// searchCases returns nq queries around the base vectors (a base row plus
// noise, so that each has a clear neighbourhood) with varied k, nprobe
// and, for every fifth, exact re-ranking, and their serial results.
func searchCases(t *testing.T, ix *index.Index, base *vecfile.Matrix, nq int) []searchCase {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(nq), 9))
	cases := make([]searchCase, nq)
	for i := range cases {
		q := base.Row(rng.IntN(base.Len()), nil)
		for j := range q {
			q[j] += float32(rng.NormFloat64() * 0.05)
		}
		opt := index.SearchOptions{K: 1 + rng.IntN(20), NProbe: 1 + rng.IntN(10)}
		if i%5 == 0 {
			opt.Rerank, opt.RerankFactor = base, 1+rng.IntN(5)
		}
		want, err := ix.Search(q, opt)
		if err != nil {
			t.Fatal(err)
		}
		cases[i] = searchCase{q, opt, want}
	}
	return cases
}

// clusteredIndex writes n clustered vectors of dimension d to a .f16 file
// and builds an index of m lists from it: an index cheap enough to search
// ten thousand times under the race detector.
func clusteredIndex(t *testing.T, n, d, m int) (path string, base *vecfile.Matrix) {
	t.Helper()
	pts := synth.Clusters(n, d, m, 11)
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, d)
		f16.DecodeRow(rows[i], pts.Data[i*d:(i+1)*d])
	}
	in := filepath.Join(t.TempDir(), "clusters.f16")
	if err := vecfile.WriteF16(in, rows); err != nil {
		t.Fatal(err)
	}
	path, base, _ = buildFrom(t, in, in, d, index.L2, m)
	return path, base
}

// One open Index searched from 64 goroutines gives exactly the serial
// results (run under -race: the scratch pool, the scorer and the mapping
// are shared).
func TestConcurrentSearch(t *testing.T) {
	path, base := clusteredIndex(t, 4000, 24, 50)
	ix := open(t, path)
	nq := 10000
	if testing.Short() {
		nq = 2000
	}
	cases := searchCases(t, ix, base, nq)
	const workers = 64
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range workers {
		wg.Go(func() {
			for i := g; i < len(cases); i += workers {
				c := cases[i]
				got, err := ix.Search(c.q, c.opt)
				if err != nil || !slices.Equal(got, c.want) {
					if bad.Add(1) <= 5 {
						t.Errorf("query %d (%+v): concurrent result %v, %v; serial %v", i, c.opt, got, err, c.want)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d queries from %d goroutines, %d results differ from serial", len(cases), workers, bad.Load())
}

// blockingRows is a re-rank source whose first Row call blocks until
// release is closed: it holds a search in flight, inside the index.
type blockingRows struct {
	index.Rows
	once     sync.Once
	entered  chan struct{}
	released chan struct{}
}

func (b *blockingRows) Row(i int, dst []float32) []float32 {
	b.once.Do(func() {
		close(b.entered)
		<-b.released
	})
	return b.Rows.Row(i, dst)
}

// Close waits for a search in flight (which completes with the right
// answer, its data still mapped), and searches that start once Close has
// begun get ErrClosed.
func TestCloseWaitsForSearchInFlight(t *testing.T) {
	path, base, queries := build(t, index.L2, 45)
	ix := open(t, path)
	q := queries.Row(0, nil)
	opt := index.SearchOptions{K: 5, NProbe: 45, Rerank: base}
	want, err := ix.Search(q, opt)
	if err != nil {
		t.Fatal(err)
	}
	rows := &blockingRows{Rows: base, entered: make(chan struct{}), released: make(chan struct{})}
	inflight := make(chan error, 1)
	var got []index.Hit
	go func() {
		var err error
		got, err = ix.Search(q, index.SearchOptions{K: 5, NProbe: 45, Rerank: rows})
		inflight <- err
	}()
	<-rows.entered
	closed := make(chan error, 1)
	go func() { closed <- ix.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a search was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	later := make(chan error, 1)
	go func() {
		_, err := ix.Search(q, index.SearchOptions{K: 5, NProbe: 45})
		later <- err
	}()
	close(rows.released)
	if err := <-inflight; err != nil || !slices.Equal(got, want) {
		t.Errorf("search in flight during Close: %v, %v; want %v", got, err, want)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-later; !errors.Is(err, index.ErrClosed) {
		t.Errorf("search started during Close: %v, want ErrClosed", err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close racing with many searches, and with the other methods: every call
// either completes with the serial answer or gets ErrClosed (once a
// goroutine sees ErrClosed it sees nothing else), nothing panics, nothing
// reads the unmapped file. Several rounds, Close at a random moment.
func TestCloseRacesSearches(t *testing.T) {
	path, base, _ := build(t, index.L2, 45)
	ix := open(t, path)
	cases := searchCases(t, ix, base, 500)
	fileSize := ix.Size()
	ix.Close()
	rounds := 10
	if testing.Short() {
		rounds = 5
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var completed, refused atomic.Int64
	for round := range rounds {
		ix, err := index.Open(path, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 64 {
			wg.Go(func() {
				<-start
				seenClosed := false
				for k := 0; ; k++ {
					c := cases[(g*31+k)%len(cases)]
					var err error
					switch k % 8 {
					case 7:
						err = ix.Verify()
						if size := ix.Size(); size != 0 && size != fileSize {
							err = fmt.Errorf("Size() = %d, want %d or, once closed, 0", size, fileSize)
						}
					case 6:
						ix.ListSizes()
						ix.Sections()
						ix.Meta()
						continue
					default:
						var got []index.Hit
						got, err = ix.Search(c.q, c.opt)
						if err == nil && !slices.Equal(got, c.want) {
							err = fmt.Errorf("query %d: %v, serial %v", (g*31+k)%len(cases), got, c.want)
						}
					}
					switch {
					case errors.Is(err, index.ErrClosed):
						seenClosed = true
						refused.Add(1)
						if k > 16 {
							return
						}
					case err != nil:
						t.Errorf("round %d: %v", round, err)
						return
					case seenClosed:
						t.Errorf("round %d: a call succeeded after ErrClosed", round)
						return
					default:
						completed.Add(1)
					}
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		var cwg sync.WaitGroup
		for range 3 { // concurrent Closes: one unmaps, the others do nothing
			cwg.Go(func() {
				if err := ix.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		cwg.Wait()
		wg.Wait()
	}
	t.Logf("%d rounds: %d calls completed, %d refused with ErrClosed", rounds, completed.Load(), refused.Load())
}
