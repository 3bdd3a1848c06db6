package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandHelp: vlc NAME -h (and vlc help NAME) of every command
// exits 0 and prints on stdout, first, its usage line "usage: vlc NAME
// ARGS", then its summary; the line says [flags] exactly when the
// command has flags, and then the flags follow. vlc help lists every
// command with its summary.
func TestCommandHelp(t *testing.T) {
	list, _ := mustVLC(t, "help")
	for _, name := range names() {
		t.Run(name, func(t *testing.T) {
			code, out, errs := runVLC(t, name, "-h")
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			lines := strings.Split(out, "\n")
			if want := "usage: " + usageLine(name); lines[0] != want || !strings.HasPrefix(want, "usage: vlc "+name) {
				t.Errorf("first line %q, want %q", lines[0], want)
			}
			if len(lines) < 2 || lines[1] != commands[name].summary {
				t.Errorf("second line %q, want the summary %q", lines[1], commands[name].summary)
			}
			hasFlags := strings.Contains(out, "\nflags (")
			if strings.Contains(lines[0], " [flags]") != hasFlags {
				t.Errorf("usage line %q, flags listed: %v", lines[0], hasFlags)
			}
			if hasFlags && !strings.Contains(out, "\n  -") {
				t.Errorf("no flag listed:\n%s", out)
			}
			if help, _ := mustVLC(t, "help", name); help != out {
				t.Errorf("vlc help %s differs from vlc %s -h:\n%s", name, name, help)
			}
			if !strings.Contains(list, "\n  "+name+" ") || !strings.Contains(list, " "+commands[name].summary+"\n") {
				t.Errorf("vlc help does not list %s with its summary:\n%s", name, list)
			}
		})
	}
	// Without a command: the same list on stderr, and status 2.
	code, out, errs := runVLC(t)
	if code != 2 || out != "" || errs != list {
		t.Errorf("vlc without a command: exit %d, stdout %q, stderr %q; want 2, nothing, the list", code, out, errs)
	}
}

// checkUsageError runs a command line that does not parse: exit status
// 2, one line on stderr holding each of want, nothing on stdout.
func checkUsageError(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, out, errs := runVLC(t, args...)
	t.Logf("stderr: %s", strings.TrimSuffix(errs, "\n"))
	if code != 2 {
		t.Errorf("vlc %s: exit %d, want 2", strings.Join(args, " "), code)
	}
	if strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n") {
		t.Errorf("stderr is not one line: %q", errs)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
}

// TestUnknownFlag: an unknown flag, given to any command, exits 2 with
// one line naming the flag and the command's usage line.
func TestUnknownFlag(t *testing.T) {
	for _, name := range names() {
		t.Run(name, func(t *testing.T) {
			checkUsageError(t, []string{name, "x", "-frobnicate", "y"},
				"vlc "+name+": ", "flag provided but not defined: -frobnicate", "usage: "+usageLine(name))
		})
	}
}

// TestUsageErrors: the command lines that do not parse exit 2 naming the
// problem; an error of the work is exit 1 (checkFails).
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.f16")
	if err := os.WriteFile(ok, make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"bad flag value", []string{"compress", ok, "-dim", "four"}, []string{`invalid value "four" for flag -dim`, "usage: vlc compress [flags] INPUT"}},
		{"flag without its value", []string{"search", "x.vlc", "-query"}, []string{"flag needs an argument: -query"}},
		{"missing argument", []string{"compress", "-dim", "4"}, []string{"missing INPUT argument", "usage: vlc compress [flags] INPUT"}},
		{"missing arguments", []string{"add"}, []string{"missing INDEX, VECTORS argument", "usage: vlc add [flags] INDEX VECTORS"}},
		{"too many arguments", []string{"compress", ok, ok, "-dim", "4"}, []string{"want 1 argument(s) (INPUT), got 2", ok}},
		{"arguments to a command without any", []string{"version", "now"}, []string{"takes no arguments, got 1: now", "usage: vlc version"}},
		{"eval of two indexes without -sweep", []string{"eval", "a.vlc", "b.vlc", "-query", "q.fvecs", "-gt", "gt.ivecs"}, []string{"want 1 argument(s) (INDEX), got 2", "-sweep"}},
		{"eval without an index", []string{"eval", "-sweep", "-query", "q.fvecs", "-gt", "gt.ivecs"}, []string{"missing INDEX argument"}},
		{"unknown command", []string{"frobnicate", "x.f16"}, []string{`unknown command "frobnicate"`, "compress", "search"}},
		{"help of an unknown command", []string{"help", "frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"help of two commands", []string{"help", "compress", "search"}, []string{"one command at a time"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkUsageError(t, tc.args, tc.want...)
		})
	}
	// A refused value is an error of the work: exit 1.
	checkFails(t, []string{"compress", ok, "-dim", "4", "-bits", "3"}, []string{"-bits 3: must be 1, 2, 4 or 8"})
}
