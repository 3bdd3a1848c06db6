package devicetest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vlc-embed/vlc/device"
	"github.com/vlc-embed/vlc/index"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/quant"
)

// The plain-Go search of device.IndexData gives the CPU path's hits: the
// description the GPU kernels implement is right.
func TestReferenceParity(t *testing.T) {
	devicetest.Parity(t, devicetest.Reference(), devicetest.Options{})
}

// The flat code has no device search: OnDevice says so.
func TestFlatNoSearch(t *testing.T) {
	b := devicetest.Build(t, t.TempDir(), devicetest.Case{Name: "flat", N: 100, Dim: 8, Lists: 2, Bits: 32, Metric: index.L2, Queries: 1, Code: quant.KindFlat})
	_, err := b.Index.OnDevice(devicetest.Reference())
	if !errors.Is(err, device.ErrNoSearch) || !strings.Contains(err.Error(), "flat") {
		t.Fatalf("OnDevice of a flat index: %v, want device.ErrNoSearch naming the code", err)
	}
}
