package store

import (
	"fmt"
	"os"

	"github.com/vlc-embed/vlc/pipeline"
)

// ReadModel reads the model of the index file or store at path (a
// store's segments share its first's), refusing options that contradict
// it: what Options.AnchorsFrom names.
func ReadModel(path string, opt pipeline.Options) (*pipeline.Model, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("-anchors-from: %w", err)
	}
	ix, err := Open(path)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	defer ix.Close()
	snap, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	return pipeline.ModelOf(snap.segs[0].ix, path, opt)
}
