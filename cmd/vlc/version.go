package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/vlc-embed/vlc/device"
)

// runVersion prints the module version (v1.2.3 for `go install ...@v1.2.3`,
// "(devel)" for a build in a checkout), the VCS revision the build info
// records, the Go version and platform, and the backends built in.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if _, err := parse(fs, args, nil, stdout); err != nil {
		return err
	}
	_, err := fmt.Fprintln(stdout, versionLine())
	return err
}

func versionLine() string {
	version, revision := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if rev != "" {
			revision = fmt.Sprintf(" (revision %.12s%s)", rev, modified)
		}
	}
	return fmt.Sprintf("vlc %s%s, %s %s/%s, backends: %s", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.Join(device.Backends(), ", "))
}
