package commtest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
)

// recorder collects the suite's failures instead of failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// sumIsLocal breaks Allreduce(Sum): it returns the rank's own value.
type sumIsLocal struct{ comm.Comm }

func (c sumIsLocal) AllreduceInt64(v int64, op comm.Op) (int64, error) {
	r, err := c.Comm.AllreduceInt64(v, op)
	if op == comm.Sum {
		return v, err
	}
	return r, err
}

// hidesTruncation breaks Recv: truncation is not reported.
type hidesTruncation struct{ comm.Comm }

func (c hidesTruncation) Recv(src, tag int, buf []byte) (int, error) {
	n, err := c.Comm.Recv(src, tag, buf)
	if errors.Is(err, comm.ErrTruncated) {
		err = nil
	}
	return n, err
}

// localReduce breaks the typed Allreduce: each rank keeps its own values.
type localReduce struct{ comm.Comm }

func (c localReduce) Allreduce(send, recv []byte, _ comm.Datatype, _ comm.Op) error {
	copy(recv, send)
	return nil
}

// hidesTruncatedRequests breaks Irecv: a truncated receive reports success.
type hidesTruncatedRequests struct{ comm.Comm }

func (c hidesTruncatedRequests) Isend(dst, tag int, buf []byte) (comm.Request, error) {
	return c.Comm.(comm.NonBlocker).Isend(dst, tag, buf)
}

func (c hidesTruncatedRequests) Irecv(src, tag int, buf []byte) (comm.Request, error) {
	r, err := c.Comm.(comm.NonBlocker).Irecv(src, tag, buf)
	return hideTruncation{r}, err
}

type hideTruncation struct{ comm.Request }

func (r hideTruncation) Wait() (int, error) {
	n, err := r.Request.Wait()
	if errors.Is(err, comm.ErrTruncated) {
		err = nil
	}
	return n, err
}

// TestSuiteCatchesBugs runs the suite on deliberately broken communicators
// and checks that it reports them.
func TestSuiteCatchesBugs(t *testing.T) {
	tests := []struct {
		name string
		wrap func(comm.Comm) comm.Comm
		want string
	}{
		{"none", func(c comm.Comm) comm.Comm { return c }, ""},
		{"Allreduce sum is local", func(c comm.Comm) comm.Comm { return sumIsLocal{c} }, "commtest RankSize: "},
		{"Recv hides truncation", func(c comm.Comm) comm.Comm { return hidesTruncation{c} }, "commtest Truncated: "},
		{"typed Allreduce is local", func(c comm.Comm) comm.Comm { return localReduce{c} }, "commtest TypedAllreduce: "},
		{"Irecv hides truncation", func(c comm.Comm) comm.Comm { return hidesTruncatedRequests{c} }, "commtest NonBlocking: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			err := comm.Run(2, func(c comm.Comm) error {
				commtest.Run(rec, tc.wrap(c))
				return nil
			}, comm.WithTimeout(10*time.Second))
			require.NoError(t, err)
			if tc.want == "" {
				assert.Empty(t, rec.msgs)
				return
			}
			require.NotEmpty(t, rec.msgs)
			assert.True(t, strings.HasPrefix(rec.msgs[0], tc.want), "first report: %s", rec.msgs[0])
		})
	}
}
