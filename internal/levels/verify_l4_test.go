package levels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestVerifyFileInlineL4: VerifyFile checks a sion-only data entry inside
// its container in the global area (size, then the FTI-FF checksum or the
// BLAKE3 of the task) and a container entry of digest kind "sion" by its
// metadata; every failure is a *CorruptionError naming the container and
// the rank.
func TestVerifyFileInlineL4(t *testing.T) {
	const n = 2
	tests := []struct {
		name       string
		ftiff      bool
		damage     func(t *testing.T, root string, m *Manifest)
		dataErr    []error // per rank; nil = verifies
		containErr error
	}{
		{name: "intact blake3", dataErr: []error{nil, nil}},
		{name: "intact ftiff", ftiff: true, dataErr: []error{nil, nil}},
		{name: "task flipped ftiff", ftiff: true,
			damage:  func(t *testing.T, root string, _ *Manifest) { corruptTask(t, root, 1, 1) },
			dataErr: []error{nil, ErrDigestMismatch}},
		{name: "task flipped blake3",
			damage:  func(t *testing.T, root string, _ *Manifest) { corruptTask(t, root, 1, 0) },
			dataErr: []error{ErrDigestMismatch, nil}},
		{name: "manifest size differs", ftiff: true,
			damage:  func(_ *testing.T, _ string, m *Manifest) { m.Files[1][0].Size++ },
			dataErr: []error{nil, ErrSizeMismatch}},
		{name: "no such task",
			damage:  func(_ *testing.T, _ string, m *Manifest) { m.Files[0][0].Attrs[AttrTask] = "7" },
			dataErr: []error{ErrMissingFile, nil}},
		{name: "container deleted", ftiff: true,
			damage: func(t *testing.T, root string, _ *Manifest) {
				require.NoError(t, os.Remove(filepath.Join(root, "global", CheckpointDir(1), ContainerName)))
			},
			dataErr: []error{ErrMissingFile, ErrMissingFile}, containErr: ErrMissingFile},
		{name: "container magic broken", ftiff: true,
			damage: func(t *testing.T, root string, _ *Manifest) {
				f, err := os.OpenFile(filepath.Join(root, "global", CheckpointDir(1), ContainerName), os.O_RDWR, 0)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte("XXXX"), 0)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			dataErr: []error{ErrDigestMismatch, ErrDigestMismatch}, containErr: ErrDigestMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cl := newCluster(t, vfd.Sec2{}, root, 1)
			l4 := Global4{Inline: true, FSBlkSize: 512}
			ms := make([]*Manifest, n)
			require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
				w := writeBytes(payload(e.env.Rank, 1, 3000+700*e.env.Rank))
				if tc.ftiff {
					w = ftiffWrite(e.env.Rank, 1)
				}
				m, _, err := e.Checkpoint(1, L4, w)
				ms[e.env.Rank] = m
				return err
			}))
			m := fullOf(t, ms[0])
			want := DigestFTIFF
			if !tc.ftiff {
				want = ""
			}
			for r := range n {
				assert.Equal(t, want, m.Files[r][0].Attrs[AttrDigest], "rank %d", r)
			}
			if tc.damage != nil {
				tc.damage(t, root, m)
			}
			global := Store{Driver: vfd.Sec2{}, Dir: filepath.Join(root, "global")}
			cpath := global.Path(CheckpointDir(1) + "/" + ContainerName)
			for r := range n {
				err := VerifyFile(global, m.Files[r][0])
				if tc.dataErr[r] == nil {
					assert.NoError(t, err, "rank %d", r)
					continue
				}
				require.ErrorIs(t, err, tc.dataErr[r], "rank %d", r)
				var ce *CorruptionError
				require.True(t, errors.As(err, &ce), "rank %d: %T", r, err)
				assert.Equal(t, cpath, ce.Path)
				assert.Equal(t, r, ce.Rank)
				assert.Regexp(t, fmt.Sprintf(`rank %d's file|l4\.sion \(rank %d\)`, r, r), err.Error())
				assert.Equal(t, 1, strings.Count(err.Error(), cpath), "the path once: %v", err)
			}
			c := m.Files[0][1]
			require.Equal(t, RoleContainer, c.Role)
			require.Equal(t, DigestSION, c.Attrs[AttrDigest])
			err := VerifyFile(global, c)
			if tc.containErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.containErr)
				var ce *CorruptionError
				require.True(t, errors.As(err, &ce))
				assert.Equal(t, cpath, ce.Path)
			}
		})
	}
}

// TestOpenTask: the task of a sion-only entry reads back as the bytes
// written, through a read-only file.
func TestOpenTask(t *testing.T) {
	root := t.TempDir()
	cl := newCluster(t, vfd.Sec2{}, root, 1)
	l4 := Global4{Inline: true, NFiles: 2, FSBlkSize: 512}
	ms := make([]*Manifest, 3)
	require.NoError(t, runL4(cl, 3, l4, func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L4, writeBytes(payload(e.env.Rank, 1, 900+400*e.env.Rank)))
		ms[e.env.Rank] = m
		return err
	}))
	global := Store{Driver: vfd.Sec2{}, Dir: filepath.Join(root, "global")}
	for r := range 3 {
		f, err := OpenTask(global, fullOf(t, ms[0]).Files[r][0])
		require.NoError(t, err, "rank %d", r)
		size, err := f.Size()
		require.NoError(t, err)
		b := make([]byte, size)
		require.NoError(t, vfd.ReadFull(f, b, 0))
		assert.Equal(t, payload(r, 1, 900+400*r), b, "rank %d", r)
		assert.Contains(t, f.Name(), fmt.Sprintf("task of rank %d", r))
		_, err = f.WriteAt([]byte{1}, 0)
		assert.ErrorIs(t, err, vfd.ErrReadOnly)
		assert.ErrorIs(t, f.Truncate(0), vfd.ErrReadOnly)
		require.NoError(t, f.Close())
	}
	_, err := OpenTask(global, File{Role: RoleData, Name: "x", Of: 0})
	assert.ErrorIs(t, err, ErrMissingFile)
}
