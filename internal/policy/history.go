package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// History is what a run remembers of itself across its launches: its
// checkpoints, its restarts and the failures it saw. Rank 0 keeps it in
// one small file of meta_dir ([HistoryName]), rewritten atomically.
// Only the newest [MaxCheckpoints] checkpoints and [MaxLaunches]
// launches are kept one by one; Totals count them all.
type History struct {
	// Run is the run the history belongs to (ckpt's run id, FTI's
	// exec_id; empty for a run from before run ids). A meta_dir that
	// starts another run starts another history.
	Run string `json:"run,omitempty"`
	// Launches are the run's launches, oldest first.
	Launches []Launch `json:"launches"`
	// Checkpoints are the newest checkpoints, oldest first.
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Totals[l-1] sums every checkpoint and restart at level l.
	Totals [MaxLevels]Totals `json:"totals"`
	// DroppedLaunches and DroppedCheckpoints count the records dropped
	// to keep the file small.
	DroppedLaunches    int64 `json:"dropped_launches,omitempty"`
	DroppedCheckpoints int64 `json:"dropped_checkpoints,omitempty"`
	// DroppedExposure (nanoseconds of running) and DroppedFailures
	// (per level) sum what the dropped launches saw, so the failure
	// rates stay estimated over the whole run.
	DroppedExposure int64            `json:"dropped_exposure_ns,omitempty"`
	DroppedFailures [MaxLevels]int64 `json:"dropped_failures,omitempty"`
}

// Exposure is a launch's running time in nanoseconds: from its start
// to its end, or to when it was last seen alive.
func (l Launch) Exposure() int64 {
	if end := max(l.End, l.Seen); end > l.Start {
		return end - l.Start
	}
	return 0
}

// Launch is one start of the job: Init to Finalize, Close or its end.
// Times are Unix nanoseconds of the rank 0 clock.
type Launch struct {
	Start int64 `json:"start"`
	// Seen is the last time the launch was known alive (updated at
	// checkpoints and, at most every few seconds, at Snapshot's checks).
	Seen int64 `json:"seen"`
	// End is when it ended through Finalize or Close (0: it died).
	End int64 `json:"end,omitempty"`
	// Ending says how: EndFinalize, EndClose or EndStop ("": it died).
	Ending string `json:"ending,omitempty"`
	// StopReason says what asked a stopped launch to end.
	StopReason string `json:"stop_reason,omitempty"`
	Ranks      int    `json:"ranks"`
	Nodes      int    `json:"nodes"`
	// Restart is set when the launch restarted from a checkpoint.
	Restart *Restart `json:"restart,omitempty"`
	// Failure is the level of the failure that ended the launch before
	// this one (0: it ended normally or there was none). It is known
	// when this launch starts.
	Failure int `json:"failure,omitempty"`
	// LostWork is the work that failure undid, in nanoseconds: from the
	// checkpoint this launch restarts from (or the failed launch's
	// start) to when the failed launch was last seen.
	LostWork int64 `json:"lost_work_ns,omitempty"`
}

// How a launch ended.
const (
	EndFinalize = "finalize"
	EndClose    = "close"
	EndStop     = "stop"
)

// Restart is how a launch restarted.
type Restart struct {
	Level int    `json:"level"`
	ID    int64  `json:"id"`
	Seq   uint64 `json:"seq"`
	// Written is when the checkpoint restarted from was taken.
	Written int64 `json:"written"`
	// Recover is how long Init took, in nanoseconds.
	Recover int64 `json:"recover_ns"`
	// LostNodes counts the nodes whose local files of the checkpoint
	// were gone at the restart.
	LostNodes int `json:"lost_nodes,omitempty"`
	// Skipped counts the newer checkpoints that were unrecoverable;
	// SkippedLevel is the highest level among them.
	Skipped      int `json:"skipped,omitempty"`
	SkippedLevel int `json:"skipped_level,omitempty"`
}

// Checkpoint is one committed checkpoint.
type Checkpoint struct {
	Seq   uint64 `json:"seq"`
	ID    int64  `json:"id"`
	Level int    `json:"level"`
	// Time is when the call started, in Unix nanoseconds.
	Time int64 `json:"time"`
	// Blocked is how long the solver waited, in nanoseconds; Total adds
	// the post-processing in the background (asynchronous levels).
	Blocked int64 `json:"blocked_ns"`
	Total   int64 `json:"total_ns"`
	// Bytes is the size of the checkpoint's files, all ranks.
	Bytes int64 `json:"bytes"`
	// Written and Protected are the dCP bytes written and protected
	// (0 without dCP).
	Written   int64 `json:"dcp_written,omitempty"`
	Protected int64 `json:"dcp_protected,omitempty"`
	DCP       bool  `json:"dcp,omitempty"`
	Async     bool  `json:"async,omitempty"`
	// Final marks the checkpoint a stop asked for.
	Final bool `json:"final,omitempty"`
}

