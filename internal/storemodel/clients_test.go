package storemodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vlc-embed/vlc/vecfile"
)

// A client runs operations on the store in a process of its own. do
// answers req, or, when kill >= 0, SIGKILLs the process that much later
// and reports killed (the answer unknown); the client then starts again.
type client interface {
	name() string
	do(req request, kill time.Duration) (resp response, killed bool, err error)
	close()
}

// stderrLog keeps the last bytes the long-lived processes wrote to
// stderr, for a divergence's report.
type stderrLog struct {
	mu  sync.Mutex
	buf []byte
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 4096 {
		l.buf = l.buf[len(l.buf)-4096:]
	}
	return len(p), nil
}

func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// proc is a long-lived process speaking JSON lines: a library worker.
type proc struct {
	label string
	log   io.Writer
	start func() *exec.Cmd
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
}

func (p *proc) name() string { return p.label }

func (p *proc) launch() error {
	p.cmd = p.start()
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.out = bufio.NewReader(stdout)
	var ready response
	if err := p.read(&ready); err != nil {
		return fmt.Errorf("%s: starting: %w", p.label, err)
	}
	if ready.Err != "" {
		return fmt.Errorf("%s: starting: %s", p.label, ready.Err)
	}
	return nil
}

func (p *proc) read(v any) error {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

func (p *proc) do(req request, kill time.Duration) (response, bool, error) {
	b, _ := json.Marshal(req)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return response{}, false, err
	}
	done := make(chan struct{})
	var resp response
	var rerr error
	go func() {
		rerr = p.read(&resp)
		close(done)
	}()
	if kill >= 0 {
		select {
		case <-done:
			return resp, false, rerr // finished before the kill
		case <-time.After(kill):
		}
		p.cmd.Process.Kill()
		<-done
		p.cmd.Wait()
		return response{}, true, p.launch()
	}
	<-done
	return resp, false, rerr
}

func (p *proc) close() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.in.Close()
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// cli runs each operation as a vlc command, a process of its own that
// reads the newest version.
type cli struct {
	bin, store, dir string
	n               int // files made
}

func (c *cli) name() string { return "cli" }
func (c *cli) close()       {}

func (c *cli) file(ext string) string {
	c.n++
	return filepath.Join(c.dir, fmt.Sprintf("cli-%d%s", c.n, ext))
}

func (c *cli) do(req request, kill time.Duration) (response, bool, error) {
	var args []string
	switch req.Op {
	case "add", "upsert":
		vecs, ids, pl := c.file(".f16"), c.file(".ids"), c.file(".jsonl")
		rows := make([][]float32, len(req.Docs))
		var idLines, plLines []string
		for i, d := range req.Docs {
			rows[i] = vector(d.G)
			idLines = append(idLines, d.ID)
			plLines = append(plLines, string(payload(d.G)))
		}
		if err := vecfile.WriteF16(vecs, rows); err != nil {
			return response{}, false, err
		}
		if err := os.WriteFile(pl, []byte(strings.Join(plLines, "\n")+"\n"), 0o644); err != nil {
			return response{}, false, err
		}
		args = []string{req.Op, c.store, vecs, "-payloads", pl}
		if req.Docs[0].ID != "" { // the driver gives ids to all or none
			if err := os.WriteFile(ids, []byte(strings.Join(idLines, "\n")+"\n"), 0o644); err != nil {
				return response{}, false, err
			}
			args = append(args, "-ids", ids)
		}
	case "delete":
		args = append([]string{"delete", c.store}, req.IDs...)
	case "compact":
		args = []string{"compact", c.store}
	case "retrain":
		args = []string{"retrain", c.store, "-backend", "cpu"}
	case "get":
		args = []string{"get", c.store, req.IDs[0]}
	case "scan":
		q := c.file(".f16")
		if err := vecfile.WriteF16(q, [][]float32{vector(req.Query)}); err != nil {
			return response{}, false, err
		}
		args = []string{"search", c.store, "-query", q, "-k", strconv.Itoa(req.K), "-nprobe", "65536", "-payload"}
	case "len":
		args = []string{"info", c.store, "-json"}
	case "merge":
		args = []string{"merge", "-o", req.Out, c.store}
	default:
		return response{}, false, fmt.Errorf("cli: no operation %q", req.Op)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return response{}, false, err
	}
	if kill >= 0 {
		t := time.AfterFunc(kill, func() { cmd.Process.Signal(syscall.SIGKILL) })
		err := cmd.Wait()
		t.Stop()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return response{}, true, nil
		}
		return c.answer(req, stdout.String(), stderr.String(), err)
	}
	err := cmd.Wait() // before the output is read
	return c.answer(req, stdout.String(), stderr.String(), err)
}

