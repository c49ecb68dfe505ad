//go:build mpi

package mpi

// SetMaxCount lowers the largest byte count the typed operations pass to
// one MPI call, for every communicator of c's initialisation, and returns
// the previous value. Tests use it to run the large-transfer paths
// (chunked reductions, derived-datatype messages, the gather fallback) at
// small sizes; every rank must set the same value.
func SetMaxCount(c *Comm, n int) int {
	old := c.env.maxCount
	c.env.maxCount = n
	return old
}
