package sion

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// The plan of a set written collectively. Rank 0 gathers every rank's
// tasks, plans the set (the files' headers, every task's place) and hands
// each rank its part: the place of its own tasks and, to a file's leader,
// the file's whole header. A rank other than 0 receives its part only, so
// its share does not grow with the number of ranks; rank 0, which writes
// file 0's mapping of every task, does O(tasks).

// taskLayout is where one task's blocks lie in its physical file: block b
// starts at start + b*skip and holds at most chunk bytes.
type taskLayout struct {
	start, skip, chunk int64
}

// writer returns the task writer of local task i of pf at this layout.
func (l taskLayout) writer(f vfd.File, pf *physFile, i int, o *Options) *TaskWriter {
	return &TaskWriter{f: f, name: pf.tmp, index: i, start: l.start, skip: l.skip, chunk: l.chunk,
		policy: o.Policy, kv: o.KeyVal, big: o.BigEndian}
}

// Layout returns where the task's blocks lie in its physical file: block
// b starts at start + b*skip and holds at most chunk bytes.
func (tw *TaskWriter) Layout() (start, skip, chunk int64) { return tw.start, tw.skip, tw.chunk }

// filePlan is what one rank learns of one file its tasks are in.
type filePlan struct {
	file   int
	leader bool
	// chunks, ranks and mapping: the whole header, for the leader.
	chunks, ranks []int64
	mapping       []MapEntry
	// tasks: the layout of each of this rank's tasks, by local rank.
	tasks map[int]taskLayout
}

// planFor runs on rank 0: it plans the set from every rank's tasks (all,
// as gathered) and returns each rank's part of the plan, and the rank
// leading each file.
func planFor(d vfd.Driver, name string, o *Options, all [][]byte, nfiles int, tr trailer, size int) ([][]byte, []int, error) {
	perFile, mapping, err := planSet(all, nfiles, tr)
	if err != nil {
		return nil, nil, err
	}
	byRank := make([]map[int]*filePlan, size)
	leaders := make([]int, nfiles)
	for k, slots := range perFile {
		chunks := make([]int64, len(slots))
		ranks := make([]int64, len(slots))
		for l, s := range slots {
			chunks[l], ranks[l] = s.spec.ChunkSize, s.spec.GlobalRank
		}
		pf, err := newPhysFile(d, SetMemberName(name, k), o, chunks, ranks, nfiles, k)
		if err != nil {
			return nil, nil, err
		}
		starts, skip := pf.starts()
		leaders[k] = slots[0].owner
		for l, s := range slots {
			fp := byRank[s.owner][k]
			if byRank[s.owner] == nil {
				byRank[s.owner] = map[int]*filePlan{}
			}
			if fp == nil {
				fp = &filePlan{file: k, tasks: map[int]taskLayout{}}
				byRank[s.owner][k] = fp
			}
			fp.tasks[l] = taskLayout{start: starts[l], skip: skip, chunk: pf.h.ChunkSizes[l]}
			if l == 0 {
				fp.leader, fp.chunks, fp.ranks = true, pf.h.ChunkSizes, ranks
				if k == 0 && tr == trailerMapping {
					fp.mapping = mapping
				}
			}
		}
	}
	plans := make([][]byte, size)
	for r, fps := range byRank {
		plans[r] = encodePlan(fps)
	}
	return plans, leaders, nil
}

// encodePlan encodes one rank's part of the plan as little-endian
// int64s: the number of files, then per file its number, whether the
// rank leads it, the whole header for a leader (chunks, ranks, mapping),
// and the layout of each of the rank's tasks.
func encodePlan(fps map[int]*filePlan) []byte {
	var b []byte
	put := func(v int64) { b = binary.LittleEndian.AppendUint64(b, uint64(v)) }
	put(int64(len(fps)))
	for _, fp := range fps {
		put(int64(fp.file))
		if !fp.leader {
			put(0)
		} else {
			put(1)
			put(int64(len(fp.chunks)))
			for i := range fp.chunks {
				put(fp.chunks[i])
				put(fp.ranks[i])
			}
			put(int64(len(fp.mapping)))
			for _, m := range fp.mapping {
				put(int64(m.File))
				put(int64(m.LocalRank))
			}
		}
		put(int64(len(fp.tasks)))
		for l, t := range fp.tasks {
			put(int64(l))
			put(t.start)
			put(t.skip)
			put(t.chunk)
		}
	}
	return b
}

