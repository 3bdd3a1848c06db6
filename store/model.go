package store

import (
	"errors"

	"fmt"
	"github.com/vlc-embed/vlc/index"
	"os"

	"github.com/vlc-embed/vlc/pipeline"
)

// ReadModel reads the model at path, a model file (index.WriteModel), an
// index file or a store (its first segment's, which every segment
// shares), refusing options that contradict it: what Options.AnchorsFrom
// names.
func ReadModel(path string, opt pipeline.Options) (*pipeline.Model, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("-anchors-from: %w", err)
	}
	m, err := index.ReadModel(path)
	if errors.Is(err, index.ErrNotIndex) {
		if _, _, isStore := storeAt(path); isStore {
			m, err = storeModel(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return pipeline.CheckModel(m, path, opt)
}

// storeModel is the model of the store at path: its first segment's.
func storeModel(path string) (*index.Model, error) {
	ix, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	snap, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	return index.ModelOf(snap.segs[0].ix)
}
