// Package store keeps an index as a living store: the index file Compress
// or Build wrote, and the vectors added and deleted since, as segment files
// named by a manifest. A reader holds a version (a snapshot of the manifest
// and its segments) for as long as it searches; a write takes the store's
// lock, applies its change to the newest version and commits a new
// manifest, so that every write is seen whole or not at all, by this
// process and by others. Segment files are never named twice.
//
// Search scans the segments as one index (index.Group), with filters over
// ids and payloads and re-ranking from the original vectors; where a
// segment's file holds a graph, it walks that graph instead and scans the
// others' lists (graph.go, SearchOptions.Ef). A segment gets a graph from
// BuildGraph (vlc graph -base: from the original vectors, at once, under
// the lock) or, where Policy.GraphAt asks for graphs, from the background
// work: every segment of at least GraphAt live rows without one, after
// the merges and training due, built from the rows' decoded vectors
// outside the lock and committed only while the segment's file is still
// the one it was built over (graphjob.go). A write that rewrites rows (a
// merge, Compact, Retrain) writes segments without a graph; until the
// background work gives them one, they are searched by their lists.
// Background work (merges, training, graphs) is maintain.go's. The build
// itself is package pipeline's; docs/FORMAT.md ("Stores") has the files.
package store