// decodePlan decodes one rank's part of the plan.
func decodePlan(b []byte) ([]*filePlan, error) {
	bad := errors.New("sion: bad plan from rank 0")
	get := func() (int64, bool) {
		if len(b) < 8 {
			return 0, false
		}
		v := int64(binary.LittleEndian.Uint64(b))
		b = b[8:]
		return v, true
	}
	count := func() (int, bool) {
		v, ok := get()
		return int(v), ok && v >= 0 && v <= int64(len(b))/8
	}
	n, ok := count()
	if !ok {
		return nil, bad
	}
	out := make([]*filePlan, 0, n)
	for range n {
		fp := &filePlan{tasks: map[int]taskLayout{}}
		k, ok1 := get()
		lead, ok2 := get()
		if !ok1 || !ok2 {
			return nil, bad
		}
		fp.file, fp.leader = int(k), lead == 1
		if fp.leader {
			nt, ok := count()
			if !ok {
				return nil, bad
			}
			fp.chunks, fp.ranks = make([]int64, nt), make([]int64, nt)
			for i := range nt {
				fp.chunks[i], _ = get()
				fp.ranks[i], _ = get()
			}
			nm, ok := count()
			if !ok {
				return nil, bad
			}
			for range nm {
				f, _ := get()
				l, _ := get()
				fp.mapping = append(fp.mapping, MapEntry{File: int32(f), LocalRank: int32(l)})
			}
		}
		nt, ok := count()
		if !ok {
			return nil, bad
		}
		for range nt {
			l, _ := get()
			st, _ := get()
			sk, _ := get()
			ch, ok := get()
			if !ok {
				return nil, bad
			}
			fp.tasks[int(l)] = taskLayout{start: st, skip: sk, chunk: ch}
		}
		out = append(out, fp)
	}
	if len(b) != 0 {
		return nil, bad
	}
	return out, nil
}

// takePlan builds this rank's files from its part of the plan: a leader's
// with its whole header, the others with what naming and writing need.
func (pw *ParWriter) takePlan(d vfd.Driver, name string, o *Options, fps []*filePlan, tr trailer) error {
	for _, fp := range fps {
		if fp.file < 0 || fp.file >= pw.nfiles {
			return fmt.Errorf("sion: plan names file %d of %d", fp.file, pw.nfiles)
		}
		var pf *physFile
		if fp.leader {
			var err error
			if pf, err = newPhysFile(d, SetMemberName(name, fp.file), o, fp.chunks, fp.ranks, pw.nfiles, fp.file); err != nil {
				return err
			}
			if fp.file == 0 {
				pf.tr, pf.mapping = tr, fp.mapping
			}
		} else {
			pf = stubFile(d, SetMemberName(name, fp.file), o)
		}
		pf.leader, pf.layouts = fp.leader, fp.tasks
		pw.files[fp.file] = pf
	}
	for _, t := range pw.specs {
		if pf := pw.files[t.File]; pf == nil || pf.layouts == nil {
			return fmt.Errorf("sion: the plan does not place local task %d of file %d", t.LocalRank, t.File)
		} else if _, ok := pf.layouts[t.LocalRank]; !ok {
			return fmt.Errorf("sion: the plan does not place local task %d of file %d", t.LocalRank, t.File)
		}
	}
	return nil
}

// stubFile is a physical file a rank writes tasks to without leading it:
// its names only.
func stubFile(d vfd.Driver, name string, o *Options) *physFile {
	pf := &physFile{d: d, name: name, tmp: name + TmpSuffix, noCommit: o.NoCommit || o.InPlace}
	if o.InPlace {
		pf.tmp = name
	}
	return pf
}

