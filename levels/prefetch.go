package levels

import "github.com/ftigo/ftigo/vfd"

// prefetch asks the storage to start reading this rank's data file of
// the newest committed checkpoint, the one a restart verifies first
// ([vfd.StartReadahead]), as soon as Open knows it: the device then reads
// it while the ranks finish the collective start-up (cleaning, directory
// syncs, the level-9 records), instead of after. Only a hint: a file
// that is missing, damaged or not the one recovered in the end costs a
// read of bytes nobody uses, and changes nothing. Files of another shape,
// of a differential chain, inside an L4 container or HDF5 file are left
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
	if !ok || f.Attrs[AttrInContainer] != "" || f.Attrs[AttrDigest] == DigestH5 || f.Size <= 0 {
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
