//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/vecfile"
)

// crashRig is a compress run big enough to interrupt: 100,000 x 32
// float16 vectors, 64 anchors, 14 iterations (training takes a second or
// two on a 2-core VM), replacing an index already at out.
type crashRig struct {
	bin, dir, in, out string
	old               []byte
	toWrite           time.Duration // from start until the temporary file appears
}

func (r *crashRig) args(seed int) []string {
	return []string{"compress", r.in, "-dim", "32", "-o", r.out, "-anchors", "64", "-max-iter", "14", "-seed", strconv.Itoa(seed), "-quiet"}
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the CLI and runs it for several seconds")
	}
	r := &crashRig{bin: builtVLC(t, nil), dir: t.TempDir()}
	r.in, r.out = filepath.Join(r.dir, "big.f16"), filepath.Join(r.dir, "big.vlc")
	if err := vecfile.WriteF16(r.in, randomRows(100000, 32, 5)); err != nil {
		t.Fatal(err)
	}
	// The old index, then a timed run that shows when writing starts.
	if out, err := exec.Command(r.bin, r.args(1)...).CombinedOutput(); err != nil {
		t.Fatalf("compress: %v\n%s", err, out)
	}
	r.old = readFile(t, r.out)
	res := r.trial(t, nil, 0, true, 2)
	if res.phase != "writing" || res.exit != 0 {
		t.Fatalf("reference run: phase %q, exit %d, stderr %q", res.phase, res.exit, res.stderr)
	}
	r.toWrite = res.at
	r.restore(t)
	t.Logf("reference run: the temporary file appeared after %v", r.toWrite)
	return r
}

func (r *crashRig) restore(t *testing.T) {
	if err := os.WriteFile(r.out, r.old, 0o644); err != nil {
		t.Fatal(err)
	}
}

type trialResult struct {
	phase  string        // "before writing" (input, training, encoding), "writing", or "finished"
	at     time.Duration // when the signal was sent (or the run ended)
	exit   int           // -1: ended by the signal
	pid    int
	stderr string
}

// tempFile returns the name of a temporary file of r.out that process pid
// writes (not the writability probe that compress makes at its start).
func (r *crashRig) tempFile(pid int) string {
	ents, _ := os.ReadDir(r.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf(".%s.tmp-%d-", filepath.Base(r.out), pid)) && !strings.Contains(e.Name(), "-probe") {
			return e.Name()
		}
	}
	return ""
}

// trial runs compress and sends sig (nil: none) after delay or, with
// atWrite, as soon as the temporary file appears.
func (r *crashRig) trial(t *testing.T, sig os.Signal, delay time.Duration, atWrite bool, seed int) trialResult {
	t.Helper()
	cmd := exec.Command(r.bin, r.args(seed)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	res := trialResult{phase: "finished", pid: cmd.Process.Pid}
	timer := time.NewTimer(delay)
	defer timer.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-timer.C:
			if !atWrite {
				res.phase = "before writing"
				if r.tempFile(res.pid) != "" {
					res.phase = "writing"
				}
				break wait
			}
		default:
		}
		if atWrite && r.tempFile(res.pid) != "" {
			res.phase = "writing"
			break
		}
		if time.Since(start) > 2*time.Minute {
			cmd.Process.Kill()
			t.Fatal("compress ran for two minutes")
		}
		time.Sleep(200 * time.Microsecond)
	}
	res.at = time.Since(start)
	if res.phase != "finished" && sig != nil {
		cmd.Process.Signal(sig)
	}
	<-done
	res.exit = cmd.ProcessState.ExitCode()
	res.stderr = stderr.String()
	return res
}

// checkIndex reports whether r.out holds the old index unchanged, or else
// a complete, verified new one.
func (r *crashRig) checkIndex(t *testing.T) (unchanged bool) {
	t.Helper()
	if bytes.Equal(readFile(t, r.out), r.old) {
		return true
	}
	ix, err := index.Open(r.out, index.Options{Verify: true})
	if err != nil {
		t.Fatalf("the index at the output is neither the old one nor a complete new one: %v", err)
	}
	ix.Close()
	return false
}

// leftovers lists the folder's files other than the input and the output.
func (r *crashRig) leftovers(t *testing.T) []string {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != filepath.Base(r.in) && e.Name() != filepath.Base(r.out) {
			names = append(names, e.Name())
		}
	}
	return names
}

