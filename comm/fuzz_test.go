package comm_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// FuzzChunked drives the chunked-transfer protocol (the only framing comm
// decodes: a length header, then blocks) with arbitrary sizes, block sizes
// and receive capacities between two in-process ranks, and checks that the
// bytes arrive intact or the receiver refuses with ErrTruncated — never a
// hang, a panic or a silent short read.
func FuzzChunked(f *testing.F) {
	f.Add(uint16(0), uint16(0), uint16(0), int16(1))
	f.Add(uint16(100), uint16(7), uint16(100), int16(16))
	f.Add(uint16(4096), uint16(0), uint16(5000), int16(-3))
	f.Add(uint16(10), uint16(20), uint16(5), int16(3))
	f.Fuzz(func(t *testing.T, n0, n1, capacity uint16, chunk int16) {
		sizes := [2]int{int(n0), int(n1)}
		payload := func(r int) []byte {
			b := make([]byte, sizes[r])
			for i := range b {
				b[i] = byte(r*31 + i)
			}
			return b
		}
		var got [2][]byte
		var errs [2]error
		err := comm.Run(2, func(c comm.Comm) error {
			r := c.Rank()
			recv := make([]byte, capacity)
			n, err := comm.SendrecvChunked(c, payload(r), 1-r, recv, 1-r, 4, int(chunk))
			got[r], errs[r] = recv[:min(n, len(recv))], err
			return err
		}, comm.WithTimeout(10*time.Second))
		for r := range 2 {
			want := payload(1 - r)
			switch {
			case len(want) > int(capacity):
				if err == nil {
					t.Fatalf("rank %d: %d bytes into %d: no error", r, len(want), capacity)
				}
			case errs[r] == nil:
				if !bytes.Equal(got[r], want) {
					t.Fatalf("rank %d: got %d bytes, want %d", r, len(got[r]), len(want))
				}
			default:
				// Only the peer's truncation may fail a fitting transfer.
				if len(payload(r)) <= int(capacity) {
					t.Fatalf("rank %d: unexpected error %v", r, errs[r])
				}
			}
		}
	})
}
