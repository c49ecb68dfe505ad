//lint:file-ignore U1000 the C entry points in ext_cgo.go (build tags mpi, serial) are the only callers of some functions

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// ftigo's extensions to FTI's interface (include/ftigo.h): what the
// Fortran module and the Python package need beyond FTI's C calls.

// recorded returns log with every warning and error also kept as the
// session's last message, whatever the verbosity (ftigo_last_error).
func (l *library) recorded(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, &lastCore{l: l})
	}))
}

// lastCore keeps the message of every warning and error in l.lastMsg.
type lastCore struct {
	l      *library
	fields []zapcore.Field
}

func (c *lastCore) Enabled(lv zapcore.Level) bool { return lv >= zapcore.WarnLevel }

func (c *lastCore) With(fs []zapcore.Field) zapcore.Core {
	return &lastCore{l: c.l, fields: append(append([]zapcore.Field(nil), c.fields...), fs...)}
}

func (c *lastCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *lastCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	msg := e.Message
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fs...) {
		if f.Type == zapcore.ErrorType {
			if err, ok := f.Interface.(error); ok {
				msg += ": " + err.Error()
			}
		}
	}
	c.l.lastMsg = msg
	return nil
}

func (c *lastCore) Sync() error { return nil }

// elemTypeHandle is ftigo_elem_type: the handle of a type whose elements
// a checkpoint records as element type t (fileformat's numbering), so that
// Go and Python read them typed. The predefined C handles are returned
// where they record t; others (complex numbers, 16-bit and unsigned kinds
// of other sizes) are registered once per session.
func (l *library) elemTypeHandle(t int) int {
	const fn = "ftigo_elem_type"
	if !l.ready(fn) {
		return codeFailure
	}
	et := fileformat.ElemType(t)
	if !et.Valid() || et == fileformat.Bytes || et == fileformat.Struct {
		return l.fail(fn, fmt.Sprintf("element type %d is not a numeric type (1 int8 .. 12 complex128)", t))
	}
	for id := 0; id < numBasicTypes; id++ {
		if ct, _ := l.types.get(id); ct.elem == et {
			return id
		}
	}
	if id, ok := l.extTypes[et]; ok {
		return id
	}
	ct, err := l.types.add(et.String(), int64(et.Size()), false)
	if err != nil {
		return l.fail(fn, err.Error())
	}
	ct.elem = et
	if l.extTypes == nil {
		l.extTypes = map[fileformat.ElemType]int{}
	}
	l.extTypes[et] = ct.id
	return ct.id
}

// Offline reading (ftigo_offline_*): the committed checkpoints of a run
// and their variables, read from the files without a session, never
// writing.

// offlineRun is a run's configuration and its committed checkpoints.
type offlineRun struct {
	cfg   ckpt.Config
	ckpts []*levels.Manifest
}

// openRun reads the run named by path: a directory holding config.fti,
// or a configuration file.
func openRun(path string) (*offlineRun, error) {
	cfgPath := path
	if st, err := (vfd.Sec2{}).Stat(path); err == nil && st.IsDir() {
		cfgPath = filepath.Join(path, "config.fti")
	}
	cfg, err := ckpt.LoadConfig(vfd.Sec2{}, cfgPath)
	if err != nil {
		return nil, err
	}
	meta := levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir}
	global := levels.Store{Driver: vfd.Sec2{}, Dir: cfg.GlblDir}
	scans, err := levels.ScanCheckpoints(meta, global)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", path, err)
	}
	run := &offlineRun{cfg: cfg}
	for i := range scans {
		s := &scans[i]
		if s.State() != levels.SeqCommitted {
			continue
		}
		if c := s.Valid(); c != nil && c.M != nil {
			run.ckpts = append(run.ckpts, c.M)
		}
	}
	return run, nil
}

