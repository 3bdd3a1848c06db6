//go:build webgpu

package webgpu

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
)

// The conformance suite of device search (index/devicetest): every
// metric and bits setting, dimensions that are not a multiple of a
// word's levels or of a workgroup, entry counts that are not a multiple
// of a tile, an empty list, nprobe 1 to every list, k 1 to 100, batches
// of one query to 300, re-ranking; hits against the CPU path's.
func TestSearchParity(t *testing.T) {
	// The second half: TestSearchParityRest; the codes' cases: TestSearchCodes.
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: devicetest.DefaultCases[:len(devicetest.DefaultCases)/2]})
}

// The second half of the rotated cases, apart so that no test runs past
// 20 s under -race on lavapipe.
func TestSearchParityRest(t *testing.T) {
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: devicetest.DefaultCases[len(devicetest.DefaultCases)/2:]})
}

// Shapes the default cases do not reach: wide queries (2048 and 1536
// dimensions, whose rotation and q' fill several KiB of workgroup
// memory, and 1000, whose two Walsh-Hadamard halves of 512 overlap), and
// more lists than the probe selection has invocations (700: several lists
// per invocation, and keys that share their first digits).
func TestSearchParityShapes(t *testing.T) {
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: []devicetest.Case{
		{Name: "l2-d2048-b1", N: 333, Dim: 2048, Lists: 5, Bits: 1, Metric: index.L2, Queries: 20},
		{Name: "ip-d1536-b8", N: 250, Dim: 1536, Lists: 4, Bits: 8, Metric: index.IP, Queries: 15},
		{Name: "cos-d1000-b2", N: 300, Dim: 1000, Lists: 6, Bits: 2, Metric: index.Cosine, Queries: 15},
		{Name: "l2-d16-lists700", N: 3000, Dim: 16, Lists: 700, Bits: 4, Metric: index.L2, Queries: 60},
	}})
}

// The rotate kernel gives devicetest.Rotate's values bit for bit (the
// same butterflies in the same order), and |q|^2 within float rounding.
func TestSearchRotateExact(t *testing.T) {
	for _, c := range []devicetest.Case{
		{Name: "rot-d96", N: 100, Dim: 96, Lists: 3, Bits: 4, Metric: index.L2, Queries: 7},
		{Name: "rot-d1000", N: 100, Dim: 1000, Lists: 3, Bits: 2, Metric: index.L2, Queries: 5},
		{Name: "rot-d33", N: 100, Dim: 33, Lists: 3, Bits: 8, Metric: index.L2, Queries: 300},
	} {
		t.Run(c.Name, func(t *testing.T) {
			b := devicetest.Build(t, t.TempDir(), c)
			g := &grab{dev: gpuDevice(t)}
			di, err := b.Index.OnDevice(g)
			if err != nil {
				t.Fatal(err)
			}
			defer di.Close()
			r, nq, d := g.res, c.Queries, c.Dim
			q := make([]float32, nq*d)
			for i := range nq {
				b.Queries.Row(i, q[i*d:(i+1)*d])
			}
			p, err := r.planSearch(nq, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, nq*(d+1))
			func() {
				r.dev.lock()
				defer r.dev.unlock()
				if err := r.prepare(p, q); err != nil {
					t.Fatal(err)
				}
				if err := r.write(r.params, 0, r.searchParams(p, nq, 0)); err != nil {
					t.Fatal(err)
				}
				if err := r.encode(p, nq, 0, []string{"rotate"}, false); err != nil {
					t.Fatal(err)
				}
				if err := r.dev.read(f32bytes(got), r.qbuf, 0); err != nil {
					t.Fatal(err)
				}
			}()
			for i := range nq {
				x := slices.Clone(q[i*d : (i+1)*d])
				var qq float64
				for _, v := range x {
					qq += float64(v) * float64(v)
				}
				devicetest.Rotate(g.data, x)
				for j := range d {
					if math.Float32bits(got[i*d+j]) != math.Float32bits(x[j]) {
						t.Fatalf("query %d value %d: %g, reference %g", i, j, got[i*d+j], x[j])
					}
				}
				if gq := float64(got[nq*d+i]); math.Abs(gq-qq) > 1e-6*qq {
					t.Errorf("query %d: |q|^2 %g, want %g", i, gq, qq)
				}
			}
		})
	}
}

// grab is a device.Searcher that keeps what index.OnDevice hands the
// device and what it returns, so that tests can call the Resident.
type grab struct {
	dev  device.Searcher
	data *device.IndexData
	res  *resident
}

func (g *grab) UploadIndex(d *device.IndexData) (device.Resident, error) {
	r, err := g.dev.UploadIndex(d)
	if err != nil {
		return nil, err
	}
	g.data, g.res = d, r.(*resident)
	return r, nil
}

