package device

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Search spread by queries (ReplicaSearch): every device holds the whole
// index, and a batch's queries are cut into one contiguous part a device,
// each searched whole on its device at once. Nothing is merged and
// nothing is repeated: each query's results are one device's, and every
// step of the search (the rotation, the anchor dots, the probe, the scan,
// the top-k) is divided between the devices, where a split of the lists
// (SplitSearch) divides only the scan and the top-k. It takes the index's
// memory on every device.

// Spread is how a search uses several devices.
type Spread int

const (
	// SpreadLists cuts the index's lists over the devices (SplitSearch):
	// each holds a share.
	SpreadLists Spread = iota
	// SpreadQueries puts the whole index on every device and cuts each
	// batch's queries over them (ReplicaSearch).
	SpreadQueries
)

// ParseSpread reads "lists" or "queries".
func ParseSpread(s string) (Spread, error) {
	switch s {
	case "lists", "":
		return SpreadLists, nil
	case "queries":
		return SpreadQueries, nil
	}
	return 0, fmt.Errorf("%w: spread %q: want lists (each device a share of the lists) or queries (each device the whole index, a share of each batch)", ErrArgument, s)
}

func (s Spread) String() string {
	if s == SpreadQueries {
		return "queries"
	}
	return "lists"
}

// ReplicaSearch returns a Searcher that uploads each index to every one
// of devs and searches a batch's queries spread over them. Its Residents
// are MaskedResidents when every device's is. Closing its Resident closes
// the copies; the devices stay open.
func ReplicaSearch(devs ...Searcher) Searcher {
	return replicaSearcher(append([]Searcher(nil), devs...))
}

type replicaSearcher []Searcher

// replicaResident is an index on every device of a ReplicaSearch.
type replicaResident struct {
	dim    int
	names  []string
	res    []Resident
	closed bool
}

// maskedReplicaResident is a replicaResident whose every copy can search
// with a mask.
type maskedReplicaResident struct{ *replicaResident }

var (
	_ MaskedResident = maskedReplicaResident{}
	_ HostBuffers    = (*replicaResident)(nil)
	_ LanedResident  = (*replicaResident)(nil)
)

// UploadIndex uploads d to every device at once.
func (devs replicaSearcher) UploadIndex(d *IndexData) (Resident, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: device: a replicated search over no devices", ErrArgument)
	}
	r := &replicaResident{dim: d.Dim, names: make([]string, len(devs)), res: make([]Resident, len(devs))}
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, dev := range devs {
		r.names[i] = deviceName(i, dev)
		wg.Go(func() {
			res, err := dev.UploadIndex(d)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", r.names[i], err)
				return
			}
			r.res[i] = res
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		r.Close()
		return nil, err
	}
	for _, res := range r.res {
		if _, ok := res.(MaskedResident); !ok {
			return r, nil
		}
	}
	return maskedReplicaResident{r}, nil
}

// Bytes is the memory every copy holds, together.
func (r *replicaResident) Bytes() int64 {
	var b int64
	for _, res := range r.res {
		if res != nil && !r.closed {
			b += res.Bytes()
		}
	}
	return b
}

// Close closes every copy.
func (r *replicaResident) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for i, res := range r.res {
		if res != nil {
			if err := res.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.names[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// HostBuffer lends the first device's host memory for queries when it
// lends any: that device copies its part up without a staging pass.
func (r *replicaResident) HostBuffer(n int) ([]float32, func(), error) {
	if hb, ok := r.res[0].(HostBuffers); ok && !r.closed {
		return hb.HostBuffer(n)
	}
	return make([]float32, n), func() {}, nil
}

func (r *replicaResident) Search(ctx context.Context, queries []float32, nq, nprobe, keep int, entries []int32, dists []float32) error {
	return r.each(ctx, queries, nq, keep, entries, dists, func(ctx context.Context, res Resident, q []float32, n int, e []int32, d []float32) error {
		return res.Search(ctx, q, n, nprobe, keep, e, d)
	})
}

func (r maskedReplicaResident) SearchMasked(ctx context.Context, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	return r.each(ctx, queries, nq, keep, entries, dists, func(ctx context.Context, res Resident, q []float32, n int, e []int32, d []float32) error {
		return res.(MaskedResident).SearchMasked(ctx, q, n, nprobe, keep, allow, e, d)
	})
}

// Lanes is the copies: one a device, each of which takes a call at once.
func (r *replicaResident) Lanes() int { return len(r.res) }

// SearchLane searches the nq queries on lane's copy alone (LanedResident).
func (r *replicaResident) SearchLane(ctx context.Context, lane int, queries []float32, nq, nprobe, keep int, allow []uint64, entries []int32, dists []float32) error {
	if r.closed {
		return ErrClosed
	}
	if lane < 0 || lane >= len(r.res) {
		return fmt.Errorf("%w: lane %d of a replicated search over %d devices", ErrArgument, lane, len(r.res))
	}
	var err error
	if allow == nil {
		err = r.res[lane].Search(ctx, queries, nq, nprobe, keep, entries, dists)
	} else if mr, ok := r.res[lane].(MaskedResident); ok {
		err = mr.SearchMasked(ctx, queries, nq, nprobe, keep, allow, entries, dists)
	} else {
		return fmt.Errorf("%w: %s searches without a mask", ErrArgument, r.names[lane])
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.names[lane], err)
	}
	return nil
}

// each cuts the nq queries into one contiguous part a device (fewer parts
// than devices when the queries are fewer) and runs search on every part
// at once, each on its device; the first error cancels the others.
func (r *replicaResident) each(ctx context.Context, queries []float32, nq, keep int, entries []int32, dists []float32,
	search func(context.Context, Resident, []float32, int, []int32, []float32) error) error {
	if r.closed {
		return ErrClosed
	}
	if nq < 0 || keep < 1 || len(queries) < nq*r.dim || len(entries) < nq*keep || len(dists) < nq*keep {
		return fmt.Errorf("%w: a replicated search of %d queries, keep %d", ErrArgument, nq, keep)
	}
	parts := min(len(r.res), nq)
	if parts <= 1 {
		return search(ctx, r.res[0], queries, nq, entries, dists)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := i*nq/parts, (i+1)*nq/parts
		wg.Go(func() {
			err := search(ctx, r.res[i], queries[lo*r.dim:hi*r.dim], hi-lo, entries[lo*keep:hi*keep], dists[lo*keep:hi*keep])
			if err != nil {
				cancel(fmt.Errorf("%s: %w", r.names[i], err))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
