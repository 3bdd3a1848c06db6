package vlcbeam

import (
	"fmt"
	"testing"
)

// Shards cover 0..n-1 in order without gap or overlap, differ in size by
// at most one, and are never empty (k is clamped to n).
func TestShardRanges(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for k := 1; k <= 45; k++ {
			r := shardRanges(n, k)
			if len(r) != min(k, n) {
				t.Fatalf("n=%d k=%d: %d shards", n, k, len(r))
			}
			next, small, large := 0, n, 0
			for _, lh := range r {
				if lh[0] != next || lh[1] <= lh[0] {
					t.Fatalf("n=%d k=%d: %v", n, k, r)
				}
				next = lh[1]
				small, large = min(small, lh[1]-lh[0]), max(large, lh[1]-lh[0])
			}
			if next != n || large-small > 1 {
				t.Fatalf("n=%d k=%d: %v", n, k, r)
			}
		}
	}
}

// Every sample index j of s belongs to exactly one shard, the one
// holding its row floor(j*n/s), whatever the split; every row when
// s = n.
func TestSampleRange(t *testing.T) {
	for _, n := range []int{1, 2, 7, 100, 1001} {
		for _, s := range []int{1, 2, 3, n / 2, n - 1, n} {
			if s < 1 {
				continue
			}
			for _, k := range []int{1, 2, 3, 8, n} {
				owner := make([]int, s)
				for i := range owner {
					owner[i] = -1
				}
				for i, lh := range shardRanges(n, k) {
					jlo, jhi := sampleRange(lh[0], lh[1], n, s)
					for j := jlo; j < jhi; j++ {
						if owner[j] >= 0 {
							t.Fatalf("n=%d s=%d k=%d: sample %d in shards %d and %d", n, s, k, j, owner[j], i)
						}
						owner[j] = i
						if r := sampleRow(j, n, s); r < lh[0] || r >= lh[1] {
							t.Fatalf("n=%d s=%d k=%d: sample %d is row %d, outside shard %d %v", n, s, k, j, r, i, lh)
						}
					}
				}
				for j, o := range owner {
					if o < 0 {
						t.Fatalf("n=%d s=%d k=%d: sample %d in no shard", n, s, k, j)
					}
				}
			}
			if s == n {
				for j := range s {
					if sampleRow(j, n, s) != j {
						t.Fatalf("n=s=%d: sample %d is row %d", n, j, sampleRow(j, n, s))
					}
				}
			}
		}
	}
}

func TestSampleRows(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		n    int
		want int
	}{
		{Config{}, 10000, 10000},                              // 256 x 100 anchors > n
		{Config{}, 1000000, 256000},                           // 256 x 1000
		{Config{SampleRows: 3000}, 10000, 3000},               // as asked
		{Config{SampleRows: 50}, 10000, 100},                  // at least the anchors
		{Config{SampleRows: 20000}, 10000, 10000},             // at most n
		{Config{Anchors: 10, SampleRows: 0}, 1000000, 2560},   // 256 x anchors given
		{Config{Anchors: 4096, SampleRows: 100}, 10000, 4096}, // the anchors, though more than asked
	} {
		if got := c.cfg.sampleRows(c.n); got != c.want {
			t.Errorf("%+v, n=%d: %d sample rows, want %d", c.cfg, c.n, got, c.want)
		}
	}
}

func TestOrdered(t *testing.T) {
	seg := func(i, count, lo, hi int) Segment {
		return Segment{Index: i, Count: count, Lo: lo, Hi: hi, Path: fmt.Sprint("s", i)}
	}
	paths, rows, err := ordered([]Segment{seg(2, 3, 7, 10), seg(0, 3, 0, 4), seg(1, 3, 4, 7), seg(0, 3, 0, 4)})
	if err != nil || fmt.Sprint(paths) != "[s0 s1 s2]" || rows != 10 {
		t.Errorf("ordered = %v, %d, %v; want [s0 s1 s2], 10, nil", paths, rows, err)
	}
	for _, c := range []struct {
		segs []Segment
		want string
	}{
		{nil, "vlcbeam: no segments to merge"},
		{[]Segment{seg(0, 3, 0, 4), seg(2, 3, 7, 10)}, "vlcbeam: 2 segments of 3"},
		{[]Segment{seg(0, 2, 0, 4), seg(2, 2, 4, 7)}, "vlcbeam: segment 2 of 2 where 1 of 2 belongs"},
		{[]Segment{seg(0, 2, 0, 4), seg(1, 3, 4, 7)}, "vlcbeam: segment 1 of 3 where 1 of 2 belongs"},
		{[]Segment{seg(0, 2, 0, 4), seg(1, 2, 5, 7)}, "vlcbeam: segment 1 covers rows [5, 7), want [4, ...)"},
		{[]Segment{seg(0, 2, 1, 4), seg(1, 2, 4, 7)}, "vlcbeam: segment 0 covers rows [1, 4), want [0, ...)"},
		{[]Segment{seg(0, 2, 0, 4), seg(1, 2, 4, 4)}, "vlcbeam: segment 1 covers rows [4, 4), want [4, ...)"},
	} {
		if _, _, err := ordered(c.segs); err == nil || err.Error() != c.want {
			t.Errorf("ordered(%v) = %v, want %q", c.segs, err, c.want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	ok := Config{Input: "in.f16", Output: "out.vlc"}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Input = "" }, "vlcbeam: no input"},
		{func(c *Config) { c.Output = "" }, "vlcbeam: no output"},
		{func(c *Config) { c.Shards = -1 }, "vlcbeam: -1 shards: must be 1 or more (0: 8)"},
		{func(c *Config) { c.SampleRows = -5 }, "vlcbeam: -5 sample rows: must be 1 or more (0: min(n, 256 x anchors))"},
		{func(c *Config) { c.Bits = -1 }, "vlcbeam: negative Dim, Anchors, Bits or MaxIter"},
		{func(c *Config) { c.Output = "gs://bucket/out.vlc" }, `vlcbeam: gs://bucket/out.vlc: only paths of a filesystem every worker mounts are supported (docs/DISTRIBUTED.md, "Remote storage")`},
		{func(c *Config) { c.Model, c.Bits = "m.vlc", 4 }, "vlcbeam: a Model gives the code, anchors and metric: leave Bits, Anchors, Code, Metric, SampleRows and MaxIter unset"},
	} {
		cfg := ok
		c.edit(&cfg)
		if err := cfg.check(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", cfg, err, c.want)
		}
	}
	if err := ok.check(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}