// upload builds case c and uploads it, returning the device index (closed
// by t.Cleanup), its resident and the queries as one slice.
func upload(t *testing.T, c devicetest.Case) (*index.DeviceIndex, *resident, []float32, devicetest.Built) {
	t.Helper()
	b := devicetest.Build(t, t.TempDir(), c)
	g := &grab{dev: gpuDevice(t)}
	di, err := b.Index.OnDevice(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { di.Close() })
	q := make([]float32, c.Queries*c.Dim)
	for i := range c.Queries {
		b.Queries.Row(i, q[i*c.Dim:(i+1)*c.Dim])
	}
	return di, g.res, q, b
}

// setKnobs sets the package's test knobs for the rest of t.
func setKnobs(t *testing.T, partTiles, sortLen int, budget int64) {
	p, s, b := testPartTiles, testSortLen, searchBudget
	t.Cleanup(func() { testPartTiles, testSortLen, searchBudget = p, s, b })
	testPartTiles, testSortLen = partTiles, sortLen
	if budget > 0 {
		searchBudget = budget
	}
}

var splitCase = devicetest.Case{Name: "split", N: 2001, Dim: 96, Lists: 24, Bits: 4, Metric: index.L2, Queries: 300}

// A search split every way a large one is (the index in parts under the
// binding limit, a batch in several under the memory budget, a query's
// candidates in rounds, the final sort in global memory rather than
// workgroup memory) gives exactly the results of the same search in one
// piece: every kernel computes each entry's estimate the same way
// wherever it runs.
func TestSearchSplit(t *testing.T) {
	const nprobe, keep = 8, 50
	_, whole, q, _ := upload(t, splitCase)
	nq := splitCase.Queries
	want := make([]int32, nq*keep)
	wantD := make([]float32, nq*keep)
	if err := whole.Search(context.Background(), q, nq, nprobe, keep, want, wantD); err != nil {
		t.Fatal(err)
	}
	if p, _ := whole.planSearch(nq, nprobe, keep); p.nb != nq || p.rounds != 1 || len(whole.parts) != 1 {
		t.Fatalf("the whole search is split: %+v, %d parts", p, len(whole.parts))
	}
	for _, tc := range []struct {
		name               string
		partTiles, sortLen int
		budget             int64
		nq                 int
		batches, rounds    int // at least
	}{
		{"parts", 5, 0, 0, nq, 1, 1},
		{"batches", 0, 0, 100 << 10, nq, 8, 1},
		{"rounds", 0, 0, 5 << 10, 40, 40, 3},
		{"global-sort", 0, 16, 0, nq, 1, 1},
		{"all", 7, 32, 4 << 10, 30, 30, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setKnobs(t, tc.partTiles, tc.sortLen, tc.budget)
			_, res, _, _ := upload(t, splitCase)
			if tc.partTiles > 0 && len(res.parts) < 2 {
				t.Fatalf("%d parts", len(res.parts))
			}
			p, err := res.planSearch(tc.nq, nprobe, keep)
			if err != nil {
				t.Fatal(err)
			}
			if batches := (tc.nq + p.nb - 1) / p.nb; batches < tc.batches || p.rounds < tc.rounds {
				t.Fatalf("plan %+v: %d batches, want at least %d, and %d rounds", p, batches, tc.batches, tc.rounds)
			}
			t.Logf("%d parts, plan %+v", len(res.parts), p)
			got := make([]int32, tc.nq*keep)
			gotD := make([]float32, tc.nq*keep)
			if err := res.Search(context.Background(), q, tc.nq, nprobe, keep, got, gotD); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if got[i] != want[i] || math.Float32bits(gotD[i]) != math.Float32bits(wantD[i]) {
					if bad++; bad <= 5 {
						t.Errorf("query %d rank %d: entry %d (%g), whole %d (%g)", i/keep, i%keep, got[i], gotD[i], want[i], wantD[i])
					}
				}
			}
		})
	}
	// And against the CPU, with everything split.
	setKnobs(t, 7, 32, 8<<10)
	devicetest.Parity(t, gpuDevice(t), devicetest.Options{Cases: []devicetest.Case{
		{Name: "split-l2-d100-b2", N: 499, Dim: 100, Lists: 7, Bits: 2, Metric: index.L2, Queries: 37},
		{Name: "split-ipcodes-d33-b4", N: 300, Dim: 33, Lists: 5, Bits: 4, Metric: index.IP, IPCodes: true, Queries: 23},
	}})
}

