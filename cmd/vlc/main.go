// Command vlc compresses embeddings into a searchable index, searches,
// evaluates, describes and verifies such indexes, and adds to and deletes
// from them.
//
//	vlc compress [flags] INPUT
//	vlc search [flags] -query FILE INDEX
//	vlc eval [flags] -query FILE (-gt FILE | -base FILE) INDEX...
//	vlc info [flags] INDEX
//	vlc verify INDEX
//	vlc create [flags] PATH
//	vlc add [flags] INDEX VECTORS, vlc upsert [flags] INDEX VECTORS
//	vlc delete [flags] INDEX [ID...]
//	vlc get [flags] INDEX ID, vlc set-payload INDEX ID PAYLOAD
//	vlc count [flags] INDEX, vlc list [flags] INDEX
//	vlc snapshot INDEX OUT, vlc drop INDEX
//	vlc compact INDEX
//	vlc retrain [flags] INDEX
//	vlc merge [flags] -o OUT INDEX...
//	vlc serve [flags] [NAME=]INDEX...
//	vlc bench [flags], vlc test-cuda [flags], vlc test-webgpu [flags]
//	vlc help [COMMAND], vlc version
//
// vlc COMMAND -h prints the command's usage line, what its arguments are,
// and its flags. Flags may come before or after the positional arguments.
// Output for programs (search hits, ids add gave, get's payload, info,
// -json) and help that was asked for go to stdout; output for people
// (progress, summaries, warnings) to stderr. Any error is one line on
// stderr: exit status 2 when the command line does not parse (unknown
// command or flag, a flag value of the wrong kind, a wrong number of
// arguments), else 1, as for output that could not be written (stdout
// on a full disk).
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
	"time"

	"github.com/vlc-embed/vlc/internal/enctrace"
	"github.com/vlc-embed/vlc/internal/fault"
	"github.com/vlc-embed/vlc/vecfile"
)

