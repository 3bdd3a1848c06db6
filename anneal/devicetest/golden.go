package devicetest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/internal/f16"
	"github.com/vlc-embed/vlc/internal/kmeans"
	"github.com/vlc-embed/vlc/internal/synth"
	"github.com/vlc-embed/vlc/quant"
)

// The goldens: testdata/plusplus.golden and testdata/rotated.golden, one
// line per case, made by the host's reference code (TestGoldens -update).
//
//go:embed testdata/*.golden
var goldens embed.FS

// ppCase is a k-means++ case: s sampled rows of s+9 points of dimension d
// of which only distinct differ (the rest repeat them: totals of 0 and the
// fallback draws), m centres.
type ppCase struct{ s, d, m, distinct int }

// ppCases sit around the 64-distance blocks of the draw and the 256-thread
// blocks of a GPU, with duplicate points among them.
var ppCases = []ppCase{
	{1, 5, 3, 1}, {63, 7, 20, 63}, {64, 16, 30, 64}, {65, 33, 40, 65},
	{1000, 96, 100, 1000}, {500, 20, 60, 12}, {3000, 130, 50, 3000},
}

func (c ppCase) String() string {
	return fmt.Sprintf("s=%d d=%d m=%d distinct=%d", c.s, c.d, c.m, c.distinct)
}

// ppInput is what a k-means++ case draws from: the points, the sampled
// rows, the first centre and the random numbers of every round.
type ppInput struct {
	pts      device.Points
	rows     []int
	first    int
	u        []float64
	fallback []int
}

func (c ppCase) input() ppInput {
	n := c.s + 9
	src := synth.Clusters(c.distinct, c.d, 4, uint64(c.s+c.d))
	data := make([]uint16, n*c.d)
	for i := range n {
		copy(data[i*c.d:(i+1)*c.d], src.Data[(i%c.distinct)*c.d:])
	}
	rng := rand.New(rand.NewPCG(uint64(c.s), 3))
	in := ppInput{pts: device.Points{Data: data, N: n, Dim: c.d}, rows: rng.Perm(n)[:c.s], first: rng.IntN(c.s)}
	in.u, in.fallback = make([]float64, c.m-1), make([]int, c.m-1)
	for k := range in.u {
		in.fallback[k], in.u[k] = rng.IntN(c.s), rng.Float64()
	}
	return in
}

// hostPlusPlus runs the host's k-means++ rounds as training runs them on
// the CPU (kmeans.PlusPlusRounds over kmeans.HostDistances) and returns a
// golden line: the picks, and hashes of every round's distances and of
// the block sums each draw walks, so that a change to either on the host
// shows even where the picks survive it.
func hostPlusPlus(c ppCase) string {
	in := c.input()
	dist := make([]float32, c.s)
	blocks := make([]float64, (c.s+kmeans.DrawBlock-1)/kmeans.DrawBlock)
	dh, sh := sha256.New(), sha256.New()
	distances := kmeans.HostDistances(in.pts.Data, in.pts.Dim, in.rows, dist)
	picks, err := kmeans.PlusPlusRounds(in.first, in.u, in.fallback, dist, func(ctr int, keep bool) error {
		if err := distances(ctr, keep); err != nil {
			return err
		}
		binary.Write(dh, binary.LittleEndian, dist)
		total := kmeans.BlockSums(dist, blocks)
		binary.Write(sh, binary.LittleEndian, blocks)
		binary.Write(sh, binary.LittleEndian, total)
		return nil
	})
	if err != nil {
		panic(err) // the host's distances never fail
	}
	return fmt.Sprintf("%v picks=%s dist=%x sums=%x", c, joinInts(picks), dh.Sum(nil)[:12], sh.Sum(nil)[:12])
}

// PlusPlusGolden checks a dataset that runs k-means++ itself (an
// device.PlusPlusDrawer) against the golden picks, which the host's
// kmeans.PlusPlusRounds makes. It skips datasets that are not drawers.
func PlusPlusGolden(t *testing.T, dev device.Device) {
	if !capable[device.PlusPlusDrawer](t, dev) {
		t.Skip("the dataset is not a device.PlusPlusDrawer: k-means++ runs on the host")
	}
	want := goldenLines(t, "plusplus.golden")
	for _, c := range ppCases {
		t.Run(strings.ReplaceAll(c.String(), " ", "/"), func(t *testing.T) {
			in := c.input()
			ds := Load(t, dev, in.pts)
			got, err := ds.(device.PlusPlusDrawer).DrawPlusPlus(in.rows, in.first, in.u, in.fallback)
			if err != nil {
				t.Fatal(err)
			}
			line, ok := want[c.String()]
			if !ok {
				t.Fatalf("no golden line for %v", c)
			}
			if w := field(line, "picks"); joinInts(got) != w {
				t.Fatalf("picks %s\ngolden %s", joinInts(got), w)
			}
		})
	}
}

