package pipeline

// SetMinWindow lowers the fewest rows an assignment window takes, so that
// tests walk many windows on small inputs; the returned function undoes it.
func SetMinWindow(n int) (undo func()) {
	old := minWindow
	minWindow = n
	return func() { minWindow = old }
}

// SpillDir is spillDir: where compress keeps the code arrays of n rows of
// cb bytes.
var SpillDir = spillDir
