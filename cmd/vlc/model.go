package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/format"
)

// runModel writes the model of an index, a store or a model file.
func runModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	out := fs.String("o", "", "model `file` to write (required; written atomically; an index or store there is refused)")
	quiet := fs.Bool("quiet", false, "no summary")
	pos, err := parse(fs, args, []string{"INDEX"}, stdout)
	if err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-o: the model's file is required")
	}
	in := pos[0]
	m, err := readModel(in)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := refuseIndexAt(*out); err != nil {
		return err
	}
	if err := index.WriteModel(*out, m); err != nil {
		return err
	}
	if *quiet {
		return nil
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	spec := m.Meta.CodeSpec()
	fmt.Fprintf(stderr, "model of %s -> %s: %d anchors of dimension %d, %s, metric %s, seed %d; %d bytes\n",
		in, *out, m.Lists(), m.Dim(), spec, m.Meta.Metric, m.Meta.Seed, st.Size())
	return nil
}

// readModel reads the model at path: a model file, an index file, or a
// store (its first segment's model, which every segment shares).
func readModel(path string) (*index.Model, error) {
	m, err := index.ReadModel(path)
	if !errors.Is(err, index.ErrNotIndex) {
		return m, err
	}
	// A store: its first segment, unless a compaction removes that
	// segment between the two reads (then the store is read again).
	for range 5 {
		ix, oerr := vlc.Open(path)
		if oerr != nil {
			return nil, err // ReadModel's refusal says what the file is
		}
		info, ierr := ix.Info()
		ix.Close()
		if ierr != nil {
			return nil, ierr
		}
		m, serr := index.ReadModel(info.Segments[0].File)
		if !errors.Is(serr, os.ErrNotExist) {
			return m, serr
		}
	}
	return nil, fmt.Errorf("%s: the store kept changing while it was read", path)
}

// refuseIndexAt refuses an output path that holds an index or a store:
// a model written over it would lose its vectors.
func refuseIndexAt(path string) error {
	f, err := format.Open(path, format.OpenOptions{})
	if err != nil {
		return nil // nothing of vlc's there (WriteModel refuses what it cannot replace)
	}
	defer f.Close()
	for _, k := range []string{"META", "STOR"} {
		if _, ok := f.Section(format.KindOf(k)); ok {
			return fmt.Errorf("output %s is an index or a store: vlc model writes a model file; remove it or write elsewhere", path)
		}
	}
	return nil
}
