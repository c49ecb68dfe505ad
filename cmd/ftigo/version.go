package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

// versionInfo is what ftigo version prints.
type versionInfo struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, "" when the
	// build recorded none (not built in a git checkout, -buildvcs=false).
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	// MPI is the MPI library the binary is linked with (build tag mpi),
	// "" without it.
	MPI string `json:"mpi"`
}

// modulePath is the module ftigo belongs to.
const modulePath = "github.com/ftigo/ftigo"

// version collects the version information from the build: the main
// module's version ("(devel)" when the build has none, as for a binary
// built from a checkout), the VCS settings Go stamps into the binary, the
// Go version and the MPI library.
func (a *app) version() versionInfo {
	v := versionInfo{Module: modulePath, Version: "(devel)", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, MPI: mpiLibrary()}
	bi, ok := a.buildInfo()
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// shortVersion is the one-line version for --version.
func (a *app) shortVersion() string {
	v := a.version()
	s := v.Version
	if v.Commit != "" {
		s += " (" + shortCommit(v) + ")"
	}
	return s + " " + v.Go
}

func shortCommit(v versionInfo) string {
	c := v.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if v.Modified {
		c += "+modified"
	}
	return c
}

func (a *app) versionCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print the module version, VCS commit, Go version and MPI library",
		Long: `Prints the version of the ftigo module this binary was built from
("(devel)" when the build recorded none, as for go run or go build in a
checkout without a tag), the VCS commit and whether the tree had local
changes, the Go version, the platform, and the MPI library when the binary
was built with -tags mpi (Open MPI) or -tags 'mpi mpich' (MPICH).

Exit codes: 0 success, 2 usage error.`,
		Example: `  ftigo version
  ftigo version --json`,
		Args: argNames(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := a.version()
			if jsonOut {
				return writeJSON(a.stdout, v)
			}
			printVersion(a.stdout, v)
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func printVersion(w io.Writer, v versionInfo) {
	fmt.Fprintf(w, "ftigo %s (module %s)\n", v.Version, v.Module)
	switch {
	case v.Commit == "":
		fmt.Fprintln(w, "commit:   unknown (no VCS information in the build: built outside a git checkout, or with -buildvcs=false)")
	default:
		mod := ""
		if v.Modified {
			mod = ", with local changes"
		}
		fmt.Fprintf(w, "commit:   %s (%s%s)\n", v.Commit, v.CommitTime, mod)
	}
	fmt.Fprintf(w, "go:       %s %s\n", v.Go, v.Platform)
	if v.MPI == "" {
		fmt.Fprintln(w, "mpi:      none (built without -tags mpi; ranks are goroutines)")
	} else {
		fmt.Fprintf(w, "mpi:      %s\n", v.MPI)
	}
}
