package store

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/vlc-embed/vlc/index/format"
)

// Claim readies output for a new index file written over whatever
// is there. It takes the path's store lock (waiting as a write does) and
// holds it until release, so that no writer makes a store there or
// commits to one meanwhile; then a store at output (a manifest: an index
// that took writes, holding vectors no input has) is refused unless
// replace, with an error wrapping fs.ErrExist. release(true), after the
// new file took the path, removes the replaced store's segment files
// (those vlc wrote); release removes the lock file once no store is
// there, an index file needing none.
func Claim(ctx context.Context, output string, replace bool) (release func(written bool), err error) {
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
