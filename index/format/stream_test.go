package format

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// createFor starts a FileWriter for sections' kinds and lengths.
func createFor(ctx context.Context, path string, secs []Section) (*FileWriter, error) {
	kinds := make([]Kind, len(secs))
	lengths := make([]int64, len(secs))
	for i, s := range secs {
		kinds[i], lengths[i] = s.Kind, int64(len(s.Data))
	}
	return CreateFile(ctx, path, kinds, lengths)
}

// streamAll writes secs through w in pieces of random sizes, the
// sections interleaved at random, each front to back, then commits.
func streamAll(w *FileWriter, secs []Section, rng *rand.Rand) error {
	rest := make([][]byte, len(secs))
	for i, s := range secs {
		rest[i] = s.Data
	}
	for {
		var open []int
		for i, r := range rest {
			if len(r) > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return w.Commit()
		}
		i := open[rng.IntN(len(open))]
		k := min(len(rest[i]), 1+rng.IntN(200))
		if rng.IntN(8) == 0 {
			k = len(rest[i])
		}
		if err := w.WriteSection(i, rest[i][:k]); err != nil {
			return err
		}
		rest[i] = rest[i][k:]
	}
}

// Sections streamed in any order and any pieces give WriteFile's bytes:
// the golden file's sections, and sections of lengths around the 64-byte
// alignment, empty ones among them.
func TestFileWriterSameBytes(t *testing.T) {
	odd := []Section{{Kind: KindOf("NONE"), Data: nil}}
	for i, n := range []int{1, 63, 64, 65, 0, 127, 128, 129, 1000} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i*31 + j)
		}
		odd = append(odd, Section{Kind: KindOf("S" + string(rune('a'+i)) + "__"), Data: data})
	}
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, c := range map[string]struct {
		secs []Section
		want []byte
	}{
		"golden": {smallSections(), golden},
		"odd":    {odd, encode(t, odd)},
	} {
		for seed := range uint64(5) {
			path := filepath.Join(dir, name+".vlc")
			w, err := createFor(context.Background(), path, c.secs)
			if err != nil {
				t.Fatal(err)
			}
			if err := streamAll(w, c.secs, rand.New(rand.NewPCG(seed, 1))); err != nil {
				t.Fatalf("%s, seed %d: %v", name, seed, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, c.want) {
				t.Errorf("%s, seed %d: the streamed file differs from WriteFile's", name, seed)
			}
		}
	}
	if n := names(t, dir); len(n) != 2 {
		t.Errorf("the folder holds %v, want the two files alone", n)
	}
}

// A streamed write canceled at any check (before the temporary file,
// before each 4 MiB chunk, before the header, before the rename) removes
// its temporary file, leaves the old file as it was and returns an error
// naming the file that wraps the context's.
func TestFileWriterCanceled(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 2*ctxChunk/16+5) // 2 chunks and a bit
	secs := []Section{{Kind: KindOf("META"), Data: []byte("meta")}, {Kind: KindOf("BIG."), Data: big}}
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	checks := 0
	for calls := int64(0); ; calls++ {
		ctx := &countdownCtx{Context: context.Background()}
		ctx.left.Store(calls)
		w, err := createFor(ctx, path, secs)
		if err == nil {
			defer w.Abort()
			err = w.WriteSection(1, big[:ctxChunk+10])
			if err == nil {
				err = w.WriteSection(0, secs[0].Data)
			}
			if err == nil {
				err = w.WriteSection(1, big[ctxChunk+10:])
			}
			if err == nil {
				err = w.Commit()
			}
		}
		if err == nil {
			checks = int(calls)
			break
		}
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
			t.Fatalf("canceled after %d checks: %v, want context.Canceled naming the file", calls, err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
			t.Fatalf("canceled after %d checks: the old file changed", calls)
		}
		if n := names(t, dir); len(n) != 1 {
			t.Fatalf("canceled after %d checks: folder holds %v", calls, n)
		}
		if calls > 100 {
			t.Fatal("never completes")
		}
	}
	if checks < 7 { // before the file, 4 chunks, before the header, before the rename
		t.Errorf("the write checked its context only %d times", checks)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, encode(t, secs)) {
		t.Error("the completed write differs from Encode")
	}
}

// Misuse is refused with an error naming the file, the temporary file
// removed and the old file left as it was: bytes past a section's length,
// a section short at Commit, a write after an error, Abort; bad kinds are
// refused before the disk is touched.
func TestFileWriterRefuses(t *testing.T) {
	secs := []Section{{Kind: KindOf("META"), Data: []byte("meta")}, {Kind: KindOf("CODE"), Data: []byte("0123456789")}}
	dir := t.TempDir()
	path := filepath.Join(dir, "idx.vlc")
	if err := WriteFile(path, smallSections()); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		do   func(w *FileWriter) error
		is   error
	}{
		{"past the length", func(w *FileWriter) error {
			w.WriteSection(1, []byte("01234"))
			return w.WriteSection(1, []byte("567890"))
		}, ErrSectionLength},
		{"short at Commit", func(w *FileWriter) error {
			w.WriteSection(0, []byte("meta"))
			w.WriteSection(1, []byte("012345678"))
			return w.Commit()
		}, ErrSectionLength},
		{"written after an error", func(w *FileWriter) error {
			w.WriteSection(0, []byte("meta!"))
			return w.WriteSection(1, []byte("0123456789"))
		}, ErrSectionLength},
		{"aborted", func(w *FileWriter) error {
			w.WriteSection(0, []byte("meta"))
			w.Abort()
			return w.Commit()
		}, nil},
	} {
		w, err := createFor(context.Background(), path, secs)
		if err != nil {
			t.Fatal(err)
		}
		err = c.do(w)
		if err == nil || !strings.Contains(err.Error(), path) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: %v, want an error naming the file, matching %v", c.name, err, c.is)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
			t.Errorf("%s: the old file changed", c.name)
		}
		if n := names(t, dir); len(n) != 1 {
			t.Errorf("%s: folder holds %v", c.name, n)
		}
	}
	for _, c := range []struct {
		kinds   []Kind
		lengths []int64
		want    string
	}{
		{[]Kind{KindOf("META"), KindOf("META")}, []int64{1, 2}, "duplicate section kind"},
		{[]Kind{KindOf("ME A")}, []int64{1}, "not 4 printable ASCII bytes"},
		{nil, nil, "no sections"},
		{[]Kind{KindOf("META")}, []int64{1, 2}, "2 lengths for 1 sections"},
		{[]Kind{KindOf("META")}, []int64{-1}, "do not match its length: -1"},
	} {
		_, err := CreateFile(context.Background(), filepath.Join(dir, "new.vlc"), c.kinds, c.lengths)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want an error with %q", c.kinds, c.lengths, err, c.want)
		}
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("refused kinds left files: %v", n)
	}
	// Abort after Commit keeps the file.
	w, err := createFor(context.Background(), path, secs)
	if err != nil {
		t.Fatal(err)
	}
	if err := streamAll(w, secs, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if got, _ := os.ReadFile(path); !bytes.Equal(got, encode(t, secs)) {
		t.Error("Abort after Commit changed the file")
	}
}
