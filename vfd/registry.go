package vfd

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// Factory builds a driver from the key=value arguments of a driver spec.
// inner is the driver named by the rest of the spec, or nil when this
// driver is the last one; a driver that wraps another uses [Sec2] when
// inner is nil, and a driver that wraps nothing must refuse a non-nil
// inner. The registry rejects unknown keys only through the factory, so a
// factory should delete the keys it uses and report what is left with
// [CheckArgs].
type Factory func(args map[string]string, inner Driver) (Driver, error)

// Registry maps driver names to factories and parses driver specs, as
// HDF5 does with HDF5_DRIVER and HDF5_DRIVER_CONFIG. A registry is
// created with the built-in drivers; it is not safe to Register while
// another goroutine parses.
//
// Spec syntax: stages separated by ';', the first wrapping the second and
// so on; each stage is a name optionally followed by ':' and
// comma-separated key=value pairs. Sizes take an optional k, m or g
// suffix (powers of 1024). The built-in drivers and their keys:
//
//	sec2                       no keys
//	core:backing=DIR           optional backing directory (through sec2)
//	direct:align=N,bounce=N    O_DIRECT alignment and bounce-buffer size
//	stdio:buffer=N             write-back buffer per file; wraps the next stage
//	family:member=N            member size (0: discover); wraps the next stage
//	split:meta=EXT,raw=EXT     file extensions; both files through the next stage
//	log                        traces to the registry's logger; wraps the next stage
//
// For example "stdio:buffer=64k;family:member=1g;sec2" and "family:member=1048576".
// An empty spec means sec2.
type Registry struct {
	lg        *zap.Logger
	factories map[string]Factory
}

// NewRegistry returns a registry holding the built-in drivers. lg is
// given to the log driver (nil: no-op).
func NewRegistry(lg *zap.Logger) *Registry {
	if lg == nil {
		lg = zap.NewNop()
	}
	r := &Registry{lg: lg, factories: map[string]Factory{}}
	r.factories["sec2"] = func(args map[string]string, inner Driver) (Driver, error) {
		return Sec2{}, terminal("sec2", args, inner)
	}
	r.factories["core"] = func(args map[string]string, inner Driver) (Driver, error) {
		var opts []CoreOption
		if dir, ok := args["backing"]; ok {
			delete(args, "backing")
			opts = append(opts, WithBacking(Sec2{}, dir))
		}
		return NewCore(opts...), terminal("core", args, inner)
	}
	r.factories["direct"] = func(args map[string]string, inner Driver) (Driver, error) {
		align, err := takeSize(args, "align", 0)
		if err != nil {
			return nil, err
		}
		bounce, err := takeSize(args, "bounce", 0)
		if err != nil {
			return nil, err
		}
		if err := terminal("direct", args, inner); err != nil {
			return nil, err
		}
		d, err := NewDirect(int(align), int(bounce))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
		return d, nil
	}
	r.factories["stdio"] = func(args map[string]string, inner Driver) (Driver, error) {
		n, err := takeSize(args, "buffer", 0)
		if err != nil {
			return nil, err
		}
		return NewStdio(orSec2(inner), int(n)), CheckArgs("stdio", args)
	}
	r.factories["family"] = func(args map[string]string, inner Driver) (Driver, error) {
		n, err := takeSize(args, "member", 0)
		if err != nil {
			return nil, err
		}
		return NewFamily(orSec2(inner), n), CheckArgs("family", args)
	}
	r.factories["split"] = func(args map[string]string, inner Driver) (Driver, error) {
		meta, raw := args["meta"], args["raw"]
		delete(args, "meta")
		delete(args, "raw")
		in := orSec2(inner)
		return NewSplit(in, meta, in, raw), CheckArgs("split", args)
	}
	r.factories["log"] = func(args map[string]string, inner Driver) (Driver, error) {
		return NewLog(orSec2(inner), r.lg), CheckArgs("log", args)
	}
	return r
}

