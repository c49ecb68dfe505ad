package comm

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinel errors (ErrAborted, ErrClosed, ErrTimeout, ErrTruncated,
// ErrBadArgument) are declared in comm.go next to the interface.

// PanicError is the cause [Run] returns when a rank's function panicked. It
// carries the rank, the recovered value and the goroutine's stack.
type PanicError struct {
	Rank  int
	Value any
	Stack []byte
}

// Error returns "comm: rank R panicked: VALUE" followed by the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("comm: rank %d panicked: %v\n%s", e.Rank, e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error, so errors.Is sees
// through a panic(err).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// abortCall is the cause recorded when a rank calls Abort. It matches
// [ErrAborted].
type abortCall struct {
	rank, code int
}

func (e *abortCall) Error() string {
	return fmt.Sprintf("comm: rank %d called Abort(%d)", e.rank, e.code)
}

func (e *abortCall) Is(target error) bool { return target == ErrAborted }

// abortedError is what a call returns once the world is aborted: it matches
// ErrAborted and the cause.
func abortedError(cause error) error {
	if errors.Is(cause, ErrAborted) {
		return cause
	}
	return &worldAborted{cause: cause}
}

// worldAborted is abortedError's error. Its message is one line: "comm:
// world aborted: " and the first line of the cause without its own
// "comm: " (a panic's stack stays in the cause, for errors.As).
type worldAborted struct{ cause error }

func (e *worldAborted) Error() string {
	msg, _, _ := strings.Cut(e.cause.Error(), "\n")
	return ErrAborted.Error() + ": " + strings.TrimPrefix(msg, "comm: ")
}

func (e *worldAborted) Unwrap() []error { return []error{ErrAborted, e.cause} }