// answer reads a command's output into a response.
func (c *cli) answer(req request, out, errs string, runErr error) (response, bool, error) {
	var resp response
	if runErr != nil {
		if _, ok := runErr.(*exec.ExitError); !ok {
			return resp, false, runErr
		}
		resp.Err = strings.TrimSpace(errs)
		switch {
		case strings.Contains(errs, "locked by another writer"):
			resp.Kind = "locked"
		case strings.Contains(errs, "already in the index"):
			resp.Kind = "duplicate"
		case strings.Contains(errs, "id not found"):
			resp.Kind = "notfound"
		default:
			resp.Kind = "other"
		}
		return resp, false, nil
	}
	switch req.Op {
	case "add", "upsert":
		// vlc add prints the ids it gave, one a line, in row order.
		printed := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" || len(printed) != len(req.Docs) {
			return resp, false, fmt.Errorf("cli add: output %q", out)
		}
		if req.Docs[0].ID != "" {
			for i, d := range req.Docs {
				if printed[i] != d.ID {
					return resp, false, fmt.Errorf("cli add: printed id %q for %q", printed[i], d.ID)
				}
				resp.IDs = append(resp.IDs, d.ID)
			}
		}
	case "get":
		id, p, ok := strings.Cut(strings.TrimSuffix(out, "\n"), "\t")
		g, gok := generation([]byte(p))
		if !ok || id != req.IDs[0] || !gok {
			return resp, false, fmt.Errorf("cli get: output %q", out)
		}
		resp.G = g
	case "scan":
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if line == "" {
				continue
			}
			f := strings.SplitN(line, "\t", 5)
			if len(f) != 5 {
				return resp, false, fmt.Errorf("cli search: line %q", line)
			}
			d, err := strconv.ParseFloat(f[3], 32)
			g, ok := generation([]byte(f[4]))
			if err != nil || !ok {
				return resp, false, fmt.Errorf("cli search: line %q", line)
			}
			resp.Hits = append(resp.Hits, hit{ID: f[2], D: float32(d), G: g})
		}
	case "len":
		var in struct {
			Live *int `json:"live"`
		}
		if err := json.Unmarshal([]byte(out), &in); err != nil || in.Live == nil {
			return resp, false, fmt.Errorf("cli info -json: %q", out)
		}
		resp.Len = *in.Live
	}
	return resp, false, nil
}

// server is vlc serve refreshing every 20 ms: its reads see a version at
// least as new as the one it read at start, at its last write or in its
// last answer.
type server struct {
	bin, store string
	log        io.Writer
	cmd        *exec.Cmd
	base       string
	http       *http.Client
}

func (s *server) name() string { return "serve" }

var listening = regexp.MustCompile(`listening on (http://\S+)`)

func (s *server) launch() error {
	s.cmd = exec.Command(s.bin, "serve", "-addr", "127.0.0.1:0", "-refresh", "20ms", "-max-k", "5000", "-max-nprobe", "65536", "s="+s.store)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := listening.FindStringSubmatch(line)
	if err != nil || m == nil {
		return fmt.Errorf("vlc serve: first line %q (%v)", line, err)
	}
	go io.Copy(io.Discard, stdout)
	s.base = m[1] + "/v1/indexes/s"
	s.http = &http.Client{Timeout: 60 * time.Second}
	return nil
}

func (s *server) close() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

func (s *server) do(req request, kill time.Duration) (response, bool, error) {
	var method, path string
	var body any
	switch req.Op {
	case "add", "upsert":
		type docBody struct {
			ID      string          `json:"id,omitempty"`
			Vector  []float32       `json:"vector"`
			Payload json.RawMessage `json:"payload"`
		}
		var docs []docBody
		for _, d := range req.Docs {
			docs = append(docs, docBody{ID: d.ID, Vector: vector(d.G), Payload: payload(d.G)})
		}
		method, path, body = "POST", "/documents", map[string]any{"documents": docs}
		if req.Op == "upsert" {
			path = "/upsert"
		}
	case "delete":
		method, path, body = "POST", "/delete", map[string]any{"ids": req.IDs}
	case "get":
		method, path = "GET", "/documents/"+url.PathEscape(req.IDs[0])
	case "scan":
		method, path, body = "POST", "/search", map[string]any{"vector": vector(req.Query), "k": req.K, "nprobe": 65536}
	case "len":
		method, path = "GET", ""
	default:
		return response{}, false, fmt.Errorf("serve: no operation %q", req.Op)
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	hreq, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return response{}, false, err
	}
	type result struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.http.Do(hreq)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		done <- result{r.StatusCode, b, err}
	}()
	var res result
	if kill >= 0 {
		select {
		case res = <-done:
		case <-time.After(kill):
			s.close()
			<-done
			return response{}, true, s.launch()
		}
	} else {
		res = <-done
	}
	if res.err != nil {
		return response{}, false, res.err
	}
	return s.answer(req, res.status, res.body)
}

func (s *server) answer(req request, status int, body []byte) (response, bool, error) {
	var resp response
	if status != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(body, &e)
		resp.Err = fmt.Sprintf("%d %s", status, e.Error)
		switch {
		case strings.Contains(e.Error, "already in the index"): // 409, as a lock is
			resp.Kind = "duplicate"
		case status == http.StatusConflict:
			resp.Kind = "locked"
		case status == http.StatusNotFound:
			resp.Kind = "notfound"
		default:
			resp.Kind = "other"
		}
		return resp, false, nil
	}
	var err error
	switch req.Op {
	case "add", "upsert":
		var r struct {
			IDs []string `json:"ids"`
		}
		err = json.Unmarshal(body, &r)
		resp.IDs = r.IDs
	case "get":
		var r struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if err = json.Unmarshal(body, &r); err == nil {
			g, ok := generation(r.Payload)
			if !ok || r.ID != req.IDs[0] {
				err = fmt.Errorf("serve get: %s", body)
			}
			resp.G = g
		}
	case "scan":
		var r struct {
			Hits []struct {
				ID       string          `json:"id"`
				Distance float32         `json:"distance"`
				Payload  json.RawMessage `json:"payload"`
			} `json:"hits"`
		}
		if err = json.Unmarshal(body, &r); err == nil {
			for _, h := range r.Hits {
				g, ok := generation(h.Payload)
				if !ok {
					return resp, false, fmt.Errorf("serve search: hit %s payload %s", h.ID, h.Payload)
				}
				resp.Hits = append(resp.Hits, hit{ID: h.ID, D: h.Distance, G: g})
			}
		}
	case "len":
		var r struct {
			Live int `json:"live"`
		}
		err = json.Unmarshal(body, &r)
		resp.Len = r.Live
	}
	return resp, false, err
}