// routeSizes groups, on rank 0, every task's block-size record (all, as
// gathered) by the rank leading its file.
func (pw *ParWriter) routeSizes(all [][]byte) [][]byte {
	out := make([][]byte, pw.c.Size())
	for _, m := range all {
		for len(m) >= 12 {
			file, nb := int(binary.LittleEndian.Uint32(m)), int(binary.LittleEndian.Uint32(m[8:]))
			n := 12 + 8*nb
			if n > len(m) || file < 0 || file >= len(pw.leaders) {
				break
			}
			ld := pw.leaders[file]
			out[ld] = append(out[ld], m[:n]...)
			m = m[n:]
		}
	}
	return out
}

// Plan errors are agreed with their kind, so that every rank's error
// matches the same sentinel.
const (
	planOK       = 0
	planBadArg   = 1
	planTooLarge = 2
	planOther    = 3
)

// agreePlan gives every rank rank 0's planning error (perr there).
// Collective.
func agreePlan(c comm.Comm, perr error) error {
	var msg []byte
	if c.Rank() == 0 {
		kind := byte(planOK)
		switch {
		case perr == nil:
		case errors.Is(perr, ErrBadArgument):
			kind = planBadArg
		case errors.Is(perr, ErrTooLarge):
			kind = planTooLarge
		default:
			kind = planOther
		}
		msg = []byte{kind}
		if perr != nil {
			msg = append(msg, perr.Error()...)
		}
	}
	msg, err := comm.BcastBytes(c, 0, msg)
	if err != nil {
		return fmt.Errorf("sion: agree on the plan: %w", err)
	}
	if len(msg) == 0 || msg[0] == planOK {
		return nil
	}
	if c.Rank() == 0 {
		return perr
	}
	text := string(msg[1:])
	for _, s := range []error{ErrBadArgument, ErrTooLarge} {
		text = strings.TrimPrefix(text, s.Error()+": ")
	}
	switch msg[0] {
	case planBadArg:
		return fmt.Errorf("%w: %s", ErrBadArgument, text)
	case planTooLarge:
		return fmt.Errorf("%w: %s", ErrTooLarge, text)
	}
	return fmt.Errorf("sion: rank 0: %s", text)
}

// Point-to-point tags of the rooted transfers.
const tagRooted = 0x5100

// gathervBytes gathers every rank's b on root (nil elsewhere), point to
// point: root receives one message per rank, the others send one.
// Collective.
func gathervBytes(c comm.Comm, root int, b []byte) ([][]byte, error) {
	if c.Rank() != root {
		return nil, sendSized(c, root, b)
	}
	out := make([][]byte, c.Size())
	for r := range out {
		if r == root {
			out[r] = b
			continue
		}
		m, err := recvSized(c, r)
		if err != nil {
			return nil, err
		}
		out[r] = m
	}
	return out, nil
}

// scattervBytes hands rank r root's parts[r], point to point. Collective.
func scattervBytes(c comm.Comm, root int, parts [][]byte) ([]byte, error) {
	if c.Rank() != root {
		return recvSized(c, root)
	}
	if len(parts) != c.Size() {
		return nil, fmt.Errorf("%w: %d parts for %d ranks", ErrBadArgument, len(parts), c.Size())
	}
	for r, p := range parts {
		if r != root {
			if err := sendSized(c, r, p); err != nil {
				return nil, err
			}
		}
	}
	return parts[root], nil
}

// sendSized sends b to dst: its length, then (when not empty) its bytes.
func sendSized(c comm.Comm, dst int, b []byte) error {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(b)))
	if err := c.Send(dst, tagRooted, h[:]); err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return comm.SendChunked(c, dst, tagRooted, b, 0)
}

// recvSized receives a [sendSized] message from src.
func recvSized(c comm.Comm, src int) ([]byte, error) {
	var h [8]byte
	if _, err := c.Recv(src, tagRooted, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(h[:])
	if n > 1<<31 {
		return nil, fmt.Errorf("%w: %d-byte message from rank %d", ErrBadArgument, n, src)
	}
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	_, err := comm.RecvChunked(c, src, tagRooted, b, 0)
	return b, err
}
