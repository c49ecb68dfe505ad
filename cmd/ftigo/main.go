// Command ftigo inspects, verifies and rebuilds checkpoints and works with
// the container formats ftigo writes (SIONlib, GSD, distributed HDF).
//
//	ftigo inspect RUN              the checkpoints of a run, its metadata checked
//	ftigo verify RUN               check the metadata, re-hash every file of every committed checkpoint
//	ftigo rebuild RUN              rebuild lost L2/L3/L4 files of every checkpoint offline, then verify
//	ftigo halt RUN                 ask a running job to take a final checkpoint and end (the halt file)
//	ftigo stats RUN                goodput from the run history: checkpoints, restarts, lost work, waste, ETTR
//	ftigo bench                    checkpoint and restart time per level against raw I/O
//	ftigo sion dump|split|pack|defrag ...
//	ftigo gsd dump|verify|repair FILE
//	ftigo dhdf ls|verify FILE
//	ftigo version                  module version, VCS commit, Go version, MPI library
//	ftigo completion bash|zsh|fish|powershell
//
// RUN is a run directory (local/, global/ and meta/, as heat2d -dir
// writes it) or an FTI-style config.fti naming ckpt_dir, glbl_dir and
// meta_dir.
//
// Conventions: flags are written --flag (one-letter shorthands -o, -h) and
// may come before or after the positional arguments; "ftigo help CMD" and
// "ftigo CMD --help" show a command's description, usage, examples and
// flags. Every command that prints results takes --json, and a JSON result
// never holds null for a list: an empty list is []. Progress goes to
// standard error, only when it is a terminal and --json is not given.
// Path arguments are checked before anything is opened: a FIFO, a device,
// a directory where a file is expected (or a file where a directory is
// expected) and an empty run configuration are refused with a message
// naming the path, so no command blocks on a FIFO.
//
// Exit codes: 0 success; 1 the command ran and found a problem (a
// verification failure, a corrupt or unusable file); 2 a usage error (an
// unknown command or flag, a bad flag value, a wrong number of arguments).
//
// Stability: the commands, flags, exit codes and --json fields are the
// interface; before 1.0 they may still change.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes ftigo with args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(args)
}

// app holds what a command run depends on: its output streams and the
// parts of the environment tests replace (terminal detection, build
// information, the clock, the size from which byte-wise progress shows).
type app struct {
	stdout, stderr io.Writer
	// isTerminal reports whether w is an interactive terminal; progress
	// is shown on standard error only when it is.
	isTerminal func(w io.Writer) bool
	// buildInfo returns the binary's build information (debug.ReadBuildInfo).
	buildInfo func() (*debug.BuildInfo, bool)
	// now is the clock progress output is throttled by.
	now func() time.Time
	// progressMinBytes is the input size from which sion pack and defrag
	// show progress.
	progressMinBytes int64
	// dropCaches drops the machine's page cache (bench --cold).
	dropCaches func() error
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, isTerminal: isTerminal, buildInfo: debug.ReadBuildInfo,
		now: time.Now, progressMinBytes: 64 << 20, dropCaches: dropPageCache}
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitStatus ends a command with a code after it has printed its own
// report (a failed verification): nothing more is printed.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// problem is an error a command's run returned: the command ran and
// something was wrong (exit code 1).
type problem struct{ err error }

func (e *problem) Error() string { return e.err.Error() }
func (e *problem) Unwrap() error { return e.err }

// usageTemplate is cobra's usage layout with two changes: a group
// command (annotated "group") shows only "CMD COMMAND", not a run line of
// its own, and the closing line names "COMMAND".
const usageTemplate = `Usage:{{if and .Runnable (not (index .Annotations "group"))}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run "{{.CommandPath}} COMMAND --help" for a command's description, flags and examples.{{end}}
`

const rootLong = `ftigo inspects, verifies and rebuilds the checkpoints of a run and works with
the formats ftigo writes: SIONlib containers, GSD trajectories and
distributed HDF sets.

RUN is a run directory holding local/, global/ and meta/ (as heat2d -dir
writes it), or an FTI-style config.fti naming ckpt_dir, glbl_dir and meta_dir.
Flags may come before or after the arguments. Commands that print results
take --json; progress is shown on a terminal only.

Exit codes: 0 success, 1 a problem was found, 2 usage error.`

