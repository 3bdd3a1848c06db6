//go:build !unix

package regfile

import "os"

// open opens and then checks: without O_NONBLOCK a special file may block
// here, but where this builds (Windows) named pipes do not live among files.
func open(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := check(path, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
