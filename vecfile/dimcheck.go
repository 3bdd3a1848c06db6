package vecfile

import (
	"math"
	"slices"

	"github.com/vlc-embed/vlc/internal/f16"
)

// A raw .f16 file does not record its dimension, and a wrong -dim that
// divides the file size reads as well as the right one: every row is a
// slice of the same stream of values, cut at other places. The check
// here looks at the stream itself. In embeddings each coordinate has its
// own distribution (its own mean and spread over the rows), so the
// values' statistics repeat with a period of the true dimension d. Read
// at a dimension p, column j gathers the values at positions j, j+p,
// j+2p, ...: when p is a multiple of d each column is one coordinate;
// otherwise it mixes several, and the columns' statistics smear towards
// each other.
//
// The measure of a period p is the share of the stream's variance that
// the column (position mod p) explains, corrected for the columns' count
// (omega squared of a one-way analysis of variance), for two features of
// each value: its offset from the overall mean, and that offset squared.
// The check refuses a dimension only when another period explains the
// values clearly better (a smeared reading), or when a divisor of the
// dimension explains them as well (each row holds several vectors).
// Data without per-coordinate structure (random values in tests,
// whitened embeddings) explains nothing at any period and always passes.
//
// Its one known false alarm: vectors made of blocks whose coordinates
// have the same statistics block after block (say two embeddings of one
// model side by side) look like rows holding several vectors. Such files
// open as .npy or .fvecs, which record their dimension and are not
// checked.
const (
	// dimCheckMinRows: files with fewer rows are not checked.
	dimCheckMinRows = 32
	// dimCheckPerColumn is the fewest sampled values per column at the
	// longest period tried.
	dimCheckPerColumn = 32
	// dimCheckMinScore is the least share of variance the likely period
	// must explain for the check to speak: below it the columns hardly
	// differ and any dimension reads alike. (The Deep1B rows of testdata
	// score 0.088 at their dimension 96, SIFT 0.39, Fashion-MNIST 0.55.)
	dimCheckMinScore = 0.02
	// dimCheckSmeared: a period that is not a multiple of the likely one
	// is refused when it explains less than this share of what the likely
	// one does (dimension 48 of the 96-dimensional Deep1B rows: 0.51;
	// Fashion-MNIST's 392, half an image, against 784: 0.78).
	dimCheckSmeared = 0.9
	// dimCheckSame: a divisor explaining at least this share of what the
	// best period does takes its place (dimension 192 of those rows,
	// against 96: 0.999; Fashion-MNIST's 784 pixels against 392: 0.78).
	dimCheckSame = 0.98
)

// checkF16Dim returns an error wrapping ErrDim and ErrLikelyDim when the
// values of the raw float16 file, read at m.dim, look like rows of
// another dimension. It reads a sample of at most a few MiB.
func (m *Matrix) checkF16Dim() error {
	if m.n < dimCheckMinRows {
		return nil
	}
	total := m.n * m.dim
	maxPeriod := max(4*m.dim, 2048)
	size := min(total, max(1<<16, dimCheckPerColumn*maxPeriod))
	maxPeriod = min(maxPeriod, size/dimCheckPerColumn, MaxDim)
	if m.dim < 2 || m.dim > maxPeriod {
		return nil
	}
	s, ok := m.f16Sample(size)
	if !ok {
		return nil // a NaN or Inf: CheckFinite names it
	}
	var periods []int
	for p := 2; p <= maxPeriod; p++ {
		if total%p == 0 {
			periods = append(periods, p)
		}
	}
	score := s.scores(periods)
	best := periods[0]
	for _, p := range periods {
		if score[p] > score[best] {
			best = p
		}
	}
	// The likely dimension: the shortest period dividing the best that
	// explains about as much.
	likely := best
	floor := score[best] - max((1-dimCheckSame)*score[best], 4*s.noise(best))
	for _, p := range periods {
		if p < likely && best%p == 0 && score[p] >= floor {
			likely = p
			break
		}
	}
	have, want := score[m.dim], score[likely]
	if likely == m.dim || want < max(dimCheckMinScore, 20*s.noise(likely)) {
		return nil
	}
	if m.dim%likely == 0 {
		return newError(likelyDim, m.path,
			"read at dimension %d, each row holds %d vectors of %d: columns j and j+%d have the same statistics (mean and spread); the dimension is likely %d, not %d",
			m.dim, m.dim/likely, likely, likely, likely, m.dim)
	}
	if have < dimCheckSmeared*want && want-have > 10*s.noise(max(likely, m.dim)) {
		return newError(likelyDim, m.path,
			"read at dimension %d, its columns mix values of different coordinates: the values' statistics (mean and spread) repeat every %d values, not every %d; the dimension is likely %d, not %d",
			m.dim, likely, m.dim, likely, m.dim)
	}
	return nil
}