// encCase is a case of the rotated code's encoding: n points of dimension
// d in m lists, some of them empty.
type encCase struct{ n, d, m int }

// encCases straddle the 64-thread blocks of a GPU encode and the
// Walsh-Hadamard blocks (dimensions that are not powers of two).
var encCases = []encCase{{1, 1, 1}, {129, 7, 3}, {1000, 96, 64}, {5000, 130, 7}, {3000, 768, 40}}

func (c encCase) String() string { return fmt.Sprintf("n=%d d=%d m=%d", c.n, c.d, c.m) }

// encSpecs are the codes each case is encoded with: every bits setting, in
// both forms.
func encSpecs(d int) []quant.Spec {
	var s []quant.Spec
	for _, bits := range []int{1, 2, 4, 8} {
		for _, ip := range []bool{false, true} {
			s = append(s, quant.Spec{Kind: quant.KindRotated, Dim: d, Bits: bits, Seed: 3, IP: ip})
		}
	}
	return s
}

func specName(s quant.Spec) string { return fmt.Sprintf("bits=%d ip=%v", s.Bits, s.IP) }

// encInput is an encoding case's points, its anchors (float16 values, as
// an index stores them) and each point's anchor. Every point is at least
// four times nearer (squared) its own anchor than any other, so any
// backend's assign gives the same lists; anchors 4, 9, 14, ... get no
// points.
type encInput struct {
	pts     device.Points
	anchors []float32
	assign  []int32
}

func (c encCase) input() encInput {
	rng := rand.New(rand.NewPCG(uint64(c.n*7+c.d), 11))
	d := c.d
	in := encInput{anchors: make([]float32, c.m*d), assign: make([]int32, c.n)}
	for i := range in.anchors {
		in.anchors[i] = f16.ToFloat32(f16.FromFloat32(float32(rng.NormFloat64() * 10)))
	}
	var used []int32
	for a := range c.m {
		if a%5 != 4 || c.m < 5 {
			used = append(used, int32(a))
		}
	}
	data := make([]uint16, c.n*d)
	x := make([]float32, d)
	for i := range c.n {
		a := used[rng.IntN(len(used))]
		for {
			for j := range d {
				data[i*d+j] = f16.FromFloat32(in.anchors[int(a)*d+j] + float32(rng.NormFloat64()*0.5))
			}
			f16.DecodeRow(x, data[i*d:(i+1)*d])
			if clearWinner(x, in.anchors, int(a)) {
				break
			}
		}
		in.assign[i] = a
	}
	in.pts = device.Points{Data: data, N: c.n, Dim: d}
	return in
}

// clearWinner reports whether x is at least four times nearer (squared)
// anchor a than any other.
func clearWinner(x, anchors []float32, a int) bool {
	d := len(x)
	own := sqDist64(x, anchors[a*d:(a+1)*d])
	for b := range len(anchors) / d {
		if b != a && sqDist64(x, anchors[b*d:(b+1)*d]) < 4*own {
			return false
		}
	}
	return true
}

func sqDist64(a, b []float32) float64 {
	var s float64
	for j := range a {
		r := float64(a[j]) - float64(b[j])
		s += r * r
	}
	return s
}

// Lists groups the points by anchor as an index does (rows ascending
// within a list): the rows in list order, and where each list starts.
func Lists(assign []int32, m int) (ids []uint32, offsets []uint64) {
	offsets = make([]uint64, m+1)
	for _, a := range assign {
		offsets[a+1]++
	}
	for a := range m {
		offsets[a+1] += offsets[a]
	}
	ids = make([]uint32, len(assign))
	fill := slices.Clone(offsets[:m])
	for i, a := range assign {
		ids[fill[a]] = uint32(i)
		fill[a]++
	}
	return ids, offsets
}

// Assigned sets m anchors on ds, runs an Assign and returns every one of
// the n points' anchors.
func Assigned(t testing.TB, ds device.Dataset, anchors []float32, m, n int) []int32 {
	t.Helper()
	if err := ds.SetAnchors(anchors, m); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Assign(); err != nil {
		t.Fatal(err)
	}
	assign := make([]int32, n)
	if err := ds.Assignments(assign); err != nil {
		t.Fatal(err)
	}
	return assign
}

// hostEncode returns a case's golden lines: for every code of encSpecs,
// a hash of the codes and list parameters the host writes (hostCodes).
func hostEncode(c encCase) []string {
	in := c.input()
	var out []string
	for _, spec := range encSpecs(c.d) {
		codes, params := in.hostCodes(c, spec)
		out = append(out, fmt.Sprintf("%v %s sha256=%s", c, specName(spec), codeHash(codes, params)))
	}
	return out
}

