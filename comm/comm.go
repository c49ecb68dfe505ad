package comm

import (
	"errors"
	"fmt"
)

// Op is a reduction operation for [Comm.AllreduceInt64].
type Op int

// Reduction operations.
const (
	Min Op = iota
	Max
	Sum
)

// String returns "min", "max" or "sum".
func (o Op) String() string {
	switch o {
	case Min:
		return "min"
	case Max:
		return "max"
	case Sum:
		return "sum"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Comm is a communicator: a group of ranks that exchange bytes. Every call
// blocks until it is complete; collective calls (Barrier, Bcast, Allgather,
// AllreduceInt64, Split) must be made by every rank of the communicator in
// the same order. Any error ends the operation that saw it; a failed or
// aborted world makes every blocked and later call return an error matching
// [ErrAborted].
//
// One goroutine per rank talks to a Comm at a time.
type Comm interface {
	// Rank is this rank's index, 0..Size()-1.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// Barrier returns when every rank has entered it.
	Barrier() error
	// Bcast copies root's buf into buf on every other rank; len(buf) must agree.
	Bcast(root int, buf []byte) error
	// Allgather concatenates every rank's send, in rank order, into recv;
	// len(recv) must be Size()*len(send) and len(send) must agree.
	Allgather(send, recv []byte) error
	// AllreduceInt64 combines v over all ranks with op and returns the result on every rank.
	AllreduceInt64(v int64, op Op) (int64, error)
	// Send sends buf to rank dst with tag; it returns when the receiver has the bytes
	// (in-process) or when buf may be reused (MPI).
	Send(dst, tag int, buf []byte) error
	// Recv receives a message from src with tag into buf and returns its length.
	// A message longer than buf is an error matching [ErrTruncated].
	Recv(src, tag int, buf []byte) (int, error)
	// Sendrecv sends to dst and receives from src in one call that cannot
	// deadlock the way paired Send and Recv can.
	Sendrecv(send []byte, dst, sendTag int, recv []byte, src, recvTag int) (int, error)
	// Split partitions the ranks by color into sub-communicators ordered by
	// (key, old rank). A negative color returns a nil Comm.
	Split(color, key int) (Comm, error)
	// Close frees a sub-communicator; on a world it is a no-op.
	Close() error
}

// Aborter is the optional capability of ending the whole job: under MPI,
// MPI_Abort; in-process, every blocked rank wakes with [ErrAborted].
type Aborter interface {
	Abort(code int) error
}

// InProcess is the optional capability of saying that every rank of the
// communicator is a goroutine of this process (the in-process world).
// Memory such a communicator moves is never registered with a network
// device, so a library may remap the pages of a rank's buffers; under MPI
// (where a registration cache may keep the old pages pinned for RDMA) it
// must not. A Comm without the capability is not in-process.
type InProcess interface {
	InProcess() bool
}

// IsInProcess reports whether c has the [InProcess] capability and says so.
func IsInProcess(c Comm) bool {
	ip, ok := c.(InProcess)
	return ok && ip.InProcess()
}

// Errors returned by communicators.
var (
	// ErrAborted is returned by every call once a rank has failed or Abort was called.
	ErrAborted = errors.New("comm: world aborted")
	// ErrClosed is returned by calls on a closed communicator.
	ErrClosed = errors.New("comm: communicator closed")
	// ErrTimeout is returned when the in-process deadlock watchdog fires.
	ErrTimeout = errors.New("comm: timed out (deadlock watchdog)")
	// ErrTruncated is returned when a received message is longer than the buffer.
	ErrTruncated = errors.New("comm: message truncated")
	// ErrBadArgument is returned for a rank out of range, mismatched lengths and the like.
	ErrBadArgument = errors.New("comm: bad argument")
)
