package vfd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec  string
		chain []string // driver names from the outside in
		check func(t *testing.T, d vfd.Driver)
	}{
		{"", []string{"sec2"}, nil},
		{"sec2", []string{"sec2"}, nil},
		{"core", []string{"core"}, nil},
		{"family:member=1048576", []string{"family", "sec2"}, nil},
		{" stdio : buffer=64k ; family:member=1m ; core ", []string{"stdio", "family", "core"}, nil},
		{"split:meta=.meta,raw=.raw;core", []string{"split"}, func(t *testing.T, d vfd.Driver) {
			f, err := vfd.Create(d, "x")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, err = d.(*vfd.Split).Stat("x")
			require.NoError(t, err)
		}},
		{"direct:align=512,bounce=1m", []string{"direct"}, func(t *testing.T, d vfd.Driver) {
			assert.Equal(t, 512, d.(*vfd.Direct).Alignment())
		}},
		{"log;stdio;sec2", []string{"log", "stdio", "sec2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, err := vfd.Parse(tt.spec)
			require.NoError(t, err)
			var got []string
			for d := d; d != nil; {
				got = append(got, d.Name())
				switch x := d.(type) {
				case *vfd.Family:
					d = x.Inner()
				case *vfd.Stdio:
					d = x.Inner()
				case *vfd.Log:
					d = x.Inner()
				default:
					d = nil
				}
			}
			assert.Equal(t, tt.chain, got)
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ spec, msg string }{
		{"nosuch", `unknown driver "nosuch"`},
		{"family:member", `"member" is not key=value`},
		{"family:member=lots", `member="lots"`},
		{"family:member=1,member=2", `key "member" given twice`},
		{"stdio:bufer=4096", "unknown key(s) bufer"},
		{"sec2;core", "sec2 does not wrap another driver"},
		{"direct:align=3000", "not a power of two"},
		{";sec2", "empty driver name"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := vfd.Parse(tt.spec)
			require.ErrorIs(t, err, vfd.ErrBadSpec)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestRegistryRegister(t *testing.T) {
	r := vfd.NewRegistry(nil)
	require.NoError(t, r.Register("mem", func(args map[string]string, inner vfd.Driver) (vfd.Driver, error) {
		return vfd.NewCore(), vfd.CheckArgs("mem", args)
	}))
	assert.ErrorIs(t, r.Register("mem", nil), vfd.ErrBadSpec)
	assert.ErrorIs(t, r.Register("a:b", nil), vfd.ErrBadSpec)
	assert.Contains(t, r.Names(), "mem")
	d, err := r.Parse("stdio;mem")
	require.NoError(t, err)
	assert.Equal(t, "core", d.(*vfd.Stdio).Inner().Name())
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"64k", 64 << 10, true}, {"1M", 1 << 20, true},
		{"2GiB", 2 << 30, true}, {"3kb", 3 << 10, true}, {"-1", 0, false}, {"", 0, false}, {"k", 0, false},
		{"99999999999g", 0, false},
	}
	for _, tt := range tests {
		got, err := vfd.ParseSize(tt.in)
		if tt.ok {
			require.NoError(t, err, tt.in)
			assert.Equal(t, tt.want, got, tt.in)
		} else {
			assert.Error(t, err, tt.in)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "sec2", "core:backing=/tmp/x", "family:member=1m;stdio:buffer=4k;core",
		"split:meta=-m.h5,raw=-r.h5", "direct:align=4096,bounce=1m", "log;sec2", "x:y=z,,", ";;", "family:member=9999999999999g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		d, err := vfd.Parse(spec)
		if err != nil {
			require.ErrorIs(t, err, vfd.ErrBadSpec)
			return
		}
		require.NotNil(t, d)
		require.NotEmpty(t, d.Name())
	})
}

func TestRegistryLookup(t *testing.T) {
	r := vfd.NewRegistry(nil)
	f, ok := r.Lookup("family")
	require.True(t, ok)
	d, err := f(map[string]string{"member": "4096"}, vfd.NewCore())
	require.NoError(t, err)
	assert.Equal(t, "family", d.Name())
	_, ok = r.Lookup("nosuch")
	assert.False(t, ok)
	assert.Equal(t, []string{"core", "direct", "family", "log", "sec2", "split", "stdio"}, r.Names())
}