// A compress killed with SIGKILL at any moment (reading, training,
// encoding, writing) leaves the previous index at the output intact; the
// only things it can leave behind are its own temporary file, named with
// its process id, and the output's lock file (unlocked by the kernel),
// which the next compress to the same output removes.
func TestCompressKilled(t *testing.T) {
	r := newCrashRig(t)
	phases := map[string]int{}
	killed := 0
	try := func(name string, delay time.Duration, atWrite bool) {
		res := r.trial(t, syscall.SIGKILL, delay, atWrite, 3)
		phases[res.phase]++
		t.Logf("%s: SIGKILL at %v, phase %s, exit %d", name, res.at.Round(time.Millisecond), res.phase, res.exit)
		if r.checkIndex(t) {
			killed++
		} else {
			r.restore(t) // it finished before the signal: start again from the old index
		}
		for _, name := range r.leftovers(t) {
			// The lock file a compress over an index takes (store.Claim),
			// unlocked by the kernel: the next compress removes it.
			if name == filepath.Base(r.out)+".lock" {
				continue
			}
			if !strings.HasPrefix(name, fmt.Sprintf(".%s.tmp-%d-", filepath.Base(r.out), res.pid)) {
				t.Errorf("left behind %s, which is not a temporary file of process %d", name, res.pid)
			}
		}
	}
	for _, f := range []float64{0.02, 0.2, 0.5, 0.8, 0.97} {
		try(fmt.Sprintf("%.0f%% of the way to writing", 100*f), time.Duration(f*float64(r.toWrite)), false)
	}
	for i := 0; i < 5 && phases["writing"] < 2; i++ {
		try("as the temporary file appears", 0, true)
	}
	if phases["writing"] == 0 {
		t.Error("no kill landed while the index was being written")
	}
	if killed == 0 {
		t.Error("every run finished before its kill")
	}
	left := r.leftovers(t)
	t.Logf("%d kills left the old index intact (phases %v); %d temporary files left", killed, phases, len(left))

	// The next compress removes the leftovers and says so.
	res := r.trial(t, nil, 0, false, 4)
	if res.exit != 0 {
		t.Fatalf("compress after the kills: exit %d, stderr %q", res.exit, res.stderr)
	}
	if n := len(r.leftovers(t)); n != 0 {
		t.Errorf("after a complete compress, %d files are left: %v", n, r.leftovers(t))
	}
	temps := 0
	for _, name := range left {
		if !strings.HasSuffix(name, ".lock") {
			temps++
		}
	}
	if temps > 0 && strings.Count(res.stderr, "removed a temporary file left by an interrupted compress") != temps {
		t.Errorf("compress removed %d leftovers, stderr %q", len(left), res.stderr)
	}
}

// Ctrl-C (SIGINT) and SIGTERM stop compress cleanly at any moment: exit
// status 1, one line saying it was interrupted, the old index intact and
// no temporary file left.
func TestCompressInterrupted(t *testing.T) {
	r := newCrashRig(t)
	phases := map[string]int{}
	interrupted := 0
	try := func(name string, sig os.Signal, delay time.Duration, atWrite bool) {
		res := r.trial(t, sig, delay, atWrite, 3)
		phases[res.phase]++
		t.Logf("%s: %v at %v, phase %s, exit %d, stderr %q", name, sig, res.at.Round(time.Millisecond), res.phase, res.exit, res.stderr)
		if !r.checkIndex(t) {
			if res.exit != 0 {
				t.Errorf("exit %d, but the new index is in place", res.exit)
			}
			r.restore(t)
		} else {
			interrupted++
			want := fmt.Sprintf("vlc compress: interrupted (%v signal received)\n", sig)
			if res.exit != 1 || res.stderr != want {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.exit, res.stderr, want)
			}
		}
		if left := r.leftovers(t); len(left) != 0 {
			t.Errorf("left behind %v", left)
		}
	}
	for _, f := range []float64{0.1, 0.5, 0.9, 0.99} {
		// Not before the program is running: a signal that arrives while
		// the runtime and the packages start (tens of milliseconds on a
		// busy machine) finds no handler yet and kills it, as it would
		// any program.
		delay := max(time.Duration(f*float64(r.toWrite)), 100*time.Millisecond)
		try(fmt.Sprintf("%.0f%% of the way to writing", 100*f), os.Interrupt, delay, false)
	}
	for i := 0; i < 5 && phases["writing"] < 2; i++ {
		try("as the temporary file appears", os.Interrupt, 0, true)
	}
	try("SIGTERM halfway", syscall.SIGTERM, r.toWrite/2, false)
	if phases["writing"] == 0 {
		t.Error("no interrupt landed while the index was being written")
	}
	t.Logf("%d interrupts left the old index intact (phases %v)", interrupted, phases)
}
