package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// lance runs lance.js on the cached data under taskset -c -cores, with
// the packages installed in -npm, and records the rows it prints.
func (b *bench) lance() error {
	modules := filepath.Join(b.cfg.NPM, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@lancedb", "lancedb")); err != nil {
		b.skip("lancedb", "all", fmt.Errorf("%w in %s: run bench/ragstore/install.sh %s", errNoNode, b.cfg.NPM, b.cfg.NPM))
		return nil
	}
	script, err := filepath.Abs(filepath.Join("bench", "ragstore", "lance.js"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("%w (run from the repository's root)", err)
	}
	var fs []map[string]any
	for _, f := range filters {
		fs = append(fs, map[string]any{"name": f.Name, "sql": f.SQL, "share": f.Share, "key": filterKey(f)})
	}
	filterJSON, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	var ps []string
	for _, p := range b.ds.Meta.Prefixes {
		ps = append(ps, strconv.Itoa(p))
	}
	data := filepath.Join(b.cfg.Dir, fmt.Sprintf("data-n%d", b.cfg.N))
	cmd := exec.CommandContext(b.ctx, "taskset", "-c", b.cfg.Cores, "node", script,
		"--data", data, "--dim", strconv.Itoa(b.ds.Meta.Dim), "--n", strconv.Itoa(b.cfg.N),
		"--work", filepath.Join(b.cfg.Dir, "stores", "lancedb"), "--passes", strconv.Itoa(b.cfg.Passes),
		"--sample", strconv.Itoa(b.cfg.Sample), "--single-n", strconv.Itoa(b.cfg.LanceN),
		"--upsert-n", strconv.Itoa(b.cfg.UpsertN), "--grown-queries", strconv.Itoa(b.cfg.LanceQ), "--prefixes", strings.Join(ps, ","), "--filters", string(filterJSON))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "LANCE_CPU_THREADS=2", "RUST_LOG=error", "LANCEDB_LOG=error")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			b.logf("lance.js printed a line that is not JSON: %q", sc.Text())
			continue
		}
		b.emit(r)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("node %s: %w", script, err)
	}
	return sc.Err()
}
