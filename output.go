package vlc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/vlc-embed/vlc/index/format"
)

// claimOutput readies output for a new index file written over whatever
// is there. A store there (a manifest: an index that took writes, holding
// vectors no input has) is refused unless replace, with an error wrapping
// fs.ErrExist. When output exists, its store lock is taken (waiting as a
// write does) and held until release, so that no writer commits to it
// meanwhile; release(true), after the new file took the path, removes
// the replaced store's segment files (those vlc wrote), and the lock file
// once no store is there.
func claimOutput(ctx context.Context, output string, replace bool) (release func(written bool), err error) {
	if _, err := os.Lstat(output); errors.Is(err, fs.ErrNotExist) {
		return func(bool) {}, nil
	}
	l, err := lockStore(ctx, output)
	if err != nil {
		return nil, err
	}
	if live, segs, ok := storeAt(output); ok && !replace {
		l.unlock()
		return nil, fmt.Errorf("output %s: %w: it is a store (%d live vectors in %d segments, vectors were added or deleted): it is replaced only when asked (-replace, Options.Replace)", output, fs.ErrExist, live, segs)
	}
	return func(written bool) {
		if written {
			removeObsolete(output, nil)
		}
		if _, _, ok := storeAt(output); ok {
			l.unlock()
		} else {
			l.remove() // an index file needs no lock file beside it
		}
	}, nil
}

// storeAt reports whether path holds a store manifest, with its live rows
// and segments.
func storeAt(path string) (live, segs int, ok bool) {
	f, err := format.Open(path, format.OpenOptions{})
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	if !isManifest(f) {
		return 0, 0, false
	}
	m, _, _, err := readManifest(f, path)
	if err != nil {
		return 0, 0, true // a damaged store is still one: not replaced unasked
	}
	for _, s := range m.Segments {
		live += s.Rows - s.Deleted
	}
	return live, len(m.Segments), true
}
