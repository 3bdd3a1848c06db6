package spill

import (
	"os"
	"testing"
)

func TestArena(t *testing.T) {
	dir := t.TempDir()
	a := &Arena{Dir: dir, Min: 1 << 10}
	small, err := a.Bytes(100)
	if err != nil {
		t.Fatal(err)
	}
	big, err := a.Bytes(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 100 || len(big) != 1<<20 {
		t.Fatalf("lengths %d, %d", len(small), len(big))
	}
	for i := range big {
		if big[i] != 0 {
			t.Fatalf("byte %d not zero", i)
		}
		big[i] = byte(i)
	}
	if i := 12345; big[i] != byte(i) {
		t.Fatal("spilled bytes do not read back")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("backing files left in the folder: %d", len(ents))
	}
	if a.Spilled() != 1 {
		t.Fatalf("%d buffers spilled, want 1 (the small one stays on the heap)", a.Spilled())
	}
	if err := a.Free(small); err != nil || a.Spilled() != 1 {
		t.Fatalf("freeing a heap buffer: %v, %d spilled", err, a.Spilled())
	}
	if err := a.Free(big); err != nil || a.Spilled() != 0 {
		t.Fatalf("freeing the spilled buffer: %v, %d spilled", err, a.Spilled())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestArenaMissingDir(t *testing.T) {
	a := &Arena{Dir: t.TempDir() + "/missing"}
	if _, err := a.Bytes(1 << 20); err == nil {
		t.Fatal("no error for a missing folder")
	}
}
