//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// storeCrashRig is a store big enough that add and compact take some
// tens of milliseconds: 20,000 x 96 random vectors compressed (64
// anchors, ids the row numbers), to which the tests add 20,000 more, and
// the vlc binary to run (and kill) them with.
type storeCrashRig struct {
	bin, dir, ix string
	// live and gone are the ids the store at ix holds and has deleted in
	// its saved state; saved holds that state's files (ix and ix.d/*).
	live, gone []string
	saved      map[string][]byte
	// inputs are the files of the folder the tests made themselves.
	inputs map[string]bool
}

func newStoreCrashRig(t *testing.T) *storeCrashRig {
	t.Helper()
	r := &storeCrashRig{bin: builtVLC(t, nil), dir: t.TempDir(), inputs: map[string]bool{}}
	r.ix = filepath.Join(r.dir, "s.vlc")
	base := r.input(t, "base.f16")
	if err := vecfile.WriteF16(base, randomRows(20000, 96, 11)); err != nil {
		t.Fatal(err)
	}
	r.vlc(t, "compress", base, "-dim", "96", "-o", r.ix, "-code", "rotated", "-anchors", "64", "-max-iter", "5", "-quiet")
	for i := range 20000 {
		r.live = append(r.live, strconv.Itoa(i))
	}
	r.save(t)
	return r
}

// input returns the path of a file the test makes in the folder.
func (r *storeCrashRig) input(t *testing.T, name string) string {
	r.inputs[name] = true
	return filepath.Join(r.dir, name)
}

// addInput writes n random rows and their ids, prefix0 .. prefix<n-1>,
// and returns the two files and the ids.
func (r *storeCrashRig) addInput(t *testing.T, prefix string, n int, seed uint64) (vecs, idsFile string, ids []string) {
	t.Helper()
	vecs = r.input(t, prefix+".f16")
	if err := vecfile.WriteF16(vecs, randomRows(n, 96, seed)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s%d", prefix, i))
	}
	return vecs, writeLines(t, r.input(t, prefix+".ids"), ids), ids
}

// vlc runs the binary to the end; it must succeed.
func (r *storeCrashRig) vlc(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(r.bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vlc %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// save records the store's files as the state to come back to.
func (r *storeCrashRig) save(t *testing.T) {
	t.Helper()
	r.saved = map[string][]byte{filepath.Base(r.ix): readFile(t, r.ix)}
	ents, err := os.ReadDir(r.ix + ".d")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := filepath.Join(filepath.Base(r.ix)+".d", e.Name())
		r.saved[name] = readFile(t, filepath.Join(r.dir, name))
	}
}

// restore puts the saved state back: new files, not rewritten ones (a
// segment may be a hard link of the index file).
func (r *storeCrashRig) restore(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(r.ix + ".d"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.ix); err != nil {
		t.Fatal(err)
	}
	for name, b := range r.saved {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// storeInfo runs vlc info -json in a process of its own.
func (r *storeCrashRig) info(t *testing.T) storeInfo {
	t.Helper()
	out := r.vlc(t, "info", "-json", r.ix)
	var in storeInfo
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("info -json output %q: %v", out, err)
	}
	return in
}

// present opens the store in this process and counts the ids of each
// list that Get finds.
func (r *storeCrashRig) present(t *testing.T, lists ...[]string) []int {
	t.Helper()
	ix, err := vlc.Open(r.ix)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer ix.Close()
	n := make([]int, len(lists))
	for i, ids := range lists {
		for _, id := range ids {
			if _, err := ix.Get(id); err == nil {
				n[i]++
			}
		}
	}
	return n
}

// checkClean checks that nothing is left over.
func (r *storeCrashRig) checkClean(t *testing.T, in storeInfo) {
	t.Helper()
	if left := r.leftovers(t, in); len(left) > 0 {
		t.Errorf("left behind %v", left)
	}
}

// leftovers lists what the store's folder and segment folder hold besides
// the test's inputs, the index, its lock file, its segment folder and the
// segments in.Segments names.
func (r *storeCrashRig) leftovers(t *testing.T, in storeInfo) []string {
	t.Helper()
	base := filepath.Base(r.ix)
	var left []string
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); !r.inputs[n] && n != base && n != base+".lock" && n != base+".d" {
			left = append(left, n)
		}
	}
	named := map[string]bool{}
	for _, s := range in.Segments {
		if s.File != r.ix {
			named[filepath.Base(s.File)] = true
		}
	}
	ents, err = os.ReadDir(r.ix + ".d")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !named[e.Name()] {
			left = append(left, filepath.Join(base+".d", e.Name()))
		}
	}
	return left
}

