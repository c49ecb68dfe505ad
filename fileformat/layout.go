package fileformat

import (
	"fmt"
	"sort"
)

// Layout is the block and container list of a file (FTI's data blocks):
// where each fragment of each variable lives. Each [Write] returns the
// layout it used; passing it to the next Write keeps every existing
// container at the same place in the file, so a variable that grew gets
// one new container with only the extra part (in one new block appended at
// the end), a variable that shrank leaves its containers partly or wholly
// empty, and a new variable gets a container in the new block. A nil or
// empty Layout means a fresh file with one block holding one container per
// variable. A Layout is a value: Write never modifies the one passed in.
type Layout struct {
	Blocks []Block
}

// Block is one data block: containers stored contiguously in the file.
type Block struct {
	Containers []Container
}

// Container is space reserved in the file for the bytes [Dptr, Dptr+Size)
// of variable VarID. ID numbers a variable's containers from 0.
type Container struct {
	VarID int32
	ID    uint32
	Dptr  int64
	Size  int64
}

// Clone returns a deep copy of l (nil for nil).
func (l *Layout) Clone() *Layout {
	if l == nil {
		return nil
	}
	c := &Layout{Blocks: make([]Block, len(l.Blocks))}
	for i, b := range l.Blocks {
		c.Blocks[i].Containers = append([]Container(nil), b.Containers...)
	}
	return c
}

// Capacity returns the number of bytes reserved for variable id over all
// its containers.
func (l *Layout) Capacity(id int32) int64 {
	if l == nil {
		return 0
	}
	var n int64
	for _, b := range l.Blocks {
		for _, c := range b.Containers {
			if c.VarID == id {
				n += c.Size
			}
		}
	}
	return n
}

// DataSize returns the bytes reserved by all containers.
func (l *Layout) DataSize() int64 {
	if l == nil {
		return 0
	}
	var n int64
	for _, b := range l.Blocks {
		for _, c := range b.Containers {
			n += c.Size
		}
	}
	return n
}

// check verifies that every variable's containers tile [0, capacity) with
// consecutive ids and positive sizes, as plan and the reader require.
func (l *Layout) check() error {
	if l == nil {
		return nil
	}
	per := map[int32][]Container{}
	for _, b := range l.Blocks {
		for _, c := range b.Containers {
			per[c.VarID] = append(per[c.VarID], c)
		}
	}
	for id, cs := range per {
		if id < 0 {
			return fmt.Errorf("container of variable %d: negative id", id)
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].Dptr < cs[j].Dptr })
		var next int64
		for i, c := range cs {
			if c.Size <= 0 {
				return fmt.Errorf("variable %d container %d: size %d", id, c.ID, c.Size)
			}
			if c.Dptr != next || c.ID != uint32(i) {
				return fmt.Errorf("variable %d container %d: dptr %d, want %d (containers must tile the variable)", id, c.ID, c.Dptr, next)
			}
			next += c.Size
			if next < 0 {
				return fmt.Errorf("variable %d: capacity overflows", id)
			}
		}
	}
	return nil
}

// plan computes the layout for writing vars after prev: prev's containers
// of variables still present keep their order and place; containers of
// variables no longer protected are dropped (and blocks left empty with
// them); one new block holds the extra part of every variable that
// outgrew its containers and every new non-empty variable.
func plan(vars []Var, prev *Layout) (*Layout, error) {
	if err := prev.check(); err != nil {
		return nil, fmt.Errorf("%w: previous layout: %v", ErrInvalid, err)
	}
	present := make(map[int32]bool, len(vars))
	for i := range vars {
		present[vars[i].ID] = true
	}
	out := &Layout{}
	capacity := map[int32]int64{}
	nextID := map[int32]uint32{}
	if prev != nil {
		for _, b := range prev.Blocks {
			var nb Block
			for _, c := range b.Containers {
				if !present[c.VarID] {
					continue
				}
				nb.Containers = append(nb.Containers, c)
				capacity[c.VarID] += c.Size
				nextID[c.VarID]++
			}
			if len(nb.Containers) > 0 {
				out.Blocks = append(out.Blocks, nb)
			}
		}
	}
	var nb Block
	for i := range vars {
		v := &vars[i]
		n := int64(len(v.Data))
		if n > capacity[v.ID] {
			nb.Containers = append(nb.Containers, Container{
				VarID: v.ID, ID: nextID[v.ID], Dptr: capacity[v.ID], Size: n - capacity[v.ID],
			})
		}
	}
	if len(nb.Containers) > 0 {
		out.Blocks = append(out.Blocks, nb)
	}
	return out, nil
}