// Parse builds the driver a spec names with the built-in drivers; see
// [Registry] for the syntax. Errors match [ErrBadSpec].
func Parse(spec string) (Driver, error) { return NewRegistry(nil).Parse(spec) }

// Register adds a driver under name; a name already taken is an error
// matching ErrBadSpec.
func (r *Registry) Register(name string, f Factory) error {
	if name == "" || strings.ContainsAny(name, ":;,=") {
		return fmt.Errorf("%w: driver name %q", ErrBadSpec, name)
	}
	if _, ok := r.factories[name]; ok {
		return fmt.Errorf("%w: driver %q is already registered", ErrBadSpec, name)
	}
	r.factories[name] = f
	return nil
}

// Lookup returns the factory registered under name.
func (r *Registry) Lookup(name string) (Factory, bool) {
	f, ok := r.factories[name]
	return f, ok
}

// Names returns the registered driver names, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.factories)) }

// Parse builds the driver a spec names.
func (r *Registry) Parse(spec string) (Driver, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Sec2{}, nil
	}
	stages := strings.Split(spec, ";")
	var inner Driver
	for i := len(stages) - 1; i >= 0; i-- {
		name, args, err := parseStage(stages[i])
		if err != nil {
			return nil, fmt.Errorf("driver spec %q: %w", spec, err)
		}
		f, ok := r.factories[name]
		if !ok {
			return nil, fmt.Errorf("driver spec %q: %w: unknown driver %q (known: %s)", spec, ErrBadSpec, name, strings.Join(r.Names(), ", "))
		}
		d, err := f(args, inner)
		if err != nil {
			return nil, fmt.Errorf("driver spec %q: %w", spec, err)
		}
		inner = d
	}
	return inner, nil
}

func parseStage(s string) (string, map[string]string, error) {
	name, rest, hasArgs := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.TrimSpace(name)
	if name == "" {
		return "", nil, fmt.Errorf("%w: empty driver name in %q", ErrBadSpec, s)
	}
	args := map[string]string{}
	if !hasArgs {
		return name, args, nil
	}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return "", nil, fmt.Errorf("%w: %s: %q is not key=value", ErrBadSpec, name, kv)
		}
		if _, dup := args[k]; dup {
			return "", nil, fmt.Errorf("%w: %s: key %q given twice", ErrBadSpec, name, k)
		}
		args[k] = strings.TrimSpace(v)
	}
	return name, args, nil
}

// CheckArgs returns an error matching ErrBadSpec naming any key left in args.
func CheckArgs(driver string, args map[string]string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: unknown key(s) %s", ErrBadSpec, driver, strings.Join(slices.Sorted(maps.Keys(args)), ", "))
}

func terminal(driver string, args map[string]string, inner Driver) error {
	if inner != nil {
		return fmt.Errorf("%w: %s does not wrap another driver (got %s after it)", ErrBadSpec, driver, inner.Name())
	}
	return CheckArgs(driver, args)
}

func orSec2(d Driver) Driver {
	if d == nil {
		return Sec2{}
	}
	return d
}

// takeSize removes key from args and parses it as a size ("4096", "64k",
// "1m", "2g"); def when absent.
func takeSize(args map[string]string, key string, def int64) (int64, error) {
	v, ok := args[key]
	if !ok {
		return def, nil
	}
	delete(args, key)
	n, err := ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q: %w", ErrBadSpec, key, v, err)
	}
	return n, nil
}

// ParseSize parses a non-negative byte count with an optional k, m or g
// suffix (case-insensitive, optionally followed by "ib" or "b"), in powers of 1024.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "b"), "i")
	shift := 0
	switch {
	case strings.HasSuffix(t, "k"):
		shift = 10
	case strings.HasSuffix(t, "m"):
		shift = 20
	case strings.HasSuffix(t, "g"):
		shift = 30
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return n << shift, nil
}
