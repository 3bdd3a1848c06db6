package format

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// VerifySections checks the sections named, and only those: a flipped
// byte in ANCH is found when ANCH is asked for and passes when only
// META is; a kind the file lacks is no error.
func TestVerifySections(t *testing.T) {
	b := encode(t, smallSections())
	f, _, err := openBytes(t, b, true)
	if err != nil {
		t.Fatal(err)
	}
	anch := f.Sections()[1]
	b[anch.Offset+7] ^= 1
	f, path, err := openBytes(t, b, false)
	if err != nil {
		t.Fatal(err)
	}
	meta, none := KindOf("META"), KindOf("NONE")
	if err := f.VerifySections(meta, none); err != nil {
		t.Errorf("META and a missing kind: %v, want nil", err)
	}
	err = f.VerifySections(meta, KindOf("ANCH"))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `section "ANCH" checksum mismatch`) {
		t.Errorf("ANCH flipped: %v, want ErrCorrupt naming the file and ANCH", err)
	}
	f.Close()
	if err := f.VerifySections(meta); !errors.Is(err, os.ErrClosed) {
		t.Errorf("after Close: %v, want os.ErrClosed", err)
	}
}
