package store

import (
	"context"
	"time"
)

// SetLockWait sets how long a write waits for another writer's lock; the
// returned function undoes it.
func SetLockWait(d time.Duration) (undo func()) {
	old := lockWait
	lockWait = d
	return func() { lockWait = old }
}

// HoldLock takes the write lock of the store at path, as a writer in
// another process would, until release.
func HoldLock(path string) (release func(), err error) {
	l, err := lockStore(context.Background(), path)
	if err != nil {
		return nil, err
	}
	return l.unlock, nil
}

// SetRefreshLoaded sets a function a Refresh calls between reading a
// version and installing it; the returned function undoes it.
func SetRefreshLoaded(f func()) (undo func()) {
	refreshLoaded = f
	return func() { refreshLoaded = nil }
}

// SetGraphWalked sets a function a search calls with each segment whose
// graph it walked; the returned function undoes it.
func SetGraphWalked(f func(segment int)) (undo func()) {
	graphWalked = f
	return func() { graphWalked = nil }
}

// SetJobHook sets a function background jobs call with their kind and
// stage ("computed": a graph built, not yet written; "written": the
// output in its pending file, not yet committed); the returned function
// undoes it.
func SetJobHook(f func(kind, stage string)) (undo func()) {
	jobHook = f
	return func() { jobHook = nil }
}
