//go:build unix

package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/store"
)

// graphWorkerEnv names the store and the stage at which a worker
// process (this test binary, run again) stops its graph job: it prints
// the stage and waits to be killed; with no stage it runs Maintain to
// the end.
const graphWorkerEnv = "VLC_STORE_GRAPH_WORKER"

// TestGraphJobKilled: a process killed (SIGKILL) while its graph job
// has the graph computed, or its output written to the pending folder
// and not yet committed, leaves the store as it was (no graph, every
// row); the next process's background work removes what the dead one
// left and builds the graph; then the segment folder holds only what
// the store names.
func TestGraphJobKilled(t *testing.T) {
	if w := os.Getenv(graphWorkerEnv); w != "" {
		graphWorker(w)
		return
	}
	docs := deepDocs(t, "../testdata/deep2k/base.f16", 0, jobRows)
	stages := []string{"computed", "written"}
	if testing.Short() { // the one that leaves a file
		stages = stages[1:]
	}
	for _, stage := range stages {
		t.Run(stage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k.vlc")
			st := policyStore(t, path, docs, jobRows)
			st.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^TestGraphJobKilled$")
			cmd.Env = append(os.Environ(), graphWorkerEnv+"="+path+"|"+stage)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if strings.TrimSpace(line) != stage {
				t.Fatalf("worker said %q (%v), want %q", line, err, stage)
			}
			pending, _ := os.ReadDir(filepath.Join(path+".d", "pending"))
			t.Logf("killed at %s: the pending folder holds %d file(s)", stage, len(pending))
			st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
			if err != nil {
				t.Fatal(err)
			}
			if has, _ := graphs(t, st); has[0] || st.Len() != jobRows {
				t.Fatalf("after the kill: graphs %v, %d rows; want none, %d", has, st.Len(), jobRows)
			}
			st.Close()
			// The next process: its job finds the dead one's file stale.
			next := exec.Command(os.Args[0], "-test.run=^TestGraphJobKilled$")
			next.Env = append(os.Environ(), graphWorkerEnv+"="+path+"|")
			if b, err := next.CombinedOutput(); err != nil {
				t.Fatalf("the next process: %v\n%s", err, b)
			}
			checkFolder(t, path)
			st, err = vlc.OpenWith(path, vlc.OpenOptions{Manual: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if has, _ := graphs(t, st); !has[0] || st.Len() != jobRows {
				t.Fatalf("after the next process: graphs %v, %d rows; want one, %d", has, st.Len(), jobRows)
			}
		})
	}
}

// graphWorker is TestGraphJobKilled's worker process.
func graphWorker(spec string) {
	path, stage, _ := strings.Cut(spec, "|")
	st, err := store.OpenWith(path, store.OpenOptions{Manual: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	store.SetJobHook(func(kind, s string) {
		if kind == "graph" && s == stage {
			fmt.Println(s)
			select {} // until killed
		}
	})
	if err := st.Maintain(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	st.Close()
}
