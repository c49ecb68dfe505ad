// Command ftigo inspects, verifies and rebuilds checkpoints and works with
// the container formats ftigo writes. Run "ftigo help" for the commands.
//
// Exit codes: 0 success; 1 the command ran and found a problem (a
// verification failure, a corrupt file); 2 a usage error.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand of ftigo.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand's file through register; it is
// only read after init.
var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("ftigo: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches args to a subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ftigo: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ftigo <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run \"ftigo <command> --help\" for a command's options and examples.")
	fmt.Fprintln(w, "Exit codes: 0 success, 1 a problem was found, 2 usage error.")
}
