package levels

import (
	"errors"
	"io/fs"
	"path"
	"reflect"
	"sync"

	"github.com/ftigo/ftigo/vfd"
)

// File system helpers: concurrent syncs, durable directories, removal.

// runAll runs fns concurrently (the first on the calling goroutine) and
// joins their errors.
func runAll(fns []func() error) error {
	if len(fns) == 0 {
		return nil
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = fn()
		}()
	}
	errs[0] = fns[0]()
	wg.Wait()
	return errors.Join(errs...)
}

// syncPaths returns the syncs of the directory of every store in ss and
// of every directory above it, each directory once per driver: the
// areas of a rank usually share their upper directories (rank 0 holds
// meta_dir, glbl_dir, its replica directory and its node's directory,
// often under one root), and a second fsync of a directory whose entries
// are already durable costs a journal flush for nothing.
func syncPaths(ss []Store) []func() error {
	type key struct {
		d   int // index in drivers
		dir string
	}
	var drivers []vfd.Driver
	driverIndex := func(d vfd.Driver) int {
		for i, o := range drivers {
			if sameDriver(o, d) {
				return i
			}
		}
		drivers = append(drivers, d)
		return len(drivers) - 1
	}
	seen := map[key]bool{}
	var syncs []func() error
	for _, s := range ss {
		i := driverIndex(s.Driver)
		for p := path.Clean(s.Dir); ; p = path.Dir(p) {
			if !seen[key{i, p}] {
				seen[key{i, p}] = true
				d := s.Driver
				syncs = append(syncs, func() error { return d.SyncDir(p) })
			}
			if p == "/" || p == "." {
				break
			}
		}
	}
	return syncs
}

// sameDriver reports whether a and b are the same driver: equal values
// of a comparable type (vfd.Sec2{}, or one pointer). Drivers of other
// types are never taken as the same, nor values that cannot be compared
// without a panic (a comparable type holding an uncomparable value in an
// interface field: a wrapper of a driver by value).
func sameDriver(a, b vfd.Driver) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || ta == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Comparable() && vb.Comparable() && a == b
}

func removeIfExists(d vfd.Driver, name string) error {
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
