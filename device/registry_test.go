package device_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	_ "github.com/vlc-embed/vlc/backend/cpu" // registers "cpu"
	"github.com/vlc-embed/vlc/device"
)

func TestParseDevices(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []int
		err  bool
	}{
		{"all", nil, false},
		{"0", []int{0}, false},
		{"0,1,3", []int{0, 1, 3}, false},
		{" 0, 0", []int{0, 0}, false},
		{"", nil, true},
		{"x", nil, true},
		{"-1", nil, true},
		{"0,,1", nil, true},
		{"all,0", nil, true},
	} {
		got, err := device.ParseDevices(c.spec)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v", c.spec, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "want all, or device numbers separated by commas") {
			t.Errorf("%q: %v", c.spec, err)
		}
	}
}

// The CPU opens as many simulated devices as the list names 0; any other
// number is refused by name; one device is the plain backend.
func TestOpenDevices(t *testing.T) {
	dev, _, err := device.OpenDevices("cpu", "0,0,0")
	if err != nil {
		t.Fatal(err)
	}
	md, ok := dev.(*device.MultiDevice)
	if !ok || len(md.Devices()) != 3 || !strings.HasPrefix(dev.Name(), "3 x cpu (") {
		t.Errorf("0,0,0: %T %q", dev, dev.Name())
	}
	dev.Close()
	for _, spec := range []string{"", "0", "all"} {
		dev, _, err := device.OpenDevices("cpu", spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, multi := dev.(*device.MultiDevice); multi || !strings.HasPrefix(dev.Name(), "cpu (") {
			t.Errorf("%q: %T %q", spec, dev, dev.Name())
		}
	}
	_, _, err = device.OpenDevices("cpu", "0,1")
	if err == nil || !strings.Contains(err.Error(), "cpu: no CPU device 1: the CPU is device 0") {
		t.Errorf("0,1: %v", err)
	}
	_, _, err = device.OpenDevices("cpu", "0;1")
	if err == nil || !strings.Contains(err.Error(), `devices "0;1"`) {
		t.Errorf("0;1: %v", err)
	}
	_, _, err = device.OpenDevices("nosuch", "0")
	if err == nil || !strings.Contains(err.Error(), "not built into this binary") {
		t.Errorf("nosuch: %v", err)
	}
}

// limited is a Device with a memory cap, for MultiDevice's.
type limited struct {
	device.Device
	limit, peak int64
}

func (l *limited) SetMemoryLimit(b int64) error { l.limit = b; return nil }
func (l *limited) PeakMemory() int64            { return l.peak }
func (l *limited) FreeMemory() (int64, bool)    { return l.limit - l.peak, true }

// A Multi device caps each of its devices that can be capped, reports
// the largest peak and the sum of what each device has free.
func TestMultiMemoryLimit(t *testing.T) {
	a, b := &limited{peak: 5}, &limited{peak: 9}
	var md device.MemoryLimiter = device.Multi(a, b, a)
	if err := md.SetMemoryLimit(1 << 20); err != nil || a.limit != 1<<20 || b.limit != 1<<20 {
		t.Fatalf("%v: limits %d, %d", err, a.limit, b.limit)
	}
	if p := md.PeakMemory(); p != 9 {
		t.Errorf("peak %d, want 9", p)
	}
	if f, ok := md.FreeMemory(); !ok || f != 2<<20-14 {
		t.Errorf("free %d, %v; want %d (each distinct device once)", f, ok, 2<<20-14)
	}
}

func TestOpen(t *testing.T) {
	dev, _, err := device.Open("cpu")
	if err != nil || dev == nil {
		t.Fatalf("cpu: %v", err)
	}
	if _, _, err := device.Open("no-such"); !errors.Is(err, device.ErrNoBackend) {
		t.Errorf("unknown backend: got %v, want ErrNoBackend", err)
	}
	dev, _, err = device.Open("auto")
	if err != nil || dev == nil {
		t.Fatalf("auto: %v", err)
	}
}
