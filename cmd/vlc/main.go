// Command vlc compresses embeddings into a searchable index, searches,
// evaluates, describes and verifies such indexes, and adds to and deletes
// from them.
//
//	vlc compress INPUT -o OUT [-dim D] [-bits 8 | -ratio R | -subspaces S] [-code rotated|pq] [-anchors M] [-metric l2|ip|cosine] [-backend auto|cpu|cuda|webgpu] [-devices all|0,1,...] [-seed S] [-ids FILE] [-payloads FILE.jsonl]
//	vlc search INDEX -query Q -k K [-nprobe P] [-rerank FILE] [-payload]
//	vlc add INDEX VECTORS [-ids FILE] [-payloads FILE.jsonl]
//	vlc delete INDEX [-ids FILE] [ID ...]
//	vlc get INDEX ID
//	vlc compact INDEX, vlc retrain INDEX
//	vlc eval INDEX -query Q (-gt GT.ivecs | -base FILE) [-k 10] [-nprobe P] [-rerank FILE] [-json]
//	vlc eval INDEX... -query Q (-gt GT.ivecs | -base FILE) -sweep [-sweep-nprobe 1,4,16] [-plot OUT.png|.svg] [-json]
//	vlc info INDEX [-json]
//	vlc verify INDEX
//	vlc bench [-backend B] [-devices all|0,1,...] [-n N] [-dim D] [-anchors M] [-iters K] [-json]
//	vlc test-cuda [--large] [-devices all|0,1,...], vlc test-webgpu [--large]
//	vlc help [COMMAND], vlc version
//
// Flags may come before or after the positional arguments. Output for people
// (progress, summaries, logs) goes to stderr, output for programs (search
// hits, -json) and help that was asked for to stdout. Any error is one line
// on stderr and exit status 1, as is output that could not be written
// (stdout on a full disk).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/vecfile"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"compress": {"compress a vector file into an index", runCompress},
	"search":   {"search an index with a file of queries", runSearch},
	"eval":     {"measure recall and speed against ground truth", runEval},
	"info":     {"describe an index", runInfo},
	"verify":   {"check every checksum of an index", runVerify},
	"add":      {"add vectors (with ids and payloads) to an index, without training", runAdd},
	"delete":   {"delete vectors from an index by id", runDelete},
	"get":      {"print the payload of an id", runGet},
	"compact":  {"rewrite an index without its deleted vectors", runCompact},
	"retrain":  {"train an index anew on its own vectors, in place", runRetrain},
	"merge":    {"join indexes encoded under one model (compress -anchors-from) into one", runMerge},

	"serve": {"serve indexes over HTTP: search, get, add, delete, metrics", runServe},

	"bench":       {"time annealing iterations of a backend: ms per iteration, TFLOP/s", runBench},
	"test-cuda":   {"check the CUDA backend against the CPU and time both", runTestCUDA},
	"test-webgpu": {"check the WebGPU backend against the CPU and time both", runTestWebGPU},
	"version":     {"print the version, the VCS revision and the backends built in", runVersion},
}

func main() {
	// The first Ctrl-C (or SIGTERM) cancels ctx: the command stops at its
	// next check, removes its temporary files and exits with status 1. The
	// default handling is then restored, so a second one kills the process
	// at once (a temporary file it leaves is removed by the next compress).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status. It turns
// every error, and any panic on this goroutine, into one line on stderr:
// a memory fault (a mapped file truncated by another program meanwhile,
// here or in par.For's workers, which inherit the setting) names the
// file that changed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (status int) {
	out := &outWriter{w: stdout}
	stdout = out
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err := fault.Error(r, "a mapped file", vecfile.ErrChanged); err != nil {
				fmt.Fprintf(stderr, "vlc %s: %v\n", strings.Join(args[:min(len(args), 1)], ""), err)
			} else {
				fmt.Fprintf(stderr, "vlc: internal error: %v\n", r)
			}
			status = 1
		}
		if status == 0 && out.err != nil {
			name := "vlc"
			if len(args) > 0 {
				name += " " + args[0]
			}
			fmt.Fprintf(stderr, "%s: the output could not be written: %v\n", name, out.err)
			status = 1
		}
	}()
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, nil)))
	isHelp := func(a string) bool { return a == "help" || a == "-h" || a == "-help" || a == "--help" }
	switch {
	case len(args) == 0: // no command: an error, the list on stderr
		usage(stderr)
		return 1
	case isHelp(args[0]) && (len(args) == 1 || isHelp(args[1])):
		usage(stdout)
		return 0
	case args[0] == "help" && len(args) > 2:
		fmt.Fprintf(stderr, "vlc help: one command at a time, got %s\n", strings.Join(args[1:], " "))
		return 1
	case args[0] == "help":
		// vlc help COMMAND is vlc COMMAND -h.
		args = []string{args[1], "-h"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "vlc: unknown command %q (try: %s)\n", args[0], strings.Join(names(), ", "))
		return 1
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Stopped by Ctrl-C or SIGTERM: say so rather than
			// "context canceled" from wherever the work stopped.
			fmt.Fprintf(stderr, "vlc %s: interrupted (%v)\n", args[0], context.Cause(ctx))
			return 1
		}
		fmt.Fprintf(stderr, "vlc %s: %v\n", args[0], oneLine(err))
		return 1
	}
	return 0
}

// outWriter is stdout that remembers its first write error, so that a
// command whose output was lost (stdout on a full disk, /dev/full) exits
// 1 however it printed, rather than each Fprintf being checked. Later
// writes fail at once with the same error. (A closed pipe on stdout ends
// the process with SIGPIPE first, as for any Go program: status 141.)
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	o.err = err
	return n, err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "vlc: compress embeddings into a small searchable index")
	fmt.Fprintln(w, "usage: vlc COMMAND [flags] ARGS   (vlc help COMMAND, or vlc COMMAND -h, for its flags)")
	for _, n := range names() {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
}

func names() []string {
	var out []string
	for n := range commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// parse parses flags that may stand before, between or after positional
// arguments (the standard flag package stops at the first positional one),
// and checks the positional arguments against their names. A last name
// ending in "..." (as "INDEX...") takes one or more arguments. -h prints
// the command's flags on help (stdout: help asked for is output).
func parse(fs *flag.FlagSet, args []string, names []string, help io.Writer) ([]string, error) {
	// Errors come back as one line; the flag list is printed only for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(help, "usage of vlc %s:\n", fs.Name())
				fs.SetOutput(help)
				fs.PrintDefaults()
			}
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	variadic := len(names) > 0 && strings.HasSuffix(names[len(names)-1], "...")
	if len(pos) < len(names) {
		missing := slices.Clone(names[len(pos):])
		missing[len(missing)-1] = strings.TrimSuffix(missing[len(missing)-1], "...")
		return nil, fmt.Errorf("missing %s argument; see vlc %s -h", strings.Join(missing, ", "), fs.Name())
	}
	if len(pos) > len(names) && !variadic {
		return nil, fmt.Errorf("want %d argument(s) (%s), got %d: %s", len(names), strings.Join(names, ", "), len(pos), strings.Join(pos, " "))
	}
	return pos, nil
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
