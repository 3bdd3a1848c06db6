package device_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	anneal "github.com/vlc-embed/vlc/anneal/devicetest"
	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// hostShards is a ShardDevice whose shares train on the CPU and encode
// on the host, entry by entry, in a device's two phases
// (device.ShardEncoder): a GPU's split encode, without a GPU.
type hostShards struct {
	*cpu.Device
	notResident bool // its shares answer ErrNotResident
}

func (h hostShards) LoadShard(p device.Points, lo, hi int) (device.Shard, error) {
	sh, err := h.Device.LoadShard(p, lo, hi)
	if err != nil {
		return nil, err
	}
	return &hostShard{Shard: sh, pts: p, lo: lo, hi: hi, notResident: h.notResident}, nil
}

type hostShard struct {
	device.Shard
	pts         device.Points
	lo, hi      int
	notResident bool
}

// residual sets r to local row id's point less its anchor, and returns
// the anchor.
func (s *hostShard) residual(r, anchors []float32, assign []int32, id uint32) int {
	d := s.pts.Dim
	a := int(assign[id])
	f16.DecodeRow(r, s.pts.Data[(s.lo+int(id))*d:(s.lo+int(id)+1)*d])
	for j := range r {
		r[j] -= anchors[a*d+j]
	}
	return a
}

func (s *hostShard) assignments() ([]int32, error) {
	assign := make([]int32, s.hi-s.lo)
	return assign, s.Shard.Assignments(assign)
}

func (s *hostShard) RotatedListMax(l device.RotatedLayout, anchors []float32, ids []uint32, lmax []float64) error {
	if s.notResident {
		return fmt.Errorf("host shard: %w", device.ErrNotResident)
	}
	assign, err := s.assignments()
	if err != nil {
		return err
	}
	clear(lmax)
	r := make([]float32, l.Dim)
	for _, id := range ids {
		a := s.residual(r, anchors, assign, id)
		var sum float64
		for _, v := range r {
			sum += float64(v) * float64(v)
		}
		lmax[a] = max(lmax[a], sum)
	}
	return nil
}

// runLen is the entries a hostShard hands over at a time.
const runLen = 100

func (s *hostShard) EncodeRotatedShare(l device.RotatedLayout, anchors []float32, ids []uint32, slist []float32, codes []byte, places []uint32, ready func(lo, hi int)) error {
	code, err := codeOf(l, anchors)
	if err != nil {
		return err
	}
	assign, err := s.assignments()
	if err != nil {
		return err
	}
	cb := l.CodeBytes()
	r := make([]float32, l.Dim)
	params := make([]byte, 4)
	for lo := 0; lo < len(ids); lo += runLen {
		hi := min(len(ids), lo+runLen)
		for e := lo; e < hi; e++ {
			a := s.residual(r, anchors, assign, ids[e])
			putF32(params, slist[a])
			at := e
			if places != nil {
				at = int(places[e])
			}
			code.Encode(codes[at*cb:(at+1)*cb], a, params, r)
		}
		if ready != nil {
			ready(lo, hi)
		}
	}
	return nil
}

// testSeed is the seed of the rotated codes these tests (and the
// conformance suite's EncodeGolden) encode with.
const testSeed = 3

// codeOf is the rotated code of seed testSeed that l is the layout of,
// with anchors set.
func codeOf(l device.RotatedLayout, anchors []float32) (*quant.Rotated, error) {
	c, err := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: l.Dim, Bits: l.Bits, IP: l.IP, Seed: testSeed})
	if err != nil {
		return nil, err
	}
	c.SetAnchors(anchors)
	rc := c.(*quant.Rotated)
	if !slices.EqualFunc(rc.Layout().Signs, l.Signs, slices.Equal) {
		return nil, errors.New("host shard: the layout is not of a rotated code of seed 3")
	}
	return rc, nil
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// hostMulti is Multi over k hostShards (notResident: which of them answer
// ErrNotResident) with the given split.
func hostMulti(k int, split func(n, k int) []int, notResident ...int) *device.MultiDevice {
	devs := make([]device.Device, k)
	for i := range devs {
		devs[i] = hostShards{Device: cpu.New(), notResident: slices.Contains(notResident, i)}
	}
	return device.Multi(devs...).WithSplit(split)
}

var encodeSplits = []struct {
	name  string
	split func(n, k int) []int
}{
	{"even", device.EvenSplit},
	{"skewed", anneal.Skewed},
	{"1,129,rest", anneal.Sizes(1, 129)},
}

