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

// An Arena without Dir maps buffers of hugeMin bytes and more itself,
// zeroed and writable, and unmaps them on Free and Close; smaller ones
// come from the heap. Nothing is spilled.
func TestArenaMemory(t *testing.T) {
	a := &Arena{Min: 1 << 10}
	small, err := a.Bytes(hugeMin - 1)
	if err != nil {
		t.Fatal(err)
	}
	big, err := a.Bytes(hugeMin)
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Bytes(hugeMin + 4097)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != hugeMin-1 || len(big) != hugeMin || len(other) != hugeMin+4097 {
		t.Fatalf("lengths %d, %d, %d", len(small), len(big), len(other))
	}
	for i := 0; i < len(big); i += 4093 {
		if big[i] != 0 || other[i] != 0 {
			t.Fatalf("byte %d not zero", i)
		}
		big[i], other[i] = byte(i), byte(i+1)
	}
	if i := 4093; big[i] != byte(i) || other[i] != byte(i+1) {
		t.Fatal("mapped bytes do not read back")
	}
	if a.Spilled() != 0 || len(a.anon) != 2 {
		t.Fatalf("%d spilled, %d mapped; want 0 and 2 (the small one on the heap)", a.Spilled(), len(a.anon))
	}
	checkHugeAdvice(t, big)
	if err := a.Free(big); err != nil || len(a.anon) != 1 {
		t.Fatalf("freeing a mapped buffer: %v, %d mapped", err, len(a.anon))
	}
	if err := a.Close(); err != nil || len(a.anon) != 0 {
		t.Fatalf("Close: %v, %d mapped", err, len(a.anon))
	}
	var none *Arena
	if b, err := none.Bytes(hugeMin); err != nil || len(b) != hugeMin {
		t.Fatalf("a nil Arena: %d bytes, %v", len(b), err)
	}
}
