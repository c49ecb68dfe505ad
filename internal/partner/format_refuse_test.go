package partner

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// failingPreamble is a testFormat whose Preamble fails on one rank.
type failingPreamble struct {
	*testFormat
	rank int
	err  error
}

var errNoPreamble = errors.New("test: no preamble")

func (x failingPreamble) Preamble(f FileInfo, rank int) ([]byte, error) {
	if rank == x.rank {
		return nil, x.err
	}
	return x.testFormat.Preamble(f, rank)
}

// TestCopyFormattedSenderRefuses: a sender that cannot send its
// formatted file (its preamble does not read, or it is asked to send one
// with no hash) offers nothing: it reports why, its receiver reports
// that nothing came, and every other copy of the round succeeds; nobody
// gets a transfer error from a preamble sent where none was announced.
// The receiver's error gives the sender's reason.
func TestCopyFormattedSenderRefuses(t *testing.T) {
	for _, tc := range []string{"preamble fails", "file gone", "hash unknown"} {
		t.Run(tc, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 3000 + 10*r })
			x := &testFormat{}
			var f Format = x
			switch tc {
			case "preamble fails":
				f = failingPreamble{testFormat: x, rank: 1, err: errNoPreamble}
			case "file gone":
				f = failingPreamble{testFormat: x, rank: 1, err: &CorruptionError{Path: cl.dataPath(1), Rank: 1, Err: fs.ErrNotExist}}
			}
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				own.Format, own.Hash = f, formatDigest(cl.data[r])
				if tc == "hash unknown" && r == 1 {
					own.Hash, own.HashUnknown = encode.Hash{}, true
				}
				_, errs[r] = CopyToPartner(c, cl.topo, Options{BlockSize: 512, Format: f}, own, Ref{cl.d, cl.copyPath(r)})
				return nil
			}))
			for r, err := range errs {
				switch r {
				case 1:
					require.Error(t, err, "rank 1")
					switch tc {
					case "preamble fails":
						assert.ErrorIs(t, err, errNoPreamble)
					case "file gone":
						assert.ErrorIs(t, err, fs.ErrNotExist)
					default:
						assert.ErrorIs(t, err, ErrBadArgument)
					}
					assert.NotContains(t, err.Error(), "exchange preamble", "rank 1")
				case 2:
					require.Error(t, err, "rank 2 received nothing from rank 1")
					assert.NotContains(t, err.Error(), "exchange preamble", "rank 2")
					// The sender's reason: a file gone is a copy lost,
					// anything else is not a damaged file.
					if tc == "file gone" {
						assert.ErrorIs(t, err, ErrHashMismatch)
						var ce *CorruptionError
						require.ErrorAs(t, err, &ce)
						assert.Equal(t, 1, ce.Rank)
						assert.Equal(t, cl.copyPath(2), ce.Path)
					} else {
						assert.ErrorIs(t, err, ErrBadArgument)
						assert.NotErrorIs(t, err, ErrHashMismatch)
					}
					assert.Contains(t, err.Error(), "rank 1 sends nothing: read the preamble")
					assert.Equal(t, 1, strings.Count(err.Error(), cl.dataPath(1)), "the path once: %v", err)
					if tc == "preamble fails" {
						assert.Contains(t, err.Error(), errNoPreamble.Error())
					}
				default:
					require.NoError(t, err, "rank %d", r)
					b, rerr := vfd.ReadFile(cl.d, cl.copyPath(r))
					require.NoError(t, rerr)
					assert.Equal(t, cl.data[cl.topo.Left(r)], b, fmt.Sprintf("rank %d's copy", r))
				}
			}
		})
	}
}