// hostCodes encodes the case's lists with quant.Rotated.EncodeList, as the
// index does on the host.
func (in encInput) hostCodes(c encCase, spec quant.Spec) (codes, params []byte) {
	d := c.d
	ids, offsets := Lists(in.assign, c.m)
	code, err := quant.New(spec)
	if err != nil {
		panic(err) // encSpecs are valid codes
	}
	code.SetAnchors(in.anchors)
	cb, pb := code.CodeBytes(), code.ParamBytes()
	codes, params = make([]byte, c.n*cb), make([]byte, c.m*pb)
	res := make([]float32, c.n*d)
	for a := range c.m {
		lo, hi := int(offsets[a]), int(offsets[a+1])
		for e := lo; e < hi; e++ {
			r := res[e*d : (e+1)*d]
			f16.DecodeRow(r, in.pts.Data[int(ids[e])*d:(int(ids[e])+1)*d])
			for j := range r {
				r[j] -= in.anchors[a*d+j]
			}
		}
		code.EncodeList(codes[lo*cb:hi*cb], params[a*pb:(a+1)*pb], a, res[lo*d:hi*d], hi-lo)
	}
	return codes, params
}

func codeHash(codes, params []byte) string {
	h := sha256.New()
	h.Write(codes)
	h.Write(params)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// EncodeGolden checks a dataset that encodes on the device (a
// device.RotatedEncoder) against the golden hashes of the rotated code's
// bytes, which quant.Rotated.EncodeList makes on the host, for every bits
// setting and both forms. It skips datasets that do not encode.
func EncodeGolden(t *testing.T, dev device.Device) {
	if !capable[device.RotatedEncoder](t, dev) {
		t.Skip("the dataset is not a device.RotatedEncoder: the host encodes")
	}
	want := goldenLines(t, "rotated.golden")
	for _, c := range encCases {
		t.Run(strings.ReplaceAll(c.String(), " ", "/"), func(t *testing.T) {
			in := c.input()
			ds := Load(t, dev, in.pts)
			enc := ds.(device.RotatedEncoder)
			if err := ds.SetAnchors(in.anchors, c.m); err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Assign(); err != nil {
				t.Fatal(err)
			}
			got := make([]int32, c.n)
			if err := ds.Assignments(got); err != nil {
				t.Fatal(err)
			}
			if i := slices.Compare(got, in.assign); i != 0 {
				t.Fatalf("assignments differ from the case's (every point is far nearer its own anchor)")
			}
			ids, offsets := Lists(in.assign, c.m)
			for _, spec := range encSpecs(c.d) {
				code, err := quant.New(spec)
				if err != nil {
					t.Fatal(err)
				}
				code.SetAnchors(in.anchors)
				codes, params := make([]byte, c.n*code.CodeBytes()), make([]byte, c.m*code.ParamBytes())
				if err := enc.EncodeRotated(code.(*quant.Rotated).Layout(), in.anchors, ids, offsets, codes, params); err != nil {
					t.Fatalf("%s: %v", specName(spec), err)
				}
				key := fmt.Sprintf("%v %s", c, specName(spec))
				line, ok := want[key]
				if !ok {
					t.Fatalf("no golden line for %s", key)
				}
				if h := codeHash(codes, params); h != field(line, "sha256") {
					t.Errorf("%s: codes and parameters hash to %s, golden %s; %s", specName(spec), h, field(line, "sha256"),
						firstDifference(codes, params, in, c, spec))
				}
			}
		})
	}
}

// firstDifference says where a device's codes differ from the host's, as
// the host encodes now.
func firstDifference(codes, params []byte, in encInput, c encCase, spec quant.Spec) string {
	hc, hp := in.hostCodes(c, spec)
	if !bytes.Equal(hp, params) {
		return fmt.Sprintf("list parameters differ: device % x, host % x", params[:min(16, len(params))], hp[:min(16, len(hp))])
	}
	cb := len(codes) / c.n
	for e := range c.n {
		if !bytes.Equal(codes[e*cb:(e+1)*cb], hc[e*cb:(e+1)*cb]) {
			return fmt.Sprintf("entry %d of %d first: device % x, host % x", e, c.n, codes[e*cb:(e+1)*cb], hc[e*cb:(e+1)*cb])
		}
	}
	return "the host's codes now match the device's: the golden is stale (TestGoldens)"
}

// capable reports whether dev's datasets implement I, from a small one.
func capable[I any](t *testing.T, dev device.Device) bool {
	ds := Load(t, dev, device.Points{Data: make([]uint16, 2), N: 1, Dim: 2})
	_, ok := ds.(I)
	return ok
}

// goldenLines reads a golden file into a map from each line's case (the
// words before its first key=value result field) to the line.
func goldenLines(t testing.TB, name string) map[string]string {
	t.Helper()
	b, err := goldens.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out[caseOf(line)] = line
	}
	return out
}

// resultKeys are the fields of a golden line that hold results.
var resultKeys = []string{"picks=", "dist=", "sums=", "sha256="}

// caseOf is a golden line without its result fields.
func caseOf(line string) string {
	var keep []string
	for _, f := range strings.Fields(line) {
		if !slices.ContainsFunc(resultKeys, func(k string) bool { return strings.HasPrefix(f, k) }) {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// field is the value of key in a golden line.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
