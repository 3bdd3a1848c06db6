//go:build webgpu

package webgpu

import (
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/internal/synth"
)

// Open, use and Close several times in one process (compress and tests
// do): each round works, a closed handle refuses Load, and a Dataset
// outlives the handle it came from.
func TestReopen(t *testing.T) {
	gpuDevice(t)
	pts := synth.Clusters(300, 16, 3, 1)
	for i := range 3 {
		d, err := open(true)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := d.Load(pts)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Load(pts); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Load after Close: %v", err)
		}
		if err := ds.SetAnchors(synth.AnchorsNear(pts, 5, 0.1, 1), 5); err != nil {
			t.Fatal(err)
		}
		if st, err := ds.Assign(); err != nil || st.Changed != 300 {
			t.Fatalf("round %d: %+v, %v", i, st, err)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The registered Open refuses a software adapter unless asked for it.
func TestOpenSoftware(t *testing.T) {
	d := gpuDevice(t)
	t.Setenv("VLC_WEBGPU_SOFTWARE", "")
	t.Setenv("VLC_WEBGPU_ADAPTER", "")
	_, err := Open()
	if d.info.Type != "cpu" {
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "software renderer") || !strings.Contains(err.Error(), "VLC_WEBGPU_SOFTWARE=1") {
		t.Errorf("Open on %s: %v, want a refusal that says how to override it", d.Name(), err)
	}
	t.Setenv("VLC_WEBGPU_SOFTWARE", "1")
	if dev, err := Open(); err != nil {
		t.Errorf("with VLC_WEBGPU_SOFTWARE=1: %v", err)
	} else {
		dev.Close()
	}
}