// newRoot builds the command tree for one execution.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "ftigo",
		Short: "inspect, verify and rebuild checkpoints; SIONlib, GSD and distributed HDF tools",
		Long:  rootLong,
		Example: `  go run ./examples/heat2d -dir run     # a demonstration run that keeps its last checkpoint
  ftigo inspect run
  ftigo verify run --json
  ftigo help rebuild
  source <(ftigo completion bash)`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       a.shortVersion(),
	}
	a.group(root)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetVersionTemplate("ftigo {{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(a.inspectCmd(), a.verifyCmd(), a.rebuildCmd(), a.haltCmd(), a.statsCmd(), a.benchCmd(),
		a.sionCmd(), a.gsdCmd(), a.dhdfCmd(), a.versionCmd())
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			a.group(c)
			c.Short = "print the shell completion script for bash, zsh, fish or powershell"
			c.Example = "  source <(ftigo completion bash)\n  ftigo completion zsh > \"${fpath[1]}/_ftigo\""
			for _, sh := range c.Commands() {
				sh.Short = "print the completion script for " + sh.Name()
				sh.Example = completionExamples[sh.Name()]
			}
		}
	}
	wrapRunE(root)
	return root
}

// completionExamples are the examples of cobra's completion commands.
var completionExamples = map[string]string{
	"bash":       "  source <(ftigo completion bash)\n  ftigo completion bash > /etc/bash_completion.d/ftigo",
	"zsh":        "  ftigo completion zsh > \"${fpath[1]}/_ftigo\"",
	"fish":       "  ftigo completion fish > ~/.config/fish/completions/ftigo.fish",
	"powershell": "  ftigo completion powershell | Out-String | Invoke-Expression",
}

// run executes the command line args and maps the outcome to the exit code.
func (a *app) run(args []string) int {
	root := a.newRoot()
	// A nil slice would make cobra read os.Args.
	root.SetArgs(append([]string{}, args...))
	cmd, err := root.ExecuteC()
	if cmd == nil {
		cmd = root
	}
	return a.exitCode(cmd, err)
}

// exitCode prints err as the command's failure and returns the exit code:
// the code of an exitStatus, 1 for an error the command's run returned, 2
// for everything else (cobra's own errors are all about the command line:
// unknown commands and flags, bad flag values, argument counts).
func (a *app) exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	var p *problem
	if errors.As(err, &p) {
		fmt.Fprintf(a.stderr, "%s: %v\n", cmd.CommandPath(), p.err)
		return 1
	}
	fmt.Fprintf(a.stderr, "%s: %v\n", cmd.CommandPath(), err)
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(a.stderr, "\n%s", cmd.UsageString())
	} else {
		fmt.Fprintf(a.stderr, "Usage: %s\nRun '%s --help' for the flags and examples.\n", cmd.UseLine(), cmd.CommandPath())
	}
	return 2
}

// wrapRunE makes every error a command's run returns a *problem (exit 1)
// unless it already says otherwise (a usage error or an exit status), so
// that every other error reaching exitCode comes from cobra's parsing.
func wrapRunE(c *cobra.Command) {
	if inner := c.RunE; inner != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := inner(cmd, args)
			var ue *usageError
			var st exitStatus
			if err == nil || errors.As(err, &ue) || errors.As(err, &st) {
				return err
			}
			return &problem{err}
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub)
	}
}

// group makes c a command that only holds subcommands: without one it is a
// usage error, and an unknown one is a usage error naming the closest
// commands.
func (a *app) group(c *cobra.Command) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations["group"] = "true"
	c.SuggestionsMinimumDistance = 2
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &usageError{msg}
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return usagef("missing command")
	}
}

// helpCmd is "ftigo help [COMMAND...]": the help of the named command,
// and a usage error for an unknown one.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "show the help of ftigo or of a command",
		Long:  "Shows a command's description, usage, examples and flags (the same as COMMAND --help).",
		Example: `  ftigo help verify
  ftigo help sion pack`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(s.Name(), s.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// shorthandRE matches pflag's message for a single-dash long flag such as
// -json, which it reads as the shorthands -j -s -o -n.
var shorthandRE = regexp.MustCompile(`^unknown shorthand flag: '.' in -([A-Za-z][A-Za-z0-9-]+)`)

// flagError turns a flag parsing error into a usage error; when a long
// flag was written with one dash, as Go's flag package allows, it says so.
func flagError(c *cobra.Command, err error) error {
	if m := shorthandRE.FindStringSubmatch(err.Error()); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		if c.Flags().Lookup(name) != nil {
			return usagef("%v (long flags take two dashes: --%s)", err, name)
		}
	}
	return &usageError{err.Error()}
}

// argNames returns a positional-argument check wanting exactly the named
// arguments (the last one repeatable when variadic), with a usage error
// saying what was expected.
func argNames(variadic bool, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		n := len(names)
		if len(args) == n || (variadic && len(args) > n) {
			return nil
		}
		want := strings.Join(names, " ")
		if variadic {
			want += "..."
		}
		switch {
		case n == 0:
			return usagef("takes no arguments, got %q", strings.Join(args, " "))
		case len(args) < n:
			return usagef("missing %s (want %s)", strings.Join(names[len(args):], " "), want)
		default:
			return usagef("too many arguments: want %s, got %d: %q", want, len(args), strings.Join(args, " "))
		}
	}
}
