package policy

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleHistory() *History {
	h := &History{}
	h.AddLaunch(Launch{Start: 1e9, Seen: 50e9, Ranks: 4, Nodes: 2})
	h.AddCheckpoint(Checkpoint{Seq: 1, ID: 1, Level: 1, Time: 10e9, Blocked: 2e8, Total: 2e8, Bytes: 4096})
	h.AddCheckpoint(Checkpoint{Seq: 2, ID: 2, Level: 1, Time: 20e9, Blocked: 3e8, Total: 3e8, Bytes: 4096, Async: true})
	h.SetTotal(2, 2, 9e8) // raised to L2 in the background
	h.AddLaunch(Launch{Start: 60e9, Seen: 70e9, End: 80e9, Ending: EndStop, StopReason: "signal terminated", Ranks: 4, Nodes: 2,
		Failure: 2, LostWork: 30e9, Restart: &Restart{Level: 2, ID: 2, Seq: 2, Written: 20e9, Recover: 4e9, LostNodes: 1}})
	return h
}

func TestHistoryTotals(t *testing.T) {
	h := sampleHistory()
	assert.Equal(t, Totals{Checkpoints: 1, Blocked: 2e8, Total: 2e8, Bytes: 4096}, h.Totals[0])
	assert.Equal(t, Totals{Checkpoints: 1, Blocked: 3e8, Total: 9e8, Bytes: 4096, Restarts: 1, Recover: 4e9, LostWork: 30e9}, h.Totals[1])
	assert.Equal(t, 2, h.Checkpoints[1].Level)
	assert.Equal(t, int64(49e9), h.Launches[0].Exposure())
	assert.Equal(t, int64(20e9), h.Launches[1].Exposure())
}

func TestHistoryRoundTrip(t *testing.T) {
	h := sampleHistory()
	b, err := h.Marshal()
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("ftigo-history 1\n{")))
	assert.Regexp(t, "\ncrc32c [0-9a-f]{8}\n$", string(b))
	got, err := UnmarshalHistory(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)
}

func TestHistoryBounds(t *testing.T) {
	h := &History{}
	for i := range MaxLaunches + 10 {
		h.AddLaunch(Launch{Start: int64(i) * 10, Seen: int64(i)*10 + 5, Failure: 1 + i%2})
	}
	for i := range MaxCheckpoints + 20 {
		h.AddCheckpoint(Checkpoint{Seq: uint64(i + 1), Level: 1, Blocked: 1, Total: 1, Bytes: 8})
	}
	assert.Len(t, h.Launches, MaxLaunches)
	assert.Len(t, h.Checkpoints, MaxCheckpoints)
	assert.Equal(t, int64(10), h.DroppedLaunches)
	assert.Equal(t, int64(20), h.DroppedCheckpoints)
	assert.Equal(t, int64(50), h.DroppedExposure)
	assert.Equal(t, [MaxLevels]int64{5, 5, 0, 0}, h.DroppedFailures)
	assert.Equal(t, uint64(21), h.Checkpoints[0].Seq)
	assert.Equal(t, int64(MaxCheckpoints+20), h.Totals[0].Checkpoints)
	b, err := h.Marshal()
	require.NoError(t, err)
	assert.Less(t, len(b), MaxHistorySize/4, "a full history stays small")
	// The estimate counts the dropped launches too.
	in := Estimate(h, []int{1, 2}, 1, Priors{})
	assert.Equal(t, [MaxLevels]int{(MaxLaunches + 10) / 2, (MaxLaunches + 10) / 2, 0, 0}, in.Failures)
	assert.InDelta(t, float64(5*(MaxLaunches+10))/1e9, in.Exposure, 1e-15)
}

func TestUnmarshalHistoryErrors(t *testing.T) {
	good, err := sampleHistory().Marshal()
	require.NoError(t, err)
	body := good[len("ftigo-history 1\n") : len(good)-len("\ncrc32c 00000000\n")]
	withSum := func(b []byte) []byte {
		var out bytes.Buffer
		out.WriteString("ftigo-history 1\n")
		out.Write(b)
		fmt.Fprintf(&out, "\ncrc32c %08x\n", crcOf(b))
		return out.Bytes()
	}
	flipped := bytes.Clone(good)
	flipped[30] ^= 1
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "at byte 0: no \"ftigo-history \" header"},
		{"other file", []byte("ftigo-run x\n"), "at byte 0: no"},
		{"version", []byte("ftigo-history 2\n{}\ncrc32c 00000000\n"), "at byte 14: version \"2\", want 1"},
		{"no checksum", []byte("ftigo-history 1\n{}"), "no checksum line"},
		{"bad checksum line", []byte("ftigo-history 1\n{}\ncrc32c zz\n"), "want the line"},
		{"flipped bit", flipped, "at byte 16: body checksum"},
		{"unknown field", withSum([]byte(`{"launches":[],"checkpoints":[],"totals":[{},{},{},{}],"x":1}`)), "unknown field \"x\""},
		{"bad level", withSum([]byte(`{"launches":[],"checkpoints":[{"seq":1,"id":1,"level":7,"time":0,"blocked_ns":0,"total_ns":0,"bytes":0}],"totals":[{},{},{},{}]}`)), "checkpoint record 0: level 7"},
		{"negative recover", withSum([]byte(`{"launches":[{"start":0,"seen":0,"ranks":1,"nodes":1,"restart":{"level":1,"id":1,"seq":1,"written":0,"recover_ns":-5}}],"checkpoints":[],"totals":[{},{},{},{}]}`)), "recover -5"},
		{"trailing data", withSum(append(bytes.Clone(body), []byte(" {}")...)), "data after the body"},
		{"huge", make([]byte, MaxHistorySize+1), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalHistory(tc.raw)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrBadHistory))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func FuzzUnmarshalHistory(f *testing.F) {
	good, _ := sampleHistory().Marshal()
	f.Add(good)
	empty, _ := (&History{}).Marshal()
	f.Add(empty)
	f.Add([]byte("ftigo-history 1\n{}\ncrc32c 00000000\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := UnmarshalHistory(raw)
		if err != nil {
			if !errors.Is(err, ErrBadHistory) {
				t.Fatalf("error %v does not wrap ErrBadHistory", err)
			}
			return
		}
		// What decodes encodes and decodes to the same.
		b, err := h.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		h2, err := UnmarshalHistory(b)
		if err != nil {
			t.Fatalf("re-encoded history does not decode: %v", err)
		}
		b2, _ := h2.Marshal()
		if !bytes.Equal(b, b2) {
			t.Fatal("encoding is not stable")
		}
		// The estimate never panics on a decoded history.
		Estimate(h, []int{1, 2, 3, 4}, 4, Priors{Job: 3600})
	})
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
