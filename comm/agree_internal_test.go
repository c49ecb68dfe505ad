package comm

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDecodeFailures feeds arbitrary bytes to the decoder of Agree's
// summary: it returns ranks and a message, or ErrBadArgument; never a
// panic, and never ranks out of order or range.
func FuzzDecodeFailures(f *testing.F) {
	good := binary.AppendUvarint(nil, 2)
	for _, v := range []uint64{1, 2, 7, 1} {
		good = binary.AppendUvarint(good, v)
	}
	f.Add(append(good, "disk full"...))
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		const size = 1000
		ranks, _, err := decodeFailures(b, size)
		if err != nil {
			if !errors.Is(err, ErrBadArgument) {
				t.Fatalf("error %v does not match ErrBadArgument", err)
			}
			return
		}
		if len(ranks) == 0 {
			t.Fatal("no error and no failing rank")
		}
		for i, r := range ranks {
			if r < 0 || r >= size || i > 0 && r <= ranks[i-1] {
				t.Fatalf("ranks %v out of order or range", ranks)
			}
		}
	})
}

func TestDecodeFailures(t *testing.T) {
	b := binary.AppendUvarint(nil, 2)
	for _, v := range []uint64{1, 2, 7, 1} {
		b = binary.AppendUvarint(b, v)
	}
	ranks, msg, err := decodeFailures(append(b, "disk full"...), 8)
	if err != nil || msg != "disk full" || len(ranks) != 3 || ranks[0] != 1 || ranks[1] != 2 || ranks[2] != 7 {
		t.Fatalf("got %v %q %v, want [1 2 7] \"disk full\" nil", ranks, msg, err)
	}
}