// dimSample is a sample of a stream of values: chunks of consecutive
// values, each with its position in the stream.
type dimSample struct {
	starts []int       // position of each chunk's first value
	chunks [][]float64 // x: offsets from the sample's mean
	n      int         // values in all
	// Sums of x, x^2 and x^4 over the sample.
	t1, t2, t4 float64
}

// f16Sample reads about size values in 16 chunks spread over the file
// (all of it when it holds no more). ok is false when a value is NaN or
// infinite.
func (m *Matrix) f16Sample(size int) (s dimSample, ok bool) {
	total := m.n * m.dim
	k := 16
	if size >= total {
		k = 1
	}
	length := size / k
	var sum float64
	for c := range k {
		start := 0
		if k > 1 {
			start = int(int64(c) * int64(total-length) / int64(k-1))
		}
		b := m.data[2*start : 2*(start+length)]
		vals := make([]float64, length)
		for i := range vals {
			v := float64(f16.ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return dimSample{}, false
			}
			vals[i] = v
			sum += v
		}
		s.starts = append(s.starts, start)
		s.chunks = append(s.chunks, vals)
		s.n += length
	}
	mean := sum / float64(s.n)
	for _, vals := range s.chunks {
		for i, v := range vals {
			x := v - mean
			vals[i] = x
			s.t1 += x
			s.t2 += x * x
			s.t4 += x * x * x * x
		}
	}
	return s, true
}

// columnSums holds, for each column j of a period (the positions equal
// to j mod the period), the sums of x and x^2 over the sample and the
// count of its values there.
type columnSums struct {
	x, x2, n []float64
}

// sums adds the sample up by column of period p.
func (s *dimSample) sums(p int) columnSums {
	c := columnSums{make([]float64, p), make([]float64, p), make([]float64, p)}
	for k, vals := range s.chunks {
		col := s.starts[k] % p
		for _, x := range vals {
			c.x[col] += x
			c.x2[col] += x * x
			c.n[col]++
			if col++; col == p {
				col = 0
			}
		}
	}
	return c
}

// fold returns the sums of period p, a divisor of c's period.
func (c columnSums) fold(p int) columnSums {
	f := columnSums{make([]float64, p), make([]float64, p), make([]float64, p)}
	for j := range c.x {
		f.x[j%p] += c.x[j]
		f.x2[j%p] += c.x2[j]
		f.n[j%p] += c.n[j]
	}
	return f
}

// scores returns the score of each period: periods descending, each
// added up from the sample or folded from a longer one it divides.
func (s *dimSample) scores(periods []int) map[int]float64 {
	desc := slices.Sorted(slices.Values(periods))
	slices.Reverse(desc)
	var direct []columnSums
	out := make(map[int]float64, len(periods))
	for _, p := range desc {
		var c columnSums
		for _, d := range direct {
			if len(d.x)%p == 0 {
				c = d.fold(p)
				break
			}
		}
		if c.x == nil {
			c = s.sums(p)
			direct = append(direct, c)
		}
		out[p] = s.score(c)
	}
	return out
}

// score returns the share of the sample's variance that the columns of c
// explain, corrected for their number, summed over two features of a
// value: x (its offset from the mean) and x^2.
func (s *dimSample) score(c columnSums) float64 {
	var b1, b2 float64
	for j := range c.x {
		if c.n[j] > 0 {
			b1 += c.x[j] * c.x[j] / c.n[j]
			b2 += c.x2[j] * c.x2[j] / c.n[j]
		}
	}
	n, p := float64(s.n), len(c.x)
	return omega2(b1-s.t1*s.t1/n, s.t2-s.t1*s.t1/n, n, p) + omega2(b2-s.t2*s.t2/n, s.t4-s.t2*s.t2/n, n, p)
}

// omega2 is the effect size of a one-way analysis of variance: between
// sum of squares ssb and total sst over n values in p groups.
func omega2(ssb, sst, n float64, p int) float64 {
	if sst <= 0 || n <= float64(p) {
		return 0
	}
	msw := (sst - ssb) / (n - float64(p))
	return (ssb - float64(p-1)*msw) / (sst + msw)
}

// noise is about the standard deviation of a period's score on values
// without any structure: each term's is sqrt(2(p-1))/n.
func (s *dimSample) noise(p int) float64 {
	return 2 * math.Sqrt(2*float64(p)) / float64(s.n)
}
