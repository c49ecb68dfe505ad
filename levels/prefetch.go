package levels

import (
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// prefetch asks the storage to start reading this rank's data file of
// the newest committed checkpoint, the one a restart verifies first
// ([vfd.StartReadahead]), as soon as Open knows it: the device then reads
// it while the ranks finish the collective start-up (cleaning, directory
// syncs, the level-9 records), instead of after. Only a hint: a file
// that is missing, damaged or not the one recovered in the end costs a
// read of bytes nobody uses, and changes nothing. A rank whose data
// lives only in the L4 container gets its task read ahead there. Files
// of another shape, of a differential chain or in an HDF5 file are left
// alone.
func (e *Engine) prefetch() {
	n := len(e.committed)
	if n == 0 {
		return
	}
	m := e.committed[n-1]
	if m.Ranks != e.env.Comm.Size() || m.DCP != nil {
		return
	}
	f, ok := m.DataFile(e.env.Rank)
	if !ok || f.Attrs[AttrDigest] == DigestH5 || f.Size <= 0 {
		return
	}
	if f.Attrs[AttrInContainer] != "" {
		e.prefetchTask(f)
		return
	}
	s := e.env.Store(f.Where)
	file, err := s.Driver.Open(s.Path(f.Name), vfd.ReadOnly)
	if err != nil {
		return
	}
	_ = vfd.StartReadahead(file, 0, f.Size)
	_ = file.Close()
}

// prefetchTask starts reading this rank's task of the L4 container
// holding the data entry f (its metadata is read to find the task; the
// restart reads it again from the page cache).
func (e *Engine) prefetchTask(f File) {
	cname, rank, ok := ContainerPath(f)
	if !ok {
		return
	}
	r, err := sion.Open(e.env.Global.Driver, e.env.Global.Path(cname))
	if err != nil {
		return
	}
	defer r.Close()
	for _, t := range r.Tasks() {
		if t.GlobalRank == rank && t.Size == f.Size {
			_ = r.StartReadahead(t.Index)
			return
		}
	}
}
