package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/internal/regfile"
	"github.com/vlc-embed/vlc/serve"
)

// runServe serves indexes over HTTP (package serve) until the first
// SIGINT or SIGTERM, then stops accepting, lets requests in flight finish
// (up to -drain) and exits 0.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "`host:port` to listen on (loopback unless told otherwise; port 0 picks a free one)")
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token that writes (add, upsert, delete, payloads) and administration (create, drop, compact, retrain, snapshot, maintain) must present")
	data := fs.String("data", "", "`folder` of collections: each NAME.vlc in it is served as NAME, and collections are created there over HTTP (POST /v1/indexes); with it, INDEX arguments are optional")
	maintain := fs.Bool("maintain", true, "after each write to an index, run its due background work (merging small segments, training) in the background; false: the indexes are opened without it (vlc.OpenOptions{Manual: true}) and only POST /v1/indexes/NAME/maintain, compact and retrain (or vlc compact, vlc retrain) run it")
	backend := fs.String("backend", "cpu", "where to search every index served: cpu, or a GPU (cuda, webgpu) holding each segment in its memory, or auto (cuda, then webgpu, then cpu)")
	spread := fs.String("spread", "lists", "with -devices, how each index is spread over them: lists (each device a share of the lists) or queries (each device the whole index, a share of each batch)")
	devices := fs.String("devices", "", "with -backend, the GPUs to open by number (\"0\", \"0,1\", \"all\"; default one)")
	d := serve.DefaultLimits
	fs.Int64Var(&d.BodyBytes, "max-body", d.BodyBytes, "largest request body in `bytes`")
	fs.IntVar(&d.K, "max-k", d.K, "most hits a query may ask for")
	fs.IntVar(&d.Batch, "max-batch", d.Batch, "most queries a search, documents an add, ids a delete may carry")
	fs.IntVar(&d.NProbe, "max-nprobe", d.NProbe, "most lists a query may scan")
	fs.DurationVar(&d.Timeout, "timeout", d.Timeout, "longest a request may take")
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	refresh := fs.Duration("refresh", time.Second, "how often to look for changes other processes made to the indexes (vlc add, compact); 0: never")
	rerank := map[string]string{}
	fs.Func("rerank", "`NAME=FILE`: the original vectors of index NAME (row i is the vector of id i: an index compressed without -ids), for searches with \"rerank\": true; repeatable", func(v string) error {
		name, file, ok := strings.Cut(v, "=")
		if !ok || name == "" || file == "" {
			return fmt.Errorf("want NAME=FILE, got %q", v)
		}
		rerank[name] = file
		return nil
	})
	names := []string{"INDEX..."}
	if hasFlag(args, "data") {
		names = []string{"[INDEX...]"} // the collections of -data may be all it serves
	}
	pos, err := parse(fs, args, names, stdout)
	if err != nil {
		return err
	}
	token := ""
	if *tokenFile != "" {
		b, err := regfile.ReadFile(*tokenFile) // a FIFO or device is refused, not waited on
		if err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return fmt.Errorf("-token-file %s is empty", *tokenFile)
		}
	}
	// The device closes last: after the server and the indexes.
	how, err := vlc.ParseSpread(*spread)
	if err != nil {
		return fmt.Errorf("-spread: %w", err)
	}
	sd, err := vlc.OpenSearchDevice(*backend, *devices, how)
	if err != nil {
		return fmt.Errorf("-backend %s: %w", *backend, err)
	}
	defer sd.Close()
	if sd.Note != "" {
		fmt.Fprintf(stderr, "vlc serve: searching on the CPU: %s\n", sd.Note)
	}
	indexes := map[string]*vlc.Store{}
	defer func() {
		for _, ix := range indexes {
			ix.Close()
		}
	}()
	if err := openIndexes(pos, indexes, vlc.OpenOptions{Manual: !*maintain, Device: sd.Searcher}); err != nil {
		return err
	}
	originals, closeOriginals, err := openOriginals(indexes, rerank)
	defer closeOriginals()
	if err != nil {
		return err
	}
	srv, err := serve.New(indexes, serve.Config{Token: token, Limits: d, Originals: originals, Data: *data, Maintain: *maintain, Device: sd.Searcher})
	if err != nil {
		return err
	}
	if sd.Searcher != nil {
		logDevice(srv, sd.Name, stderr)
	}
	defer srv.Close() // before the indexes close: it ends background work on them
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); token == "" && !net.ParseIP(host).IsLoopback() {
		slog.Warn("listening beyond loopback without -token-file: anyone who can reach it can add and delete (and, with or without a token, search, get and read metrics)", "addr", ln.Addr().String())
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       d.Timeout, // a client that never finishes its body
		WriteTimeout:      d.Timeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Fprintf(stdout, "vlc serve: listening on http://%s (%d indexes)\n", ln.Addr(), len(srv.Names()))
	if f, ok := stdout.(interface{ Flush() error }); ok {
		f.Flush()
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	if *refresh > 0 {
		defer refreshEvery(ctx, *refresh, srv)()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("requests still in flight after -drain %v: %w", *drain, err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stderr, "vlc serve: stopped")
	return nil
}

// logDevice says how each index served sits on the device: its memory,
// and why a segment searches on the CPU.
func logDevice(srv *serve.Server, backend string, stderr io.Writer) {
	for _, name := range srv.Names() {
		in, err := srv.DeviceInfo(name)
		if err != nil {
			continue
		}
		slog.Info("index on a device", "index", name, "backend", backend, "segments", in.Segments, "on_device", in.OnDevice, "device_mib", in.Bytes>>20)
		if in.OnDevice < in.Segments {
			fmt.Fprintf(stderr, "vlc serve: index %s: %d of %d segments search on the CPU: %s\n", name, in.Segments-in.OnDevice, in.Segments, in.CPU)
		}
	}
}

// openIndexes opens the indexes named on the command line (NAME=PATH, or
// PATH named after its file: x.vlc is x) into indexes.
func openIndexes(args []string, indexes map[string]*vlc.Store, opt vlc.OpenOptions) error {
	for _, arg := range args {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			path, name = arg, strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
		}
		if _, dup := indexes[name]; dup {
			return fmt.Errorf("two indexes named %q: name them NAME=PATH", name)
		}
		ix, err := vlc.OpenWith(path, opt)
		if err != nil {
			return err
		}
		indexes[name] = ix
	}
	return nil
}

// openOriginals opens -rerank's files, each checked against its index:
// its dimension, finite values, and a row for every row the index was
// built with (re-rank needs an index compressed without -ids, never added
// to). closeAll closes those it opened, whatever the error.
func openOriginals(indexes map[string]*vlc.Store, rerank map[string]string) (_ map[string]vlc.Originals, closeAll func(), err error) {
	originals := map[string]vlc.Originals{}
	var opened []io.Closer
	closeAll = func() {
		for _, c := range opened {
			c.Close()
		}
	}
	for name, file := range rerank {
		ix := indexes[name]
		if ix == nil {
			return nil, closeAll, fmt.Errorf("-rerank %s=%s: no index named %s", name, file, name)
		}
		m, err := openLike(file, ix.Dim())
		if err != nil {
			return nil, closeAll, fmt.Errorf("-rerank %s: %w", name, err)
		}
		opened = append(opened, m)
		if err := m.CheckFinite(); err != nil {
			return nil, closeAll, fmt.Errorf("-rerank %s: %w", name, err)
		}
		in, err := ix.Info()
		if err != nil {
			return nil, closeAll, err
		}
		for _, seg := range in.Segments {
			if seg.Added || seg.IDs {
				return nil, closeAll, fmt.Errorf("-rerank %s: the index has ids of its own or added vectors, which rows of %s do not match (re-rank needs an index compressed without -ids, never added to)", name, file)
			}
		}
		if m.Len() != in.Rows+in.Deleted {
			return nil, closeAll, fmt.Errorf("-rerank %s: %s has %d vectors, the index %d", name, file, m.Len(), in.Rows+in.Deleted)
		}
		originals[name] = vlc.RowOriginals(m)
	}
	return originals, closeAll, nil
}

// refreshEvery picks up other processes' writes to the indexes served
// every period until ctx is done or the returned stop is called; stop
// returns once no Refresh runs, so that the indexes may close.
func refreshEvery(ctx context.Context, period time.Duration, srv *serve.Server) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			if err := srv.Refresh(); err != nil && rctx.Err() == nil {
				slog.Warn("refresh failed; serving the index as it was", "err", err)
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// hasFlag reports whether args set the flag name (-name, --name, with or
// without =VALUE) before the first "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