// storeTrial is one run of a command that may be killed.
type storeTrial struct {
	phase  string        // what the command had visibly done when the kill was sent, or "finished"
	at     time.Duration // when the kill was sent (or the run ended)
	exit   int           // -1: killed
	stderr string
}

// The phases of a write that can be seen from outside, by the temporary
// files (WriteFile's ".<base>.tmp-<pid>-<random>") of its process: of a
// new segment in the segment folder, then of the file at the path (the
// manifest, or for compact the merged index), each renamed into place.
const (
	phaseBefore        = "before writing"
	phaseSegment       = "writing a segment"
	phaseSegmentDone   = "segment renamed into place"
	phaseAtPath        = "writing the file at the path"
	phaseAtPathRenamed = "file at the path renamed into place"
)

// watch follows process pid's temporary files.
type watch struct {
	r                 *storeCrashRig
	tag               string
	segNow, segSeen   bool
	pathNow, pathSeen bool
}

func (w *watch) update() {
	w.segNow, w.pathNow = false, false
	ents, _ := os.ReadDir(w.r.dir)
	for _, e := range ents {
		w.pathNow = w.pathNow || strings.HasPrefix(e.Name(), "."+filepath.Base(w.r.ix)+w.tag)
	}
	ents, _ = os.ReadDir(w.r.ix + ".d")
	for _, e := range ents {
		w.segNow = w.segNow || strings.HasPrefix(e.Name(), ".seg-") && strings.Contains(e.Name(), w.tag)
	}
	w.segSeen = w.segSeen || w.segNow
	w.pathSeen = w.pathSeen || w.pathNow
}

func (w *watch) phase() string {
	switch {
	case w.pathNow:
		return phaseAtPath
	case w.pathSeen:
		return phaseAtPathRenamed
	case w.segNow:
		return phaseSegment
	case w.segSeen:
		return phaseSegmentDone
	}
	return phaseBefore
}