// Totals sums one level's checkpoints and restarts.
type Totals struct {
	Checkpoints int64 `json:"checkpoints"`
	Blocked     int64 `json:"blocked_ns"`
	Total       int64 `json:"total_ns"`
	Bytes       int64 `json:"bytes"`
	Written     int64 `json:"dcp_written"`
	Protected   int64 `json:"dcp_protected"`
	// Differential counts the differential (dCP) checkpoints.
	Differential int64 `json:"dcp_checkpoints,omitempty"`
	Restarts     int64 `json:"restarts"`
	Recover      int64 `json:"recover_ns"`
	LostWork     int64 `json:"lost_work_ns"`
}

// Bounds of the history.
const (
	// MaxCheckpoints and MaxLaunches are the records kept one by one.
	MaxCheckpoints = 256
	MaxLaunches    = 128
	// MaxHistorySize is the largest history file a reader accepts.
	MaxHistorySize = 1 << 20
)

// HistoryName is the file's name in meta_dir.
//
// wire format: never change.
const HistoryName = "ftigo.history"

// historyMagic starts the file; the version follows it.
//
// wire format: never change.
const historyMagic = "ftigo-history "

// historyVersion is the version this code writes and reads.
const historyVersion = 1

// ErrBadHistory is a history file that does not decode.
var ErrBadHistory = errors.New("bad history file")

// AddCheckpoint records c and drops the oldest records beyond the bound.
func (h *History) AddCheckpoint(c Checkpoint) {
	if c.Level >= 1 && c.Level <= MaxLevels {
		t := &h.Totals[c.Level-1]
		t.Checkpoints++
		t.Blocked += c.Blocked
		t.Total += c.Total
		t.Bytes += c.Bytes
		t.Written += c.Written
		t.Protected += c.Protected
		if c.DCP {
			t.Differential++
		}
	}
	h.Checkpoints = append(h.Checkpoints, c)
	if n := len(h.Checkpoints) - MaxCheckpoints; n > 0 {
		h.Checkpoints = append(h.Checkpoints[:0], h.Checkpoints[n:]...)
		h.DroppedCheckpoints += int64(n)
	}
}

// SetTotal sets the total time of checkpoint seq, once its background
// post-processing has finished, and moves it to level (the level it was
// raised to).
func (h *History) SetTotal(seq uint64, level int, total int64) {
	for i := len(h.Checkpoints) - 1; i >= 0; i-- {
		c := &h.Checkpoints[i]
		if c.Seq != seq {
			continue
		}
		if c.Level >= 1 && c.Level <= MaxLevels {
			h.Totals[c.Level-1].Total -= c.Total
		}
		if level != c.Level && level >= 1 && level <= MaxLevels {
			if c.Level >= 1 && c.Level <= MaxLevels {
				o := &h.Totals[c.Level-1]
				o.Checkpoints--
				o.Blocked -= c.Blocked
				o.Bytes -= c.Bytes
				o.Written -= c.Written
				o.Protected -= c.Protected
				if c.DCP {
					o.Differential--
				}
			}
			n := &h.Totals[level-1]
			n.Checkpoints++
			n.Blocked += c.Blocked
			n.Bytes += c.Bytes
			n.Written += c.Written
			n.Protected += c.Protected
			if c.DCP {
				n.Differential++
			}
			c.Level = level
		}
		c.Total = total
		if c.Level >= 1 && c.Level <= MaxLevels {
			h.Totals[c.Level-1].Total += c.Total
		}
		return
	}
}

// AddLaunch records l and drops the oldest launches beyond the bound.
func (h *History) AddLaunch(l Launch) {
	if r := l.Restart; r != nil && r.Level >= 1 && r.Level <= MaxLevels {
		t := &h.Totals[r.Level-1]
		t.Restarts++
		t.Recover += r.Recover
		t.LostWork += l.LostWork
	}
	h.Launches = append(h.Launches, l)
	if n := len(h.Launches) - MaxLaunches; n > 0 {
		for _, d := range h.Launches[:n] {
			h.DroppedExposure += d.Exposure()
			if d.Failure >= 1 && d.Failure <= MaxLevels {
				h.DroppedFailures[d.Failure-1]++
			}
		}
		h.Launches = append(h.Launches[:0], h.Launches[n:]...)
		h.DroppedLaunches += int64(n)
	}
}

