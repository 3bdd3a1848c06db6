package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

func evalJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, _ := mustVLC(t, append([]string{"eval"}, args...)...)
	if n := strings.Count(out, "\n"); n != 1 {
		t.Fatalf("eval -json printed %d lines, want 1: %q", n, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("eval -json output %q: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("eval -json printed more than one JSON value: %q", out)
	}
	return m
}

func TestEvalDeep2k(t *testing.T) {
	ix := deepIndexPath(t)
	wantKeys := []string{"bytes_per_vector", "k", "nprobe", "qps", "recall@1", "recall@10", "size_ratio"}

	tests := []struct {
		name        string
		args        []string
		wantNProbe  float64
		minRecall10 float64
	}{
		{"gt nprobe 45", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "45", "-json"}, 45, 0.99},
		{"nprobe clamped to anchors", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "1000", "-json"}, deepAnchors, 0.99},
		{"flags before index", []string{"-json", "-nprobe", "8", "-query", deepQuery, "-gt", deepGT, ix}, 8, 0.5},
		{"exact ground truth from base", []string{ix, "-query", deepQuery, "-base", deepBase, "-nprobe", "45", "-json"}, 45, 0.99},
		{"rerank", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "45", "-json", "-rerank", deepBase}, 45, 0.999},
		{"nprobe 0 means 1", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "0", "-json"}, 1, 0},
		{"negative nprobe means 1", []string{ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "-3", "-json"}, 1, 0},
	}
	results := map[string]map[string]any{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := evalJSON(t, tc.args...)
			results[tc.name] = m
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Fatalf("keys %v, want exactly %v", keys, wantKeys)
			}
			for _, k := range keys {
				if _, ok := m[k].(float64); !ok {
					t.Errorf("%s is %T (%v), want a number", k, m[k], m[k])
				}
			}
			r1, r10 := m["recall@1"].(float64), m["recall@10"].(float64)
			if r10 < tc.minRecall10 || r10 > 1 {
				t.Errorf("recall@10 = %v, want in [%v, 1]", r10, tc.minRecall10)
			}
			if r1 < 0 || r1 > 1 {
				t.Errorf("recall@1 = %v, want in [0, 1]", r1)
			}
			if got := m["nprobe"].(float64); got != tc.wantNProbe {
				t.Errorf("nprobe = %v, want %v", got, tc.wantNProbe)
			}
			if got := m["k"].(float64); got != 10 {
				t.Errorf("k = %v, want 10 (the default)", got)
			}
			if sr := m["size_ratio"].(float64); sr <= 0 || sr >= 0.7 {
				t.Errorf("size_ratio = %v, want in (0, 0.7)", sr)
			}
			if q := m["qps"].(float64); !(q > 0) || math.IsInf(q, 0) {
				t.Errorf("qps = %v, want a positive finite number", q)
			}
			st, err := os.Stat(ix)
			if err != nil {
				t.Fatal(err)
			}
			wantBPV := float64(st.Size()) / deepN
			if bpv := m["bytes_per_vector"].(float64); math.Abs(bpv-wantBPV) > 1e-9 {
				t.Errorf("bytes_per_vector = %v, want %v (file size / n)", bpv, wantBPV)
			}
			wantRatio := float64(st.Size()) / (2 * deepN * deepDim)
			if sr := m["size_ratio"].(float64); math.Abs(sr-wantRatio) > 1e-9 {
				t.Errorf("size_ratio = %v, want %v (file size / float16 size)", sr, wantRatio)
			}
		})
	}
	gt, base := results["gt nprobe 45"], results["exact ground truth from base"]
	if gt != nil && base != nil {
		a, b := gt["recall@10"].(float64), base["recall@10"].(float64)
		if math.Abs(a-b) > 0.01 {
			t.Errorf("recall@10 with -gt %v and with -base %v differ by more than 0.01", a, b)
		}
	}
	// nprobe beyond the number of lists scans every list, like nprobe 45.
	if a, b := results["gt nprobe 45"], results["nprobe clamped to anchors"]; a != nil && b != nil {
		if a["recall@10"] != b["recall@10"] || a["recall@1"] != b["recall@1"] {
			t.Errorf("nprobe 1000 recall %v/%v, nprobe 45 %v/%v: want equal", b["recall@1"], b["recall@10"], a["recall@1"], a["recall@10"])
		}
	}
}

