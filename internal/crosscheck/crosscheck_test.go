package crosscheck

import (
	"context"
	"testing"

	"github.com/vlc-embed/vlc/backend/cpu"
	"github.com/vlc-embed/vlc/device"
)

// Identical backends agree: the CPU checked against itself, on all points
// (energies compared) and on a subsample (not compared).
func TestCheckAgainstItself(t *testing.T) {
	for _, cfg := range []Config{
		{N: 700, Dim: 20, Anchors: 16, Sub: 700, Steps: 4, RefSteps: 3, Seed: 2},
		{N: 900, Dim: 9, Anchors: 8, Sub: 300, Steps: 3, RefSteps: 2, Seed: 3},
	} {
		profiled := false
		cfg.Profile = func(_ device.Dataset, step func() error) error { profiled = true; return step() }
		r, err := Check(context.Background(), cpu.New(), cpu.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		a := r.Agreement
		if len(r.Failures) > 0 || a.Equal != cfg.Sub || a.N != cfg.Sub || !profiled {
			t.Errorf("%+v: failures %v, agreement %+v, profiled %v", cfg, r.Failures, a, profiled)
		}
		if len(r.DeviceMs) != cfg.Steps || r.StepUp != 0 || r.StepDown != 0 || r.Uploaded != 0 {
			t.Errorf("%+v: %d timed steps, %d/%d bytes a step, %d uploaded", cfg, len(r.DeviceMs), r.StepUp, r.StepDown, r.Uploaded)
		}
		wantRef := cfg.RefSteps
		if !r.Subsample() {
			wantRef = cfg.Steps // the same schedule on the same points
			if r.EnergyDiff() != 0 {
				t.Errorf("%+v: energies %v and %v", cfg, r.DeviceEnergy, r.RefEnergy)
			}
		}
		// On a subsample the device's energy is recomputed in float64.
		if len(r.RefMs) != wantRef || r.AssignEnergyDiff() > 1e-5 {
			t.Errorf("%+v: %d reference steps, want %d; assign energies %v and %v", cfg, len(r.RefMs), wantRef, r.DeviceAssignEnergy, r.RefAssignEnergy)
		}
	}
}

// Sizes with nothing to run are refused, not divided by.
func TestCheckRefusesEmpty(t *testing.T) {
	for _, cfg := range []Config{{N: 100, Dim: 4, Anchors: 4, Steps: 0}, {N: 100, Dim: 4, Anchors: 200, Steps: 2}, {N: 100, Dim: 4, Anchors: 4, Sub: 50, Steps: 2}} {
		if _, err := Check(context.Background(), cpu.New(), cpu.New(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestMedianMean(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := Mean([]float64{3, 1, 2}); m != 2 {
		t.Errorf("mean %v", m)
	}
}