// A search moves the queries and its parameters to the device and only
// the entries and distances back; an upload moves the index once.
func TestSearchTransfers(t *testing.T) {
	const nprobe, keep = 5, 10
	_, res, q, _ := upload(t, splitCase)
	up0, down0 := res.Transfer()
	if down0 != 0 {
		t.Errorf("upload brought %d bytes back", down0)
	}
	nq := 17
	ent := make([]int32, nq*keep)
	dist := make([]float32, nq*keep)
	if err := res.Search(context.Background(), q, nq, nprobe, keep, ent, dist); err != nil {
		t.Fatal(err)
	}
	up, down := res.Transfer()
	if up-up0 != int64(nq*splitCase.Dim*4+80) || down != int64(nq*keep*8) {
		t.Errorf("a search of %d queries (dimension %d, keep %d) moved %d bytes up and %d down, want %d and %d",
			nq, splitCase.Dim, keep, up-up0, down, nq*splitCase.Dim*4+80, nq*keep*8)
	}
	t.Logf("upload: %d bytes; search: %d up, %d down", up0, up-up0, down)
}

// rss is the process's resident memory in bytes (0 where /proc is missing).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// Upload, search and close 50 times: each resident index accounts for
// its device memory while open (Bytes, and the process-wide count),
// gives it all back on Close, and the process does not grow with the
// cycles.
func TestSearchCycles(t *testing.T) {
	c := devicetest.Case{Name: "cycles", N: 700, Dim: 40, Lists: 6, Bits: 4, Metric: index.L2, Queries: 20}
	b := devicetest.Build(t, t.TempDir(), c)
	dev := gpuDevice(t)
	opt := index.SearchOptions{K: 10, NProbe: 3}
	want, err := b.Index.SearchBatch(context.Background(), b.Queries, opt)
	if err != nil {
		t.Fatal(err)
	}
	base := liveSearchBytes.Load()
	var rss0 int64
	var bytes int64
	for i := range 50 {
		if i == 10 {
			runtime.GC()
			rss0 = rss()
		}
		di, err := b.Index.OnDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		uploaded := di.DeviceBytes()
		got, err := di.SearchBatch(context.Background(), b.Queries, opt)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			devicetest.Compare(t, "cycle 0", b.Queries, devicetest.MaxNorm(b.Base), want, got)
			bytes = di.DeviceBytes()
		}
		if n := di.DeviceBytes(); n <= uploaded || n != bytes || liveSearchBytes.Load()-base != n {
			t.Fatalf("cycle %d: %d bytes after upload, %d after a search (cycle 0: %d), %d counted", i, uploaded, n, bytes, liveSearchBytes.Load()-base)
		}
		if err := di.Close(); err != nil {
			t.Fatal(err)
		}
		if n := liveSearchBytes.Load() - base; n != 0 {
			t.Fatalf("cycle %d: %d bytes left on the device after Close", i, n)
		}
		if di.DeviceBytes() != 0 {
			t.Fatalf("cycle %d: a closed index holds %d bytes", i, di.DeviceBytes())
		}
	}
	runtime.GC()
	if grew := rss() - rss0; rss0 > 0 && grew > 64<<20 {
		t.Errorf("the process grew by %.1f MiB over 40 cycles", float64(grew)/(1<<20))
	} else {
		t.Logf("%d bytes on the device per index; the process grew by %.1f MiB over the last 40 cycles", bytes, float64(grew)/(1<<20))
	}
}