// Current returns the newest launch (nil when there is none).
func (h *History) Current() *Launch {
	if len(h.Launches) == 0 {
		return nil
	}
	return &h.Launches[len(h.Launches)-1]
}

// Marshal encodes h: the line "ftigo-history 1", the JSON body on one
// line, and "crc32c <8 hex digits>" of the body.
func (h *History) Marshal() ([]byte, error) {
	body, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s%d\n", historyMagic, historyVersion)
	b.Write(body)
	fmt.Fprintf(&b, "\ncrc32c %08x\n", crc32.Checksum(body, castagnoli))
	return b.Bytes(), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// UnmarshalHistory decodes a history file. Every error wraps
// [ErrBadHistory] and names the byte offset of the bad part.
func UnmarshalHistory(raw []byte) (*History, error) {
	bad := func(off int, format string, a ...any) error {
		return fmt.Errorf("%w: at byte %d: %s", ErrBadHistory, off, fmt.Sprintf(format, a...))
	}
	if len(raw) > MaxHistorySize {
		return nil, bad(MaxHistorySize, "larger than %d bytes", MaxHistorySize)
	}
	line, rest, ok := bytes.Cut(raw, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte(historyMagic)) {
		return nil, bad(0, "no %q header", historyMagic)
	}
	v, err := strconv.Atoi(string(line[len(historyMagic):]))
	if err != nil || v != historyVersion {
		return nil, bad(len(historyMagic), "version %q, want %d", line[len(historyMagic):], historyVersion)
	}
	off := len(line) + 1
	body, tail, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, bad(off, "no checksum line after the body")
	}
	tailOff := off + len(body) + 1
	var sum uint32
	if n, err := fmt.Sscanf(string(tail), "crc32c %08x\n", &sum); err != nil || n != 1 || len(tail) != len("crc32c 00000000\n") {
		return nil, bad(tailOff, "want the line \"crc32c <8 hex digits>\" and the end of the file")
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, bad(off, "body checksum %08x, the file says %08x", got, sum)
	}
	var h History
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, bad(off+int(dec.InputOffset()), "%v", err)
	}
	if dec.More() {
		return nil, bad(off+int(dec.InputOffset()), "data after the body")
	}
	if err := h.check(); err != nil {
		return nil, bad(off, "%v", err)
	}
	return &h, nil
}

// check refuses values no writer produces.
func (h *History) check() error {
	if h.DroppedExposure < 0 || h.DroppedLaunches < 0 || h.DroppedCheckpoints < 0 {
		return fmt.Errorf("negative counts of dropped records")
	}
	for l, n := range h.DroppedFailures {
		if n < 0 {
			return fmt.Errorf("dropped failures of level %d: %d", l+1, n)
		}
	}
	if len(h.Launches) > MaxLaunches || len(h.Checkpoints) > MaxCheckpoints {
		return fmt.Errorf("%d launches and %d checkpoints, at most %d and %d", len(h.Launches), len(h.Checkpoints), MaxLaunches, MaxCheckpoints)
	}
	for i, c := range h.Checkpoints {
		if c.Level < 1 || c.Level > MaxLevels || c.Blocked < 0 || c.Total < 0 || c.Bytes < 0 {
			return fmt.Errorf("checkpoint record %d: level %d, blocked %d, total %d, bytes %d", i, c.Level, c.Blocked, c.Total, c.Bytes)
		}
	}
	for i, l := range h.Launches {
		if l.Failure < 0 || l.Failure > MaxLevels || l.Ranks < 0 || l.Nodes < 0 {
			return fmt.Errorf("launch record %d: failure level %d, %d ranks, %d nodes", i, l.Failure, l.Ranks, l.Nodes)
		}
		if l.LostWork < 0 {
			return fmt.Errorf("launch record %d: lost work %d", i, l.LostWork)
		}
		if r := l.Restart; r != nil && (r.Level < 1 || r.Level > MaxLevels || r.Recover < 0) {
			return fmt.Errorf("launch record %d: restart level %d, recover %d", i, r.Level, r.Recover)
		}
	}
	return nil
}
