package langchaingo_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vlc-embed/vlc"
	"github.com/vlc-embed/vlc/index/devicetest"
	"github.com/vlc-embed/vlc/integrations/langchaingo"
)

// WithOpenOptions opens the index on a device (the reference): searches
// run there and find what the CPU finds.
func TestOnDevice(t *testing.T) {
	ctx := context.Background()
	e := &fakeEmbedder{dim: dim}
	build := langchaingo.WithBuildOptions(vlc.Options{Code: "rotated", Bits: 8, Seed: 1})
	dir := t.TempDir()
	cpu := newStore(t, filepath.Join(dir, "cpu.vlc"), e, build)
	dev := newStore(t, filepath.Join(dir, "dev.vlc"), e, build, langchaingo.WithOpenOptions(vlc.OpenOptions{Device: devicetest.Reference()}))
	for _, s := range []*langchaingo.Store{cpu, dev} {
		if _, err := s.AddDocuments(ctx, pets); err != nil {
			t.Fatal(err)
		}
	}
	in, err := dev.Index().DeviceInfo()
	if err != nil || in.OnDevice != in.Segments || in.OnDevice == 0 {
		t.Fatalf("device info %+v, %v: want every segment on the device", in, err)
	}
	want, err := cpu.SimilaritySearch(ctx, "cats purr", 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dev.SimilaritySearch(ctx, "cats purr", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(contents(got), contents(want)) {
		t.Errorf("on the device %q, on the CPU %q", contents(got), contents(want))
	}
}
