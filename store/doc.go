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
// segment's file holds a graph (vlc graph, BuildGraph), it walks that
// graph instead and scans the others' lists (graph.go, SearchOptions.Ef). The build
// itself is package pipeline's; docs/FORMAT.md ("Stores") has the files.
package store
