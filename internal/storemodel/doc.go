// Package storemodel holds the model-checked test of the store (package
// vlc's Add, Delete, Compact, Retrain, Refresh, Get, Search and Merge):
// seeded random operations from several processes at once (library
// handles in worker processes that keep their version between
// operations, the vlc command line, vlc serve) and concurrent readers,
// processes killed with SIGKILL at random moments, and every answer
// checked against an in-memory model of what was acknowledged. The
// package has no code of its own; `go test ./internal/storemodel` runs a
// short session, `make soak` a long one (docs/RELIABILITY.md).
package storemodel