func TestEvalText(t *testing.T) {
	ix := deepIndexPath(t)
	out, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "8")
	out2, _ := mustVLC(t, "eval", ix, "-query", deepQuery, "-gt", deepGT, "-nprobe", "8", "-latency")
	if !strings.Contains(out2, "latency          p50 ") || strings.Contains(out, "latency") {
		t.Errorf("-latency should add (only) a latency line:\n%s\nwithout it:\n%s", out2, out)
	}
	for _, want := range []string{"queries          200 (nprobe 8, no re-rank)", "recall@1 ", "recall@10 ", "qps ", "bytes/vector ", "size ratio "} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	ix := deepIndexPath(t)
	dir := t.TempDir()
	shortGT := filepath.Join(dir, "short.ivecs")
	if err := vecfile.WriteIvecs(shortGT, [][]int32{{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	narrowGT := filepath.Join(dir, "narrow.ivecs")
	rows := make([][]int32, deepNQ)
	for i := range rows {
		rows[i] = []int32{1, 2, 3}
	}
	if err := vecfile.WriteIvecs(narrowGT, rows); err != nil {
		t.Fatal(err)
	}
	badGT := func(name string, row, col int, id int32) string {
		rows := make([][]int32, deepNQ)
		for i := range rows {
			rows[i] = []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		}
		rows[row][col] = id
		p := filepath.Join(dir, name+".ivecs")
		if err := vecfile.WriteIvecs(p, rows); err != nil {
			t.Fatal(err)
		}
		return p
	}
	negGT, bigGT, dupGT := badGT("neg", 5, 3, -1), badGT("big", 7, 0, deepN), badGT("dup", 9, 4, 0)
	base1000 := filepath.Join(dir, "base1000.fvecs")
	if err := vecfile.WriteFvecs(base1000, randomRows(1000, deepDim, 3)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"gt and base both", []string{"eval", ix, "-query", deepQuery, "-gt", deepGT, "-base", deepBase}, []string{"-gt", "-base", "not both"}},
		{"base of 1000 rows for 2000", []string{"eval", ix, "-query", deepQuery, "-base", base1000}, []string{base1000, "1000 base vectors, the index holds 2000"}},
		{"gt id negative", []string{"eval", ix, "-query", deepQuery, "-gt", negGT}, []string{negGT, "row 5, id 3 is -1", "not a row of the index (0..1999)"}},
		{"gt id n", []string{"eval", ix, "-query", deepQuery, "-gt", bigGT}, []string{bigGT, "row 7, id 0 is 2000"}},
		{"gt id repeated", []string{"eval", ix, "-query", deepQuery, "-gt", dupGT}, []string{dupGT, "row 9: id 0 repeated"}},
		{"float file as gt", []string{"eval", ix, "-query", deepQuery, "-gt", deepQuery}, []string{deepQuery, "row 0, id 0 is", "not a row of the index"}},
		{"gt and base both, sweep", []string{"eval", ix, "-query", deepQuery, "-gt", deepGT, "-base", deepBase, "-sweep"}, []string{"not both"}},
		{"neither gt nor base", []string{"eval", ix, "-query", deepQuery}, []string{"-gt", "-base"}},
		{"no query", []string{"eval", ix, "-gt", deepGT}, []string{"-query is required"}},
		{"gt too few rows", []string{"eval", ix, "-query", deepQuery, "-gt", shortGT}, []string{shortGT, "1 rows for 200 queries"}},
		{"gt rows too short", []string{"eval", ix, "-query", deepQuery, "-gt", narrowGT}, []string{narrowGT, "row 0", "3 ids"}},
		{"k zero", []string{"eval", ix, "-query", deepQuery, "-gt", deepGT, "-k", "0"}, []string{"-k must be at least 1, got 0"}},
		{"latency with sweep", []string{"eval", ix, "-query", deepQuery, "-gt", deepGT, "-sweep-nprobe", "2,4", "-latency"}, []string{"-latency", "-sweep"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFails(t, tc.args, tc.want)
		})
	}
}

// On an index of fewer than 10 vectors recall@10 counts right answers out
// of the n there are: eval -base on 5 vectors, which every search returns
// in full, reports 1 (a recall over 10 would say 0.5), and -gt files with
// n ids a query serve.
func TestEvalFewerThanK(t *testing.T) {
	dir := t.TempDir()
	in, out, gt := filepath.Join(dir, "five.fvecs"), filepath.Join(dir, "five.vlc"), filepath.Join(dir, "five.ivecs")
	if err := vecfile.WriteFvecs(in, randomRows(5, 8, 4)); err != nil {
		t.Fatal(err)
	}
	mustVLC(t, "compress", in, "-o", out, "-anchors", "1", "-quiet")
	if err := vecfile.WriteIvecs(gt, [][]int32{{0, 3, 1, 2, 4}, {1, 0, 2, 3, 4}, {2, 1, 0, 3, 4}, {3, 0, 1, 2, 4}, {4, 0, 1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	for _, truth := range [][]string{{"-base", in}, {"-gt", gt}} {
		m := evalJSON(t, append([]string{out, "-query", in, "-json"}, truth...)...)
		if m["recall@10"].(float64) != 1 {
			t.Errorf("eval %v on 5 vectors: recall@10 %v, want 1", truth, m["recall@10"])
		}
	}
}

// eval prints the bytes of codes a query reads and that rate against the
// card's bandwidth: n/a on the CPU; a known card (the name an H100's
// backend reports, faked) gets its share.
func TestEvalCodeReads(t *testing.T) {
	out, _ := mustVLC(t, "eval", deepIndexPath(t), "-query", deepQuery, "-gt", deepGT, "-nprobe", "8")
	if !strings.Contains(out, "codes read       ") || !strings.Contains(out, "(bandwidth not known)") {
		t.Errorf("eval on the CPU lacks the code reads, or gives a bandwidth:\n%s", out)
	}
	cr := index.CodeReads{PerQuery: 1 << 20, PerBatch: 100 << 20, Followed: 1000}
	got := codeReadLines(cr, 10000, 1e5, 1000, "cuda (NVIDIA H100 80GB HBM3, 132 SMs, 79 GiB)")
	want := "codes read       1024.0 KiB a query alone (the lists it probes; 1000 queries followed); 100.0 MiB a batch of 10000 sharing each list (at least: the lists 1000 of its queries probe)\n" +
		"code bandwidth   104.9 GB/s at the qps above read a query at a time, 1.0 GB/s shared in batches: 3.1% and 0.03% of the card's 3.35 TB/s"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := codeReadLines(cr, 1000, 1e5, 1000, "webgpu (llvmpipe, Vulkan, Cpu)"); !strings.HasSuffix(got, "n/a of the card's (bandwidth not known)") || strings.Contains(got, "at least") {
		t.Errorf("an unknown card: %s", got)
	}
}