// trial runs vlc args and kills it with SIGKILL after delay or, when
// at is not "", as soon as the phase at is seen (not at all if the
// process ends first).
func (r *storeCrashRig) trial(t *testing.T, args []string, delay time.Duration, at string) storeTrial {
	t.Helper()
	cmd := exec.Command(r.bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	w := &watch{r: r, tag: fmt.Sprintf(".tmp-%d-", cmd.Process.Pid)}
	res := storeTrial{phase: "finished"}
	var timer <-chan time.Time
	if at == "" {
		timer = time.After(delay)
	}
wait:
	for {
		w.update()
		select {
		case <-done:
			break wait
		case <-timer:
			res.phase = w.phase()
			break wait
		default:
		}
		if at != "" && w.phase() == at {
			res.phase = at
			break wait
		}
		if time.Since(start) > time.Minute {
			cmd.Process.Kill()
			t.Fatalf("vlc %s ran for a minute", strings.Join(args, " "))
		}
		time.Sleep(50 * time.Microsecond)
	}
	res.at = time.Since(start)
	if res.phase != "finished" {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	<-done
	res.exit = cmd.ProcessState.ExitCode()
	res.stderr = stderr.String()
	if res.exit != 0 && res.exit != -1 {
		t.Errorf("vlc %s: exit %d, stderr %q", strings.Join(args, " "), res.exit, res.stderr)
	}
	return res
}

// crashPoints are the kills a test tries: at fractions of a complete
// run's duration, then as each phase is seen.
type crashPoint struct {
	name  string
	delay time.Duration
	at    string
}

func crashPoints(full time.Duration, phases ...string) []crashPoint {
	fractions := []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	if testing.Short() {
		fractions = []float64{0.3, 0.8}
	}
	var pts []crashPoint
	for _, f := range fractions {
		pts = append(pts, crashPoint{name: fmt.Sprintf("%.0f%% of a complete run", 100*f), delay: time.Duration(f * float64(full))})
	}
	for _, p := range phases {
		pts = append(pts, crashPoint{name: "at " + p, at: p})
	}
	return pts
}

// run runs one trial; a kill at a phase is tried up to three times, as
// the polling may miss a short one, the saved state restored after each
// run that finished instead.
func (p crashPoint) run(t *testing.T, r *storeCrashRig, args []string) storeTrial {
	t.Helper()
	for try := 0; ; try++ {
		res := r.trial(t, args, p.delay, p.at)
		if res.phase != "finished" || p.at == "" {
			return res
		}
		r.restore(t)
		if try == 2 {
			return res
		}
	}
}

// afterKill checks that a later add (of a few rows with fresh ids) works
// after whatever the kill left: no stale lock, and leftovers removed.
func (r *storeCrashRig) afterKill(t *testing.T, n int, live int) {
	t.Helper()
	vecs, idsFile, ids := r.addInput(t, fmt.Sprintf("later%d-", n), 10, uint64(1000+n))
	r.vlc(t, "add", r.ix, vecs, "-ids", idsFile)
	r.vlc(t, "verify", r.ix)
	in := r.info(t)
	if in.Live != live+10 {
		t.Errorf("a later add: %d live, want %d", in.Live, live+10)
	}
	if got := r.present(t, ids); got[0] != len(ids) {
		t.Errorf("a later add: %d of its %d ids found", got[0], len(ids))
	}
	r.checkClean(t, in)
	for _, name := range []string{vecs, idsFile} {
		os.Remove(name)
		delete(r.inputs, filepath.Base(name))
	}
}

// killAdds kills vlc add at each crash point, starting from the saved
// state each time, and checks that the store holds the old rows or the
// old and all the new ones, never part of them.
func (r *storeCrashRig) killAdds(t *testing.T, stage string) {
	addVecs, addIDs, added := r.addInput(t, "add-", 20000, 12)
	args := []string{"add", r.ix, addVecs, "-ids", addIDs}
	oldIndex := readFile(t, r.ix)

	// A complete run, to time (no phase is called "finished": it runs to the end).
	ref := r.trial(t, args, 0, "finished")
	if ref.exit != 0 {
		t.Fatalf("reference add: exit %d, stderr %q", ref.exit, ref.stderr)
	}
	if in := r.info(t); in.Live != len(r.live)+len(added) {
		t.Fatalf("reference add: %d live, want %d", in.Live, len(r.live)+len(added))
	}
	r.restore(t)
	t.Logf("%s: a complete add took %v", stage, ref.at.Round(time.Millisecond))

	phases := map[string]int{}
	kept, done := 0, 0
	for n, p := range crashPoints(ref.at, phaseSegment, phaseSegmentDone, phaseAtPath, phaseAtPathRenamed) {
		res := p.run(t, r, args)
		if res.phase == "finished" && p.at != "" {
			t.Logf("%s, %s: the phase went by unseen", stage, p.name)
			continue
		}
		phases[res.phase]++
		if out, err := exec.Command(r.bin, "verify", r.ix).CombinedOutput(); err != nil {
			t.Fatalf("%s, %s: killed at %v (%s): verify: %v\n%s", stage, p.name, res.at, res.phase, err, out)
		}
		in := r.info(t)
		got := r.present(t, r.live, r.gone, added)
		t.Logf("%s, %s: killed at %v (%s), exit %d: %d live, %d segments, left %v", stage, p.name, res.at.Round(100*time.Microsecond), res.phase, res.exit, in.Live, len(in.Segments), r.leftovers(t, in))
		if got[0] != len(r.live) || got[1] != 0 {
			t.Errorf("%s, %s: %d of the %d live ids and %d of the %d deleted ones found", stage, p.name, got[0], len(r.live), got[1], len(r.gone))
		}
		switch {
		case in.Live == len(r.live) && got[2] == 0:
			kept++
			if !bytes.Equal(readFile(t, r.ix), oldIndex) {
				t.Errorf("%s, %s: the old rows, but the file at the path changed", stage, p.name)
			}
		case in.Live == len(r.live)+len(added) && got[2] == len(added):
			done++
		default:
			t.Fatalf("%s, %s: a mix: %d live (before %d, added %d), %d of the added ids found", stage, p.name, in.Live, len(r.live), len(added), got[2])
		}
		r.afterKill(t, n, in.Live)
		r.restore(t)
	}
	t.Logf("%s: %d kills left the old rows, %d the new ones (phases %v)", stage, kept, done, phases)
	if kept == 0 {
		t.Errorf("%s: every add finished before its kill", stage)
	}
	if phases[phaseSegment] == 0 {
		t.Errorf("%s: no kill landed while the segment was being written", stage)
	}
}

// TestStoreCrashAdd kills vlc add at several points, first on a lone index
// file (whose first add makes it a store), then on a store with deletions:
// each time the store opens and verifies, holds either the old rows or
// the old and every new one, and a later add succeeds and clears what the
// kill left.
func TestStoreCrashAdd(t *testing.T) {
	r := newStoreCrashRig(t)
	r.killAdds(t, "lone index")

	// A store: 2,000 rows added and 500 deleted, from each segment.
	vecs, idsFile, ids := r.addInput(t, "b-", 2000, 13)
	r.vlc(t, "add", r.ix, vecs, "-ids", idsFile)
	var del []string
	gone := map[string]bool{}
	for i := 0; i < 2000; i += 8 {
		del = append(del, strconv.Itoa(i*10), ids[i])
		gone[strconv.Itoa(i*10)], gone[ids[i]] = true, true
	}
	r.vlc(t, append([]string{"delete", r.ix}, del...)...)
	r.live = slices.DeleteFunc(append(r.live, ids...), func(id string) bool { return gone[id] })
	r.gone = del
	if in := r.info(t); in.Live != len(r.live) || in.Deleted != len(del) || len(in.Segments) != 2 {
		t.Fatalf("the store: %+v, want %d live, %d deleted, 2 segments", in, len(r.live), len(del))
	}
	r.save(t)
	r.killAdds(t, "store")
}

// TestStoreCrashCompact kills vlc compact at several points: each time
// the store opens and verifies, holds exactly the same live ids (and none
// of the deleted ones), as the old segments or the compacted file, and a
// later add succeeds and clears what the kill left.
func TestStoreCrashCompact(t *testing.T) {
	r := newStoreCrashRig(t)
	vecs, idsFile, ids := r.addInput(t, "a-", 20000, 12)
	r.vlc(t, "add", r.ix, vecs, "-ids", idsFile)
	var del []string
	for i := 0; i < 20000; i += 20 {
		del = append(del, strconv.Itoa(i), ids[i+1])
	}
	delFile := writeLines(t, r.input(t, "del.ids"), del)
	r.vlc(t, "delete", r.ix, "-ids", delFile)
	gone := map[string]bool{}
	for _, id := range del {
		gone[id] = true
	}
	r.live = slices.DeleteFunc(append(r.live, ids...), func(id string) bool { return gone[id] })
	r.gone = del
	before := r.info(t)
	if before.Live != len(r.live) || before.Deleted != len(del) || len(before.Segments) != 2 {
		t.Fatalf("the store: %+v, want %d live, %d deleted, 2 segments", before, len(r.live), len(del))
	}
	r.save(t)
	oldManifest := readFile(t, r.ix)

	// Queries: some deleted vectors themselves, which search must not return.
	all := randomRows(20000, 96, 11)
	var q [][]float32
	for i := 0; i < 200; i += 20 {
		q = append(q, all[i])
	}
	query := r.input(t, "q.fvecs")
	if err := vecfile.WriteFvecs(query, q); err != nil {
		t.Fatal(err)
	}
	checkSearch := func(name string) {
		t.Helper()
		out := r.vlc(t, "search", r.ix, "-query", query, "-k", "10", "-nprobe", "64")
		hits := parseStoreHits(t, out, false)
		if len(hits) != 10*len(q) {
			t.Errorf("%s: %d hits, want %d", name, len(hits), 10*len(q))
		}
		for _, h := range hits {
			if gone[h.id] {
				t.Errorf("%s: search returned deleted id %q", name, h.id)
			}
		}
	}

	ref := r.trial(t, []string{"compact", r.ix}, 0, "finished") // runs to the end
	if ref.exit != 0 {
		t.Fatalf("reference compact: exit %d, stderr %q", ref.exit, ref.stderr)
	}
	if in := r.info(t); in.Live != len(r.live) || in.Deleted != 0 || len(in.Segments) != 1 {
		t.Fatalf("reference compact: %+v", in)
	}
	checkSearch("reference compact")
	r.restore(t)
	t.Logf("a complete compact took %v", ref.at.Round(time.Millisecond))

	phases := map[string]int{}
	kept, done := 0, 0
	for n, p := range crashPoints(ref.at, phaseAtPath, phaseAtPathRenamed) {
		res := p.run(t, r, []string{"compact", r.ix})
		if res.phase == "finished" && p.at != "" {
			t.Logf("%s: the phase went by unseen", p.name)
			continue
		}
		phases[res.phase]++
		if out, err := exec.Command(r.bin, "verify", r.ix).CombinedOutput(); err != nil {
			t.Fatalf("%s: killed at %v (%s): verify: %v\n%s", p.name, res.at, res.phase, err, out)
		}
		in := r.info(t)
		got := r.present(t, r.live, r.gone)
		t.Logf("%s: killed at %v (%s), exit %d: %d live, %d deleted, %d segments, left %v", p.name, res.at.Round(100*time.Microsecond), res.phase, res.exit, in.Live, in.Deleted, len(in.Segments), r.leftovers(t, in))
		if in.Live != len(r.live) || got[0] != len(r.live) || got[1] != 0 {
			t.Fatalf("%s: %d live, %d of the %d live ids and %d of the %d deleted ones found", p.name, in.Live, got[0], len(r.live), got[1], len(r.gone))
		}
		switch {
		case len(in.Segments) == 2 && in.Deleted == len(del):
			kept++
			if !bytes.Equal(readFile(t, r.ix), oldManifest) {
				t.Errorf("%s: the old segments, but the manifest changed", p.name)
			}
		case len(in.Segments) == 1 && in.Deleted == 0:
			done++
		default:
			t.Fatalf("%s: neither the old store nor the compacted one: %+v", p.name, in)
		}
		checkSearch(p.name)
		r.afterKill(t, n, in.Live)
		r.restore(t)
	}
	t.Logf("%d kills left the old segments, %d the compacted file (phases %v)", kept, done, phases)
	if kept == 0 {
		t.Error("every compact finished before its kill")
	}
	if phases[phaseAtPath] == 0 {
		t.Error("no kill landed while the compacted file was being written")
	}
}
