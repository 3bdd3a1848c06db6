package store

import (
	"context"
	"fmt"
	"time"
)

// lockWait is how long a write waits for another process's write to end
// before it gives up with ErrLocked.
var lockWait = 10 * time.Second

// lockName is the lock file of the store at path.
func lockName(path string) string { return sidePath(path, ".lock") }

// waitLock calls try until it takes the lock or fails, sleeping between
// tries (1 ms, doubling to 50 ms), for at most lockWait or until ctx is
// done: then an error wrapping ErrLocked (and ctx's error).
func waitLock(ctx context.Context, try func() (bool, error)) error {
	deadline := time.Now().Add(lockWait)
	sleep := time.Millisecond
	for {
		ok, err := try()
		if ok || err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrLocked, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: another writer held it for %v", ErrLocked, lockWait)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 50*time.Millisecond)
	}
}
