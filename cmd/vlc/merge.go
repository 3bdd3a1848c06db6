package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/vlc-embed/vlc"
)

func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	out := fs.String("o", "", "merged index `file` (required; written atomically)")
	quiet := fs.Bool("quiet", false, "no summary")
	pos, err := parse(fs, args, []string{"INDEX..."}, stdout)
	if err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-o: the merged index's file is required")
	}
	sum, err := vlc.Merge(ctx, *out, pos)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "merged %d indexes -> %s: %d vectors, %d bytes\n", sum.Inputs, *out, sum.Rows, sum.Bytes)
	}
	return nil
}