// manifest returns the committed checkpoint with sequence number seq.
func (o *offlineRun) manifest(seq uint64) (*levels.Manifest, error) {
	for _, m := range o.ckpts {
		if m.Seq == seq {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no committed checkpoint with sequence number %d", seq)
}

// errOfflineDCP refuses differential checkpoints, whose data is a chain.
var errOfflineDCP = errors.New("capi: a differential (dCP) checkpoint is not read offline; read its base or a full checkpoint")

// openData opens rank's data file of m, read-only, with FTI-FF's checks.
func (o *offlineRun) openData(m *levels.Manifest, rank int) (*fileformat.Reader, func(), error) {
	if m.DCP != nil {
		return nil, nil, errOfflineDCP
	}
	if rank < 0 || rank >= m.Ranks {
		return nil, nil, fmt.Errorf("rank %d: checkpoint %d has ranks 0..%d", rank, m.ID, m.Ranks-1)
	}
	f, ok := m.DataFile(rank)
	if !ok {
		return nil, nil, fmt.Errorf("checkpoint %d lists no data file of rank %d", m.ID, rank)
	}
	var file vfd.File
	var err error
	// The files are in the directories of the run that committed m.
	global := levels.Store{Driver: vfd.Sec2{}, Dir: o.cfg.GlobalDir(m.Run)}
	if _, _, inC := levels.ContainerPath(f); inC && f.Attrs[levels.AttrInContainer] != "" {
		file, err = levels.OpenTask(global, f)
	} else {
		dir := global.Dir
		if f.Where == levels.Local {
			dir = o.cfg.NodeDir(rank/max(m.NodeSize, 1), m.Run)
		}
		file, err = vfd.Sec2{}.Open(filepath.Join(dir, f.Name), vfd.ReadOnly)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("rank %d of checkpoint %d: %w", rank, m.ID, err)
	}
	r, err := fileformat.Open(file)
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("rank %d of checkpoint %d: %w", rank, m.ID, err)
	}
	return r, func() { file.Close() }, nil
}

// offlineList is what ftigo_offline_list returns, as JSON.
type offlineCkpt struct {
	Seq   uint64 `json:"seq"`
	ID    int64  `json:"id"`
	Level int    `json:"level"`
	Ranks int    `json:"ranks"`
	Time  int64  `json:"time_ns"`
	DCP   bool   `json:"dcp"`
}

func (o *offlineRun) list() []offlineCkpt {
	out := []offlineCkpt{}
	for _, m := range o.ckpts {
		out = append(out, offlineCkpt{Seq: m.Seq, ID: m.ID, Level: int(m.Level), Ranks: m.Ranks, Time: m.Time, DCP: m.DCP != nil})
	}
	return out
}

// offlineVar is one stored variable (ftigo_offline_vars).
type offlineVar struct {
	ID       int32  `json:"id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	ElemSize uint32 `json:"elem_size"`
	Count    int64  `json:"count"`
	Size     int64  `json:"size"`
}

func (o *offlineRun) vars(seq uint64, rank int) ([]offlineVar, error) {
	m, err := o.manifest(seq)
	if err != nil {
		return nil, err
	}
	r, done, err := o.openData(m, rank)
	if err != nil {
		return nil, err
	}
	defer done()
	out := []offlineVar{}
	for _, v := range r.Vars() {
		out = append(out, offlineVar{ID: v.ID, Name: v.Name, Type: strings.ToLower(v.Type.String()), ElemSize: v.ElemSize, Count: v.Count, Size: v.Size})
	}
	return out, nil
}

// read reads variable id of rank into dst (its stored size), every block
// checked against its hash.
func (o *offlineRun) read(seq uint64, rank int, id int32, dst []byte) error {
	m, err := o.manifest(seq)
	if err != nil {
		return err
	}
	r, done, err := o.openData(m, rank)
	if err != nil {
		return err
	}
	defer done()
	return r.ReadVar(id, dst)
}

// shouldExit is ftigo_should_exit: 1 once a stop's final checkpoint was
// taken (ckpt's ShouldExit), else 0, also before Init and after the end.
func (l *library) shouldExit() int {
	if l.state != stateReady || l.rt == nil || !l.rt.ShouldExit() {
		return 0
	}
	return 1
}
