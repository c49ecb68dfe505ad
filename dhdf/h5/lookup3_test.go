package h5

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookup3Vectors(t *testing.T) {
	sb, err := hex.DecodeString("894844460d0a1a0a02080800" + "0000000000000000" + "ffffffffffffffff" + "0c08000000000000" + "3000000000000000")
	require.NoError(t, err)
	require.Len(t, sb, 44)
	tests := []struct {
		name    string
		in      []byte
		initval uint32
		want    uint32
	}{
		{"empty", nil, 0, 0xdeadbeef},
		{"four score", []byte("Four score and seven years ago"), 0, 0x17770551},
		{"four score initval 1", []byte("Four score and seven years ago"), 1, 0xcd628161},
		{"superblock v2", sb, 0, 0x82abc586},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Lookup3(tc.in, tc.initval))
		})
	}
}
