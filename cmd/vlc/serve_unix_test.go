//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	vlc "github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/vecfile"
)

// startServe runs the built CLI's serve on a free loopback port and
// returns the process and its base URL.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(builtVLC(t, nil), append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.Fields(line + " x x x x x")[4], "http://")
	if err != nil || !ok {
		t.Fatalf("serve printed %q, %v; stderr %s", line, err, stderr.String())
	}
	go func() { bufio.NewReader(out).WriteTo(&bytes.Buffer{}) }()
	return cmd, "http://" + url, &stderr
}

func post(url, token string, body any) (int, []byte, error) {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(j))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), nil
}

// SIGTERM stops vlc serve: it finishes what is in flight and exits 0.
func TestServeSIGTERM(t *testing.T) {
	dir := t.TempDir()
	ix := cp(t, deepIndexPath(t), dir)
	cmd, url, stderr := startServe(t, "docs="+ix)
	q := make([]float32, deepDim)
	if code, body, err := post(url+"/v1/indexes/docs/search", "", map[string]any{"vector": q, "k": 3}); err != nil || code != 200 {
		t.Fatalf("search: %d %s %v", code, body, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr %s", err, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("vlc serve did not exit within 20 s of SIGTERM")
	}
}

// SIGKILL while a client adds documents one request at a time loses none
// that was acknowledged: an add is committed before its reply.
func TestServeKilledDuringAdds(t *testing.T) {
	dir := t.TempDir()
	ix := cp(t, deepIndexPath(t), dir)
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	cmd, url, _ := startServe(t, "-token-file", tok, "docs="+ix)
	base, err := vecfile.Open(deepBase, vecfile.Options{Dim: deepDim})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	var acked []string
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	go func() {
		<-ctx.Done()
		cmd.Process.Signal(syscall.SIGKILL)
	}()
	for i := 0; ; i++ {
		id := fmt.Sprintf("add-%d", i)
		code, _, err := post(url+"/v1/indexes/docs/documents", "s3cret", map[string]any{"documents": []any{map[string]any{"id": id, "vector": base.Row(i, nil)}}})
		if err != nil {
			break // killed
		}
		if code == 200 {
			acked = append(acked, id)
		}
	}
	cmd.Wait()
	if len(acked) == 0 {
		t.Fatal("no add was acknowledged before the kill")
	}
	st, err := vlc.Open(ix)
	if err != nil {
		t.Fatalf("the store after SIGKILL: %v", err)
	}
	defer st.Close()
	for _, id := range acked {
		if _, err := st.Get(id); err != nil {
			t.Errorf("acknowledged %s lost: %v", id, err)
		}
	}
	t.Logf("%d adds acknowledged before SIGKILL, all found after", len(acked))
}

// vlc serve sees what another process adds to a store it serves, within
// -refresh.
func TestServeSeesOtherWriters(t *testing.T) {
	dir := t.TempDir()
	ix := cp(t, deepIndexPath(t), dir)
	_, url, _ := startServe(t, "-refresh", "200ms", "docs="+ix)
	st, err := vlc.Open(ix)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, deepDim)
	v[0] = 1
	if _, err := st.Add(context.Background(), []vlc.Document{{ID: "from-elsewhere", Vector: v}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/indexes/docs/documents/from-elsewhere")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not see another process's add within 10 s: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// While vlc serve serves a store it has written to, a vlc add from a
// shell into the same store succeeds (the server holds the store's lock
// only during each write), the server's next search after -refresh finds
// the added vector, and the server writes again afterwards.
func TestServeShellAddWhileServing(t *testing.T) {
	dir := t.TempDir()
	ix := cp(t, deepIndexPath(t), dir)
	_, url, stderr := startServe(t, "-refresh", "100ms", "docs="+ix)
	rows := randomRows(3, deepDim, 7)
	add := func(id string, v []float32) {
		t.Helper()
		code, body, err := post(url+"/v1/indexes/docs/documents", "", map[string]any{"documents": []any{map[string]any{"id": id, "vector": v}}})
		if err != nil || code != 200 {
			t.Fatalf("add %s over HTTP: %d %s %v; stderr %s", id, code, body, err, stderr)
		}
	}
	add("over-http-1", rows[0]) // the server's write: the index becomes a store
	vecs := filepath.Join(dir, "shell.f16")
	if err := vecfile.WriteF16(vecs, rows[1:2]); err != nil {
		t.Fatal(err)
	}
	shell := exec.Command(builtVLC(t, nil), "add", ix, vecs, "-ids", writeLines(t, filepath.Join(dir, "ids"), []string{"from-shell"}))
	if out, err := shell.CombinedOutput(); err != nil {
		t.Fatalf("vlc add from a shell while vlc serve runs: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := post(url+"/v1/indexes/docs/search", "", map[string]any{"vector": rows[1], "k": 1, "nprobe": 64})
		if err != nil || code != 200 {
			t.Fatalf("search: %d %s %v", code, body, err)
		}
		if strings.Contains(string(body), `"id":"from-shell"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's search did not find the shell's add within 10 s (-refresh 100ms): %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	add("over-http-2", rows[2])
	st, err := vlc.Open(ix)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"over-http-1", "from-shell", "over-http-2"} {
		if _, err := st.Get(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// vlc serve -data DIR needs no INDEX argument: it serves the folder's
// NAME.vlc files as NAME, beside the indexes named.
func TestServeDataFolder(t *testing.T) {
	data := t.TempDir()
	_, url, stderr := startServe(t, "-data", data, "-maintain=false")
	resp, err := http.Get(url + "/v1/indexes")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(b.String()) != "[]" {
		t.Fatalf("an empty data folder's indexes: %d %s; stderr %s", resp.StatusCode, b.String(), stderr)
	}
	cp(t, deepIndexPath(t), data) // deep.vlc
	other := t.TempDir()
	_, url, stderr = startServe(t, "-data", data, "docs="+cp(t, deepIndexPath(t), other), "more="+filepath.Join(other, "deep.vlc"))
	resp, err = http.Get(url + "/v1/indexes")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ Name string }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list) != 3 || list[0].Name != "deep" || list[1].Name != "docs" || list[2].Name != "more" {
		t.Fatalf("-data with deep.vlc, docs=PATH and more=PATH served %+v, %v; stderr %s", list, err, stderr)
	}
}
