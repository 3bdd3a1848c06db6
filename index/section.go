package index

import "github.com/vlc-embed/vlc/index/format"

// Section returns the data of the file's section of kind k as a view of
// the read-only mapping, for a structure kept in the file beside the
// lists that this package does not read (package graph's GRPH). The view
// must not be written to, nor used after Close; ok is false for a kind
// the file lacks, and once the index is closed.
func (ix *Index) Section(k format.Kind) (data []byte, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.file == nil {
		return nil, false
	}
	return ix.file.Section(k)
}

// Path is the path the index was opened from, for error messages.
func (ix *Index) Path() string { return ix.path }