// Split over 1 to 3 devices, evenly or not, the codes and list parameters are
// the host's golden bytes (quant.Rotated.EncodeList), for every bits
// setting in both forms, at sizes where some lists are empty and some
// shares hold none of a list's points.
func TestMultiEncodeGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("2 s a split on two cores; TestMultiEncodeStream checks the host's bytes on a small set")
	}
	for _, c := range []struct {
		k     int
		split int // of encodeSplits
	}{{1, 0}, {2, 1}, {3, 2}} {
		sp := encodeSplits[c.split]
		t.Run(fmt.Sprintf("devices=%d/split=%s", c.k, sp.name), func(t *testing.T) {
			anneal.EncodeGolden(t, hostMulti(c.k, sp.split))
		})
	}
}

// encodeInput is a small set in m lists, the last anchor far from every
// point (an empty list), with the host's codes and parameters
// (EncodeList, list by list).
type encodeInput struct {
	pts          device.Points
	anchors      []float32
	m            int
	ids          []uint32
	offsets      []uint64
	code         *quant.Rotated
	codes, param []byte
	lmax         []float64 // the largest |r|^2 of every list
}

func newEncodeInput(t *testing.T, n, d, m int, ip bool) encodeInput {
	t.Helper()
	in := encodeInput{pts: synth.Clusters(n, d, 12, 5), m: m}
	in.anchors = synth.AnchorsNear(in.pts, m, 0.1, 4)
	for j := range d {
		in.anchors[(m-1)*d+j] = 1000
	}
	for i, v := range in.anchors { // as an index stores them
		in.anchors[i] = f16.ToFloat32(f16.FromFloat32(v))
	}
	ds := anneal.Load(t, cpu.New(), in.pts)
	in.ids, in.offsets = anneal.Lists(anneal.Assigned(t, ds, in.anchors, m, n), m)
	if far := in.offsets[m] - in.offsets[m-1]; far != 0 {
		t.Fatalf("%d points in the far list", far)
	}
	c, err := quant.New(quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: 4, IP: ip, Seed: testSeed})
	if err != nil {
		t.Fatal(err)
	}
	c.SetAnchors(in.anchors)
	in.code = c.(*quant.Rotated)
	cb := in.code.CodeBytes()
	in.codes, in.param, in.lmax = make([]byte, n*cb), make([]byte, m*4), make([]float64, m)
	for a := range m {
		lo, hi := int(in.offsets[a]), int(in.offsets[a+1])
		res := make([]float32, (hi-lo)*d)
		for e := lo; e < hi; e++ {
			r := res[(e-lo)*d : (e-lo+1)*d]
			f16.DecodeRow(r, in.pts.Data[int(in.ids[e])*d:(int(in.ids[e])+1)*d])
			var sum float64
			for j := range r {
				r[j] -= in.anchors[a*d+j]
				sum += float64(r[j]) * float64(r[j])
			}
			in.lmax[a] = max(in.lmax[a], sum)
		}
		in.code.EncodeList(in.codes[lo*cb:hi*cb], in.param[a*4:(a+1)*4], a, res, hi-lo)
	}
	return in
}

// The split encode hands its codes over in runs, in order from 0 to the
// entry count, each once every entry before its end is in place, after
// every list parameter (the largest |r|^2 of the list over all shares);
// the bytes are the host's, and each share reports its entries.
func TestMultiEncodeStream(t *testing.T) {
	const n, d, m = 1500, 24, 9
	for _, ip := range []bool{false, true} {
		in := newEncodeInput(t, n, d, m, ip)
		for a, v := range in.lmax {
			if got := math.Float32frombits(uint32(in.param[4*a]) | uint32(in.param[4*a+1])<<8 | uint32(in.param[4*a+2])<<16 | uint32(in.param[4*a+3])<<24); got != device.RotatedScale(v) {
				t.Fatalf("list %d: the host's parameter %g is not the largest |r|^2 %g: the test cannot compare", a, got, v)
			}
		}
		cb := in.code.CodeBytes()
		for _, k := range []int{2, 3} {
			for _, sp := range encodeSplits {
				t.Run(fmt.Sprintf("ip=%v/devices=%d/split=%s", ip, k, sp.name), func(t *testing.T) {
					ds := anneal.Load(t, hostMulti(k, sp.split), in.pts)
					if err := ds.SetAnchors(in.anchors, m); err != nil {
						t.Fatal(err)
					}
					if _, err := ds.Assign(); err != nil {
						t.Fatal(err)
					}
					codes, params := make([]byte, n*cb), make([]byte, m*4)
					next, runs := 0, 0
					err := ds.(device.RotatedStreamEncoder).EncodeRotatedStream(in.code.Layout(), in.anchors, in.ids, in.offsets, codes, params, func(lo, hi int) {
						// On a shard's goroutine: Errorf, not Fatalf.
						switch {
						case lo != next || hi <= lo || hi > n:
							t.Errorf("run %d to %d after %d", lo, hi, next)
						case !bytes.Equal(params, in.param):
							t.Errorf("run %d to %d: list parameters % x, want % x", lo, hi, params, in.param)
						case !bytes.Equal(codes[:hi*cb], in.codes[:hi*cb]):
							t.Errorf("run %d to %d: the codes before %d are not all the host's", lo, hi, hi)
						}
						next = hi
						runs++
					})
					if err != nil {
						t.Fatal(err)
					}
					if next != n {
						t.Fatalf("%d runs up to %d of %d entries", runs, next, n)
					}
					if !bytes.Equal(codes, in.codes) || !bytes.Equal(params, in.param) {
						t.Fatal("the codes or parameters differ from the host's")
					}
					shares := ds.(device.ShareTimer).EncodeShares()
					sizes := sp.split(n, k)
					var want []device.ShareTime
					for i, s := range sizes {
						if s > 0 {
							want = append(want, device.ShareTime{Device: i, Entries: s})
						}
					}
					if len(shares) != len(want) {
						t.Fatalf("shares %+v, want %+v", shares, want)
					}
					for i := range shares {
						if shares[i].Device != want[i].Device || shares[i].Entries != want[i].Entries {
							t.Fatalf("shares %+v, want %+v (times aside)", shares, want)
						}
					}
				})
			}
		}
	}
}

