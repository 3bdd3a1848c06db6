//go:build !unix

package format

// processRuns cannot check process ids here, so it says every process runs
// and RemoveStaleTemps removes nothing.
func processRuns(pid int) bool { return true }
