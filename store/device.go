package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
)

// Search on a device: a Store opened with OpenOptions.Device holds a copy
// of each segment in the device's memory (index.Index.OnDevice) and
// searches the segments there, each with its deletions (and a filter's
// allowed rows) as a mask; a segment the device cannot search stays on
// the CPU. The search is the CPU's (index.Group), the device only a way
// to search a segment: the same hits up to float rounding and ties.
// Segments are uploaded when a version is installed (Open, a write, a
// background merge, Refresh) and their copies freed with the segment,
// once no version in use holds it.

// SearchDevice is a backend opened by name to search stores on.
type SearchDevice struct {
	// Searcher is nil when searches run on the CPU (backend cpu, or auto
	// with no GPU backend that searches).
	Searcher device.Searcher
	// Name is the backend that runs ("cpu" for the CPU).
	Name string
	// Note says why auto searches on the CPU ("" otherwise).
	Note string
	dev  device.Device
}

// OpenSearchDevice opens backend ("cpu", "" for it, "cuda", "webgpu" or
// "auto": the first registered backend that starts) on devices (a
// device.ParseDevices spec, "" for one device) for searching stores. A
// named backend that cannot search is an error wrapping
// device.ErrNoSearch; auto then searches on the CPU and says why in Note.
// Several devices hold each store as spread says (device.Spread).
func OpenSearchDevice(backend, devices string, spread device.Spread) (*SearchDevice, error) {
	if backend == "" || backend == "cpu" {
		if devices != "" {
			return nil, fmt.Errorf("%w: devices %q given for the cpu backend", index.ErrArgument, devices)
		}
		return &SearchDevice{Name: "cpu"}, nil
	}
	dev, skipped, err := device.OpenDevices(backend, devices)
	if err != nil {
		if backend == "auto" && errors.Is(err, device.ErrNoBackend) {
			return &SearchDevice{Name: "cpu", Note: err.Error()}, nil
		}
		return nil, err
	}
	s, ok := device.SearcherOf(dev, spread)
	if !ok {
		dev.Close()
		if backend == "auto" {
			why := "the first backend that started, " + dev.Name() + ", has no device search"
			if len(skipped) > 0 {
				why += "; " + strings.Join(skipped, "; ")
			}
			return &SearchDevice{Name: "cpu", Note: why}, nil
		}
		return nil, fmt.Errorf("%w: the backend %s (devices %q) has no device search", device.ErrNoSearch, backend, devices)
	}
	return &SearchDevice{Searcher: s, Name: dev.Name(), dev: dev}, nil
}

// Close closes the device; close the stores searching on it first.
func (d *SearchDevice) Close() error {
	if d.dev == nil {
		return nil
	}
	err := d.dev.Close()
	d.dev = nil
	return err
}

// DeviceInfo is how the current version of a store sits on its device.
type DeviceInfo struct {
	Segments int   // segments of the version (those with rows)
	OnDevice int   // of them, searched on the device
	Bytes    int64 // device memory their copies hold
	// CPU says why a segment is searched on the CPU (the first such
	// segment's reason), "" when none is.
	CPU string
}

// DeviceInfo describes the current version's segments on the device
// (zero when the store was opened without one).
func (ix *Store) DeviceInfo() (DeviceInfo, error) {
	snap, err := ix.acquire()
	if err != nil {
		return DeviceInfo{}, err
	}
	defer snap.release()
	var in DeviceInfo
	if ix.dev == nil {
		return in, nil
	}
	for _, s := range snap.segs {
		if s.ix.Len() == 0 {
			continue
		}
		in.Segments++
		switch {
		case s.dev != nil:
			in.OnDevice++
			in.Bytes += s.dev.DeviceBytes()
		case in.CPU == "" && s.devErr != nil:
			in.CPU = s.devErr.Error()
		}
	}
	return in, nil
}

// onDevice uploads the segments of snap that have no device copy yet and
// makes snap's group search each copy; a segment whose upload fails stays
// on the CPU (logged, and in DeviceInfo). Called before snap is
// installed, while no search sees it.
func (ix *Store) onDevice(snap *snapshot) {
	if ix.dev == nil {
		return
	}
	devs := make([]*index.DeviceIndex, len(snap.segs))
	for i, s := range snap.segs {
		devs[i] = s.upload(ix.dev, ix)
	}
	g, err := snap.group.WithDevices(devs)
	if err != nil { // a bug: each copy is its segment's
		panic(err)
	}
	snap.group = g
}

// upload makes s's device copy on dev, once; an empty segment has none.
func (s *segment) upload(dev device.Searcher, ix *Store) *index.DeviceIndex {
	s.devOnce.Do(func() {
		if s.ix.Len() == 0 {
			return
		}
		s.dev, s.devErr = s.ix.OnDevice(dev)
		if s.devErr != nil && ix.bg.logger != nil {
			ix.bg.logger.Warn("segment searched on the CPU", "segment", s.file, "reason", s.devErr)
		}
	})
	return s.dev
}