// A share that cannot encode its points (ErrNotResident) makes the whole
// encode answer ErrNotResident having written nothing and handed nothing
// over: the host encodes. A split set with a shard that does not encode at
// all is no RotatedEncoder.
func TestMultiEncodeNotResident(t *testing.T) {
	const n, d, m = 600, 16, 5
	in := newEncodeInput(t, n, d, m, false)
	cb := in.code.CodeBytes()
	for name, dev := range map[string]device.Device{
		"cpu devices": device.Multi(cpu.New(), cpu.New()),
		"mixed":       device.Multi(hostShards{Device: cpu.New()}, cpu.New()),
	} {
		if _, ok := anneal.Load(t, dev, in.pts).(device.RotatedEncoder); ok {
			t.Errorf("%s: a split set whose shards do not all encode is a RotatedEncoder", name)
		}
	}
	if _, ok := anneal.Load(t, hostMulti(2, device.EvenSplit), in.pts).(device.RotatedStreamEncoder); !ok {
		t.Error("a split set whose shards all encode is no RotatedStreamEncoder")
	}
	cases := map[string]device.Device{
		"first of 2": hostMulti(2, device.EvenSplit, 0),
		"last of 3":  hostMulti(3, anneal.Skewed, 2),
	}
	for name, dev := range cases {
		t.Run(name, func(t *testing.T) {
			ds := anneal.Load(t, dev, in.pts)
			if err := ds.SetAnchors(in.anchors, m); err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Assign(); err != nil {
				t.Fatal(err)
			}
			codes, params := make([]byte, n*cb), make([]byte, m*4)
			err := ds.(device.RotatedStreamEncoder).EncodeRotatedStream(in.code.Layout(), in.anchors, in.ids, in.offsets, codes, params, func(lo, hi int) {
				t.Errorf("run %d to %d handed over", lo, hi)
			})
			if !errors.Is(err, device.ErrNotResident) {
				t.Fatalf("got %v, want ErrNotResident", err)
			}
			if !bytes.Equal(codes, make([]byte, len(codes))) || !bytes.Equal(params, make([]byte, len(params))) {
				t.Fatal("codes or parameters written")
			}
			if ds.(device.ShareTimer).EncodeShares() != nil {
				t.Fatal("shares reported for an encode that did not happen")
			}
		})
	}
}

// Entries that name no point, or do not match the codes, are refused by
// name, not read.
func TestMultiEncodeBadEntries(t *testing.T) {
	const n, d, m = 300, 8, 4
	in := newEncodeInput(t, n, d, m, false)
	cb := in.code.CodeBytes()
	ds := anneal.Load(t, hostMulti(2, device.EvenSplit), in.pts)
	if err := ds.SetAnchors(in.anchors, m); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Assign(); err != nil {
		t.Fatal(err)
	}
	enc := ds.(device.RotatedEncoder)
	ids := slices.Clone(in.ids)
	ids[7] = n + 3
	err := enc.EncodeRotated(in.code.Layout(), in.anchors, ids, in.offsets, make([]byte, n*cb), make([]byte, m*4))
	if err == nil || errors.Is(err, device.ErrNotResident) || !bytes.Contains([]byte(err.Error()), []byte("entry 7 is point 303 of 300")) {
		t.Fatalf("an entry beyond the points: %v", err)
	}
	err = enc.EncodeRotated(in.code.Layout(), in.anchors, in.ids, in.offsets, make([]byte, n*cb-1), make([]byte, m*4))
	if err == nil || errors.Is(err, device.ErrNotResident) {
		t.Fatalf("codes a byte short: %v", err)
	}
}
