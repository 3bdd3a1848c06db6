package index

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// pipeTrace records when each chunk of a pipelined device batch (see
// partsOnDevice.pipeline) was prepared, searched and finished, and prints
// the timeline to standard error when the batch ends: with
// VLC_DEVICE_TRACE set, for measurements of where a batch's time goes
// (a device idle between its chunks, or waiting on the host at the ends).
// A nil *pipeTrace records nothing.
type pipeTrace struct {
	start time.Time
	mu    sync.Mutex
	at    [][traceSteps]time.Duration
	lanes []int
}

const (
	tracePrepare = iota
	tracePrepared
	traceSearch
	traceSearched
	traceFinish
	traceFinished
	traceSteps
)

var traceOn = sync.OnceValue(func() bool { return os.Getenv("VLC_DEVICE_TRACE") != "" })

func newPipeTrace(chunks int) *pipeTrace {
	if !traceOn() {
		return nil
	}
	return &pipeTrace{start: time.Now(), at: make([][traceSteps]time.Duration, chunks), lanes: make([]int, chunks)}
}

func (t *pipeTrace) mark(chunk, step int) {
	if t == nil || chunk < 0 || chunk >= len(t.at) {
		return
	}
	d := time.Since(t.start)
	t.mu.Lock()
	t.at[chunk][step] = d
	t.mu.Unlock()
}

func (t *pipeTrace) lane(chunk, lane int) {
	if t == nil || chunk < 0 || chunk >= len(t.lanes) {
		return
	}
	t.mu.Lock()
	t.lanes[chunk] = lane
	t.mu.Unlock()
}

// print writes one line: the batch's wall time, then each chunk's lane
// and its prepare, search and finish spans in milliseconds from the start.
func (t *pipeTrace) print() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()*1e3) }
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: %s ms;", ms(time.Since(t.start)))
	for i, a := range t.at {
		fmt.Fprintf(&b, " c%d lane %d prep %s-%s search %s-%s finish %s-%s;", i, t.lanes[i],
			ms(a[tracePrepare]), ms(a[tracePrepared]), ms(a[traceSearch]), ms(a[traceSearched]), ms(a[traceFinish]), ms(a[traceFinished]))
	}
	fmt.Fprintln(os.Stderr, b.String())
}
