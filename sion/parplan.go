package sion

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/vfd"
)

// The collective writers plan the set on rank 0 alone. Rank 0 gathers
// every rank's task layout, checks it and lays out every file, then
// hands each rank its part (a rank other than 0 never sees another
// rank's tasks). A part is one status byte, then either an error or the
// rank's plan:
//
//	planOK
//	ntasks, then per task (in the rank's order): start, skip, chunk
//	nled, then per file the rank leads:
//	  file, n, then per local rank: chunk size as asked, global rank
//	  nmap (0 unless file 0 with a mapping), then per entry: file, local rank
//
// every number an unsigned varint.
const (
	planOK byte = iota
	planBadArgument
	planTooLarge
)

// taskPlan is where one task of this rank lies in its file.
type taskPlan struct{ start, skip, chunk int64 }

// ledFile is the table of one file this rank leads.
type ledFile struct {
	file          int
	chunks, ranks []int64
	mapping       []MapEntry
}

// rankPlan is one rank's part of the set's plan.
type rankPlan struct {
	tasks []taskPlan
	led   []ledFile
}

// planError is a plan error as every rank returns it: the same text
// everywhere, matching the sentinel of the error rank 0 met.
type planError struct {
	msg      string
	sentinel error
}

func (e *planError) Error() string { return e.msg }
func (e *planError) Unwrap() error { return e.sentinel }

// planParts runs on rank 0: it plans the set from every rank's gathered
// task layout (all) and returns each rank's part, and the rank that
// leads each file. On an error every part carries it.
func planParts(d vfd.Driver, name string, all [][]byte, nfiles int, o *Options, tr trailer) (parts [][]byte, leaders []int) {
	parts = make([][]byte, len(all))
	fail := func(err error) ([][]byte, []int) {
		code := planBadArgument
		if errors.Is(err, ErrTooLarge) {
			code = planTooLarge
		}
		msg := append([]byte{code}, err.Error()...)
		for r := range parts {
			parts[r] = msg
		}
		return parts, nil
	}
	perFile, mapping, err := planSet(all, nfiles, tr)
	if err != nil {
		return fail(err)
	}
	type placed struct{ task, file, lrank int }
	byRank := make([][]placed, len(all))
	led := make([][]int, len(all))
	leaders = make([]int, nfiles)
	starts := make([][]int64, nfiles)
	skips := make([]int64, nfiles)
	chunks := make([][]int64, nfiles)
	for k, slots := range perFile {
		cs := make([]int64, len(slots))
		rs := make([]int64, len(slots))
		for l, sl := range slots {
			cs[l], rs[l] = sl.spec.ChunkSize, sl.spec.GlobalRank
		}
		pf, err := newPhysFile(d, SetMemberName(name, k), o, cs, rs, nfiles, k)
		if err != nil {
			return fail(err)
		}
		starts[k], skips[k] = pf.starts()
		chunks[k] = pf.h.ChunkSizes
		leaders[k] = slots[0].owner
		led[slots[0].owner] = append(led[slots[0].owner], k)
	}
	// Every rank's tasks, in the order it gave them.
	for r, m := range all {
		for i := 0; i+specLen <= len(m); i += specLen {
			k, l := int(binary.LittleEndian.Uint32(m[i+16:])), int(binary.LittleEndian.Uint32(m[i+20:]))
			byRank[r] = append(byRank[r], placed{task: i / specLen, file: k, lrank: l})
		}
	}
	for r := range parts {
		b := []byte{planOK}
		b = binary.AppendUvarint(b, uint64(len(byRank[r])))
		for _, p := range byRank[r] {
			b = binary.AppendUvarint(b, uint64(starts[p.file][p.lrank]))
			b = binary.AppendUvarint(b, uint64(skips[p.file]))
			b = binary.AppendUvarint(b, uint64(chunks[p.file][p.lrank]))
		}
		b = binary.AppendUvarint(b, uint64(len(led[r])))
		for _, k := range led[r] {
			b = binary.AppendUvarint(b, uint64(k))
			b = binary.AppendUvarint(b, uint64(len(perFile[k])))
			for _, sl := range perFile[k] {
				b = binary.AppendUvarint(b, uint64(sl.spec.ChunkSize))
				b = binary.AppendUvarint(b, uint64(sl.spec.GlobalRank))
			}
			var m []MapEntry
			if k == 0 && tr == trailerMapping {
				m = mapping
			}
			b = binary.AppendUvarint(b, uint64(len(m)))
			for _, e := range m {
				b = binary.AppendUvarint(b, uint64(e.File))
				b = binary.AppendUvarint(b, uint64(e.LocalRank))
			}
		}
		parts[r] = b
	}
	return parts, leaders
}

// decodePart reads this rank's part of the plan for its ntasks tasks in
// a set of nfiles files. A plan error comes back as the same error on
// every rank. Malformed bytes (which only a broken transport makes) are
// an error wrapping ErrInconsistent, never a panic.
func decodePart(b []byte, ntasks, nfiles int) (*rankPlan, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty plan from rank 0", ErrInconsistent)
	}
	switch b[0] {
	case planBadArgument:
		return nil, &planError{msg: string(b[1:]), sentinel: ErrBadArgument}
	case planTooLarge:
		return nil, &planError{msg: string(b[1:]), sentinel: ErrTooLarge}
	case planOK:
	default:
		return nil, fmt.Errorf("%w: plan status %d from rank 0", ErrInconsistent, b[0])
	}
	b = b[1:]
	bad := false
	next := func(limit uint64) uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > limit {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	const maxOff = 1<<63 - 1
	pl := &rankPlan{}
	if int(next(uint64(ntasks))) != ntasks || bad {
		return nil, fmt.Errorf("%w: the plan from rank 0 does not hold this rank's %d tasks", ErrInconsistent, ntasks)
	}
	for range ntasks {
		pl.tasks = append(pl.tasks, taskPlan{int64(next(maxOff)), int64(next(maxOff)), int64(next(maxOff))})
	}
	nled := next(uint64(nfiles))
	for i := uint64(0); i < nled && !bad; i++ {
		lf := ledFile{file: int(next(uint64(nfiles - 1)))}
		n := next(MaxTasks)
		for l := uint64(0); l < n && !bad; l++ {
			lf.chunks = append(lf.chunks, int64(next(maxOff)))
			lf.ranks = append(lf.ranks, int64(next(maxOff)))
		}
		nm := next(MaxTasks)
		for j := uint64(0); j < nm && !bad; j++ {
			lf.mapping = append(lf.mapping, MapEntry{File: int32(next(uint64(nfiles - 1))), LocalRank: int32(next(MaxTasks))})
		}
		pl.led = append(pl.led, lf)
	}
	if bad || len(b) != 0 {
		return nil, fmt.Errorf("%w: malformed plan from rank 0", ErrInconsistent)
	}
	return pl, nil
}

// namesOnly returns a physical file with its names set and nothing else:
// the final name, the name written (the final one with InPlace, which
// Abort removes) and whether Close leaves it uncommitted. A rank writing
// task data to a file it does not lead needs no more.
func namesOnly(d vfd.Driver, name string, o *Options) *physFile {
	pf := &physFile{d: d, name: name, tmp: name + TmpSuffix, noCommit: o.NoCommit || o.InPlace}
	if o.InPlace {
		pf.tmp = name
	}
	return pf
}
