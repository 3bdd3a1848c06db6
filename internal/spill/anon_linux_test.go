package spill

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// checkHugeAdvice fails unless the mapping that holds b is private and
// advised for huge pages: its VmFlags in /proc/self/smaps name "hg" and
// not "sh" (shared anonymous memory is shmem, which the kernel's huge
// page advice does not reach).
func checkHugeAdvice(t *testing.T, b []byte) {
	t.Helper()
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(thp), "[never]") {
		t.Skipf("no transparent huge pages here (%q, %v): the advice is refused", thp, err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	addr := uintptr(unsafe.Pointer(&b[0]))
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line+" ", " hg ") || strings.Contains(line+" ", " sh ") {
				t.Fatalf("the buffer's mapping is shared or not advised for huge pages: %s", line)
			}
			return
		}
	}
	if in {
		t.Skip("/proc/self/smaps has no VmFlags here")
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
}
