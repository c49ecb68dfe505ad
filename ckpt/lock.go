package ckpt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftigo/ftigo/vfd"
)

// Locks of a run's directories. A job holds two: meta_dir's
// (levels.LockName) and its run directory's in glbl_dir. Each lock file
// records its holder, so a job refused names who has the directories.

// holder is who holds a lock, as recorded in the lock file (one line of
// JSON). It is information only: the lock itself is the flock. The
// record stays after the lock is released; it counts only while the
// lock is held.
type holder struct {
	Prog  string `json:"prog,omitempty"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid"`
	Since string `json:"since"`
	// Meta is the holder's meta_dir, recorded in a run directory's lock.
	Meta string `json:"meta_dir,omitempty"`
}

// maxHolderSize bounds the bytes read from a lock file.
const maxHolderSize = 4 << 10

// thisHolder describes this process, since now, with meta_dir meta.
func thisHolder(now time.Time, meta string) holder {
	host, _ := os.Hostname()
	return holder{Prog: filepath.Base(os.Args[0]), Host: host, PID: os.Getpid(),
		Since: now.UTC().Format(time.RFC3339), Meta: meta}
}

// String names the holder in one phrase: "heat2d (pid 42 on host n01
// since 2026-12-03T14:05:07Z)".
func (h holder) String() string {
	var b strings.Builder
	b.WriteString(cmpOr(h.Prog, "a job"))
	fmt.Fprintf(&b, " (pid %d", h.PID)
	if h.Host != "" {
		fmt.Fprintf(&b, " on host %s", h.Host)
	}
	if h.Since != "" {
		fmt.Fprintf(&b, " since %s", h.Since)
	}
	if h.Meta != "" {
		fmt.Fprintf(&b, ", meta_dir %s", h.Meta)
	}
	b.WriteString(")")
	return b.String()
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// writeHolder writes b over the content of the lock file name, in
// place: the file is the lock, it must not be replaced.
func writeHolder(d vfd.Driver, name string, b []byte) error {
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return err
	}
	err = f.Truncate(0)
	if err == nil && len(b) > 0 {
		_, err = f.WriteAt(b, 0)
	}
	return errors.Join(err, f.Close())
}

// lockFile takes the lock name through d and records h in it. When
// another holder has the lock, the error wraps [ErrLocked] and says who
// it is, as recorded in the file ("" when it recorded nothing).
func lockFile(d vfd.Driver, name string, h holder) (io.Closer, string, error) {
	l, err := vfd.Lock(d, name)
	if err != nil {
		if !errors.Is(err, vfd.ErrLocked) {
			return nil, "", err
		}
		raw, rerr := vfd.ReadFileLimit(d, name, maxHolderSize)
		var got holder
		if rerr != nil || json.Unmarshal(raw, &got) != nil || got.PID == 0 {
			return nil, "", err
		}
		return nil, got.String(), err
	}
	// Without the record the lock still holds; a refused job then
	// names no holder.
	if b, err := json.Marshal(h); err == nil {
		_ = writeHolder(d, name, append(b, '\n'))
	}
	return l, "", nil
}

// inUse returns the error of a job refused because what (a directory,
// named with its key) is locked by who: it wraps [ErrLocked] and says
// what to do.
func inUse(what, who, todo string) error {
	if who == "" {
		who = "another job or tool (it recorded no holder)"
	}
	return fmt.Errorf("ckpt: %s is in use by %s; %s: %w", what, who, todo, ErrLocked)
}