// command is one subcommand: its usage line and description, printed by
// vlc COMMAND -h and (the summary) by vlc help, and what runs it.
type command struct {
	args    string // what follows "vlc NAME" in the usage line
	summary string // one line for vlc help
	detail  string // more lines for vlc NAME -h: the arguments, the output
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled in init: the commands' functions read it (parse
// prints their usage lines), which a plain initializer would make a cycle.
var commands map[string]command

func init() {
	commands = map[string]command{
		"compress": {"[flags] INPUT", "compress a vector file into an index",
			"INPUT: the vectors, .f16 (raw float16: give -dim), .npy or .fvecs; the index goes to -o (default INPUT with the extension .vlc)", runCompress},
		"search": {"[flags] -query FILE INDEX", "search an index with a file of queries",
			"FILE: the queries (.f16, .npy or .fvecs); INDEX: an index file or store.\n" +
				"Prints on stdout one line per hit: QUERY RANK ID DISTANCE [PAYLOAD], tab-separated, QUERY from 0, RANK from 1.\n" +
				"An id holding a control character (tab, newline, ...), a character that does not print, bytes that are\n" +
				"not UTF-8, a double quote or a backslash is printed quoted, as Go's strconv.Quote writes it (a field that\n" +
				"starts with a double quote is quoted); a payload is printed as one line of JSON (quoted too if it is not JSON).\n" +
				"-json prints JSON Lines instead: one object per query, {\"query\": 0, \"hits\": [{\"id\": \"7\", \"distance\": 0.5}, ...]}.", runSearch},
		"eval": {"[flags] -query FILE (-gt FILE | -base FILE) INDEX...", "measure recall and speed against ground truth",
			"INDEX...: one index, or several with -sweep. A store (with added or deleted vectors) is searched as it is, its ids\n" +
				"read as the rows of -base or the ground truth (as vlc add without -ids numbers them): -base gives the exact\n" +
				"neighbours among the live rows, -gt has the rows the store does not hold dropped", runEval},
		"graph": {"[flags] (-base FILE | -at N) INDEX", "build a graph over an index's rows into its file, for search at high recall",
			"FILE: the vectors INDEX was built from, row for row; INDEX: an index file of the rotated code and metric l2.\n" +
				"The index is rewritten with the graph (section GRPH, format version 3) atomically; vlc search and vlc eval\n" +
				"then walk the graph (-ef). On a store: the graph of one segment (-segment), -base read by id (row i: id i;\n" +
				"rows not from it placed by their decoded vectors), committed as a new segment file; a merge, compaction or\n" +
				"retraining writes segments without one, searched by their lists. -at N instead sets the store's policy:\n" +
				"every segment of at least N live rows gets a graph, built from its rows' decoded vectors now and, after\n" +
				"writes, merges and training, by the store's background work (vlc add runs it); -at 0 turns that off.\n" +
				"With -backend cuda or webgpu (an index file) the candidate neighbours come from the index's search on the\n" +
				"GPU, every row a query of one batched search; cuda also measures them, prunes and runs the refinement's\n" +
				"searches there (-prune-on cpu keeps those on the CPU), the same graph bytes. It prints each\n" +
				"stage's seconds", runGraph},
		"info":   {"[flags] INDEX", "describe an index", "", runInfo},
		"verify": {"INDEX", "check every checksum of an index", "", runVerify},
		"create": {"[flags] PATH", "make an empty collection (a store) that vlc add fills",
			"PATH: where the store goes; it must not exist. It holds its vectors exactly (every search scans them all)\n" +
				"until it has -train-at of them, then trains its anchors, at the end of the write that reached them;\n" +
				"-graph-at N gives every trained segment of at least N live rows a graph, built in the background", runCreate},
		"add": {"[flags] INDEX VECTORS", "add vectors (with ids and payloads) to an index",
			"VECTORS: a vector file of the index's dimension. Prints the ids given to the new vectors on stdout, one a line, in order.\n" +
				"After the write (the ids printed), the store's due work runs before vlc exits: small segments merged, training\n" +
				"once the store is large enough or has outgrown its anchors; -maintain=false leaves it to the next write", runAdd},
		"upsert": {"[flags] INDEX VECTORS", "add vectors, replacing those of ids the index holds",
			"as vlc add, but an id the index holds live has its vector and payload replaced (atomically) where add refuses it", runUpsert},
		"delete": {"[flags] INDEX [ID...]", "delete vectors from an index by id",
			"the ids as arguments, or one a line in -ids FILE, or both; then the store's due work runs, as after vlc add", runDelete},
		"get": {"[flags] INDEX ID", "print the payload of an id",
			"prints ID, a tab and the payload (with -vector, a tab and the vector); an id is quoted as vlc search quotes it", runGet},
		"set-payload": {"INDEX ID PAYLOAD", "replace the payload of an id, keeping its vector",
			"PAYLOAD: one JSON value", runSetPayload},
		"count": {"[flags] INDEX", "print the number of live vectors (that a filter allows)", "", runCount},
		"list": {"[flags] INDEX", "print live ids and payloads in id order, a page at a time",
			"prints one line a record: ID, a tab and the payload (with -vectors, a tab and the vector), ids in byte order.\n" +
				"When more records follow, stderr says so and gives the -after that starts the next page", runList},
		"snapshot": {"INDEX OUT", "copy the current version of a store to a new path", "OUT: a new path; the copy shares the segment files by hard links where it can", runSnapshot},
		"drop":     {"INDEX", "remove a store (or index file) and its segment folder", "", runDrop},
		"compact":  {"INDEX", "rewrite an index without its deleted vectors", "", runCompact},
		"retrain":  {"[flags] INDEX", "train an index anew on its own vectors, in place", "", runRetrain},
		"merge":    {"[flags] -o OUT INDEX...", "join indexes encoded under one model (compress -anchors-from) into one", "", runMerge},
		"model": {"[flags] -o MODEL INDEX", "write an index's model (anchors, code, list parameters) to a small file for compress -anchors-from",
			"INDEX: an index file, a store (its first segment's model) or a model file", runModel},

		"serve": {"[flags] [NAME=]INDEX...", "serve indexes over HTTP: search, get, add, delete, metrics",
			"NAME: the index's name in URLs (default: its file name without the extension).\n" +
				"Prints \"vlc serve: listening on http://HOST:PORT (N indexes)\" on stdout once it listens", runServe},

		"bench":       {"[flags]", "time annealing iterations of a backend: ms per iteration, TFLOP/s", "", runBench},
		"test-cuda":   {"[flags]", "check the CUDA backend against the CPU and time both", "", runTestCUDA},
		"test-webgpu": {"[flags]", "check the WebGPU backend against the CPU and time both", "", runTestWebGPU},
		"version":     {"", "print the version, the VCS revision and the backends built in", "", runVersion},
	}
}

// processStart is when the process began, for traces of where a
// command's time goes (VLC_ENCODE_TRACE).
var processStart = time.Now()

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
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	// What follows, the kernel's tearing down of the process's memory,
	// is timed from this line by whoever waits for the process.
	enctrace.Printf("process trace: exiting %v after the start, at %d ns (Unix time)\n", time.Since(processStart).Round(time.Millisecond), time.Now().UnixNano())
	os.Exit(code)
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
	case len(args) == 0: // no command: the list on stderr
		usage(stderr)
		return 2
	case isHelp(args[0]) && (len(args) == 1 || isHelp(args[1])):
		usage(stdout)
		return 0
	case args[0] == "help" && len(args) > 2:
		fmt.Fprintf(stderr, "vlc help: one command at a time, got %s\n", strings.Join(args[1:], " "))
		return 2
	case args[0] == "help":
		// vlc help COMMAND is vlc COMMAND -h.
		args = []string{args[1], "-h"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "vlc: unknown command %q (try: %s)\n", args[0], strings.Join(names(), ", "))
		return 2
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
		if errors.As(err, new(usageError)) {
			return 2
		}
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
	fmt.Fprintln(w, "usage: vlc COMMAND [flags] ARGS   (vlc help COMMAND, or vlc COMMAND -h, for its arguments and flags)")
	for _, n := range names() {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n", "help", "list the commands, or with a COMMAND print its usage and flags")
}

func names() []string {
	var out []string
	for n := range commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// usageError is a command line that does not parse: an unknown flag, a
// flag value of the wrong kind, a wrong number of arguments. vlc exits 2
// for it, 1 for every other error.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageLine is "vlc NAME ARGS", as the command's -h starts.
func usageLine(name string) string {
	return strings.TrimSpace("vlc " + name + " " + commands[name].args)
}

// commandHelp prints what vlc NAME -h prints: the usage line, the
// summary, the details, then the flags.
func commandHelp(w io.Writer, fs *flag.FlagSet) {
	c := commands[fs.Name()]
	fmt.Fprintf(w, "usage: %s\n%s\n", usageLine(fs.Name()), c.summary)
	if c.detail != "" {
		fmt.Fprintln(w, c.detail)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "flags (-name value or -name=value, before or after the arguments):")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// parse parses flags that may stand before, between or after positional
// arguments (the standard flag package stops at the first positional one),
// and checks the positional arguments against their names. A last name
// ending in "..." (as "INDEX...") takes one or more arguments. -h prints
// the command's help on help (stdout: help asked for is output). Errors
// are usageErrors that end with the usage line.
func parse(fs *flag.FlagSet, args []string, names []string, help io.Writer) ([]string, error) {
	// Errors come back as one line; the flag list is printed only for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("%s (usage: %s; see vlc %s -h)", fmt.Sprintf(format, a...), usageLine(fs.Name()), fs.Name())}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandHelp(help, fs)
				return nil, err
			}
			return nil, bad("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	variadic := len(names) > 0 && strings.HasSuffix(strings.TrimSuffix(names[len(names)-1], "]"), "...")
	if len(names) > 0 && strings.HasPrefix(names[len(names)-1], "[") && len(pos) == len(names)-1 {
		return pos, nil // the last, "[NAME...]", is optional
	}
	if len(pos) < len(names) {
		missing := slices.Clone(names[len(pos):])
		missing[len(missing)-1] = strings.TrimSuffix(missing[len(missing)-1], "...")
		return nil, bad("missing %s argument", strings.Join(missing, ", "))
	}
	if len(pos) > 0 && len(names) == 0 {
		return nil, bad("takes no arguments, got %d: %s", len(pos), strings.Join(pos, " "))
	}
	if len(pos) > len(names) && !variadic {
		return nil, bad("want %d argument(s) (%s), got %d: %s", len(names), strings.Join(names, ", "), len(pos), strings.Join(pos, " "))
	}
	return pos, nil
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
