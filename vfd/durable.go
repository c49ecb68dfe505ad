package vfd

import (
	"errors"
	"path"
)

// MkdirDurable creates dir and any missing parents so that they survive a crash.
// Every directory it creates is synced, deepest first.
// Then the parent of the topmost new directory is synced: it holds the new entry.
// A directory that exists already is left alone: its creator made it durable.
// Every sync is tried; their errors are joined.
func MkdirDurable(d Driver, dir string) error {
	dir = path.Clean(dir)
	created := missingDirs(d, dir)
	if len(created) == 0 {
		return nil
	}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	errs := make([]error, 0, len(created)+1)
	for _, p := range created {
		errs = append(errs, d.SyncDir(p))
	}
	errs = append(errs, d.SyncDir(path.Dir(created[len(created)-1])))
	return errors.Join(errs...)
}

// missingDirs lists dir and its parents up to the first one that exists, deepest first.
// A dir that exists as a file is listed: MkdirAll then reports it.
func missingDirs(d Driver, dir string) []string {
	var out []string
	for p := dir; ; p = path.Dir(p) {
		fi, err := d.Stat(p)
		if err == nil && (fi.IsDir() || p != dir) {
			return out
		}
		if p == "/" || p == "." {
			return out // the root is there: MkdirAll reports it otherwise
		}
		out = append(out, p)
	}
}

// RenameDurable renames oldname to newname so that the rename survives a crash.
// It syncs the directory of newname, then that of oldname when it is another.
// In this order a crash never loses the file: it is under one name or both.
func RenameDurable(d Driver, oldname, newname string) error {
	if err := d.Rename(oldname, newname); err != nil {
		return err
	}
	return syncRenamed(d, oldname, newname)
}

// syncRenamed syncs the directories of a rename, the destination's first.
func syncRenamed(d Driver, oldname, newname string) error {
	to, from := path.Dir(newname), path.Dir(oldname)
	if err := d.SyncDir(to); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	return d.SyncDir(from)
}