// Wrong arguments, a closed index, a closed device, a malformed index and
// a cancelled context give errors that say what is wrong.
func TestSearchErrors(t *testing.T) {
	c := devicetest.Case{Name: "errors", N: 300, Dim: 33, Lists: 4, Bits: 4, Metric: index.L2, Queries: 3}
	_, res, q, _ := upload(t, c)
	ent := make([]int32, 3*10)
	dist := make([]float32, 3*10)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		err    error
		substr string
	}{
		{"short queries", res.Search(ctx, q[:10], 3, 2, 10, ent, dist), "webgpu: search: 10 query values for 3 queries of dimension 33"},
		{"keep 0", res.Search(ctx, q, 3, 2, 0, ent, dist), "webgpu: search: keep 0: want 1 to 4096"},
		{"keep too large", res.Search(ctx, q, 3, 2, device.MaxKeep+1, ent, dist), "keep 4097: want 1 to 4096"},
		{"nprobe 0", res.Search(ctx, q, 3, 0, 10, ent, dist), "webgpu: search: nprobe 0: want at least 1"},
		{"short results", res.Search(ctx, q, 3, 2, 10, ent[:5], dist), "room for 5 entries and 30 distances, want 30"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.substr) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.substr)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := res.Search(cctx, q, 3, 2, 10, ent, dist); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := res.Close(); err != nil {
		t.Fatal(err)
	}
	if err := res.Search(ctx, q, 3, 2, 10, ent, dist); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("search after Close: %v", err)
	}
	if err := res.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	d, err := open(true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := d.UploadIndex(&device.IndexData{}); err == nil || !strings.Contains(err.Error(), "device closed") {
		t.Errorf("upload to a closed device: %v", err)
	}
	good := func() *device.IndexData {
		return &device.IndexData{N: 3, Dim: 4, Lists: 2, Bits: 4, Words: 1, Signs: [][]float32{{1, 1, 1, 1}}, RotP: 4, RotScale: 0.5,
			RotAnchors: make([]float32, 8), Norms: make([]float32, 2), Offsets: []uint64{0, 1, 3}, Scale: make([]float32, 2), SqrtScale: make([]float32, 2)}
	}
	if err := checkData(good()); err != nil {
		t.Fatalf("a good description: %v", err)
	}
	for _, tc := range []struct {
		edit func(*device.IndexData)
		want string
	}{
		{func(d *device.IndexData) { d.Lists = 0 }, "webgpu: index to upload: 3 entries of dimension 4 in 0 lists"},
		{func(d *device.IndexData) { d.Bits = 3 }, "webgpu: index to upload: 3 bits per level: the kernels take 1, 2, 4 or 8"},
		{func(d *device.IndexData) { d.Dim, d.RotAnchors = 9, make([]float32, 18) }, "webgpu: index to upload: 1 words per entry hold fewer than 9 levels of 4 bits"},
		{func(d *device.IndexData) { d.RotP = 3 }, "webgpu: index to upload: rotation length 3: want a power of two up to the dimension 4"},
		{func(d *device.IndexData) { d.Norms = nil }, "webgpu: index to upload: 2 lists of dimension 4, but 8 anchor values, 0 norms, 2 scales, 2 square roots, 3 offsets"},
		{func(d *device.IndexData) { d.Offsets[2] = 4 }, "webgpu: index to upload: list offsets run from 0 to 4, want 0 to 3"},
		{func(d *device.IndexData) { d.Offsets[1] = 5; d.Offsets[2] = 3 }, "webgpu: index to upload: list 1 ends (3) before it starts (5)"},
		{func(d *device.IndexData) { d.Signs = [][]float32{{1}} }, "webgpu: index to upload: rotation round 0 has 1 signs, want 4"},
	} {
		dd := good()
		tc.edit(dd)
		if err := checkData(dd); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// The planner keeps every batch buffer under the binding limit and the
// batch under the budget, takes the whole query set where it fits, and
// falls back to rounds of candidates (at least one) for a query that
// alone does not fit. No device needed.
func TestSearchPlan(t *testing.T) {
	r := &resident{dev: &core{info: Info{MaxBinding: 128 << 20, MaxBuffer: 1 << 31}}, dim: 768, lists: 4096, maxList: 1000}
	sizes := make([]int, r.lists)
	for a := range sizes {
		sizes[a] = 1000 - a/8 // descending, as UploadIndex sorts them
	}
	r.prefix = make([]int, r.lists+1)
	for a, s := range sizes {
		r.prefix[a+1] = r.prefix[a] + s
	}
	lim := r.dev.bindingLimit()
	for _, tc := range []struct {
		nq, nprobe, keep int
		budget           int64
		nb, rounds       int // 0: any
	}{
		{10, 64, 100, 1 << 30, 10, 1},
		{100000, 64, 100, 1 << 30, 0, 1},
		{100000, 4096, 4096, 1 << 30, 0, 1},
		{5, 4096, 4096, 1 << 20, 1, 0},
		{5, 1, 1, 1, 1, 4}, // rounds of the least window, 256 offsets
	} {
		setKnobs(t, 0, 0, tc.budget)
		p, err := r.planSearch(tc.nq, tc.nprobe, tc.keep)
		if err != nil {
			t.Fatal(err)
		}
		qb, co, pr, ca, ou := r.sizes(p)
		if tc.nb > 0 && p.nb != tc.nb || tc.rounds > 0 && p.rounds != tc.rounds || p.rounds < 1 || p.nb < 1 {
			t.Errorf("%+v: plan %+v", tc, p)
		}
		if p.rounds == 1 && p.win != r.prefix[tc.nprobe] || p.rounds > 1 && (p.win < tc.keep || p.rounds*p.win < r.prefix[tc.nprobe]) {
			t.Errorf("%+v: %d rounds of %d offsets for %d candidates", tc, p.rounds, p.win, r.prefix[tc.nprobe])
		}
		for _, b := range []int64{qb, co, pr, ca, ou} {
			if b > lim {
				t.Errorf("%+v: plan %+v: a buffer of %d bytes, over the binding limit %d", tc, p, b, lim)
			}
		}
		if total := qb + co + pr + ca + 2*ou; p.nb > 1 && total > tc.budget {
			t.Errorf("%+v: plan %+v: %d bytes, over the budget", tc, p, total)
		}
		if g := int64(p.nb) * int64(p.nprobe) * int64(p.slices); g > 65535*65535 {
			t.Errorf("%+v: a score grid of %d workgroups", tc, g)
		}
	}
}
