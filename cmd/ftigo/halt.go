package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// haltResult is halt's --json result.
type haltResult struct {
	HaltFile string `json:"halt_file"`
	// Action is "written", "cleared" or "none" (--clear with no file).
	Action   string `json:"action"`
	Reason   string `json:"reason,omitempty"`
	Deadline string `json:"deadline,omitempty"`
}

func (a *app) haltCmd() *cobra.Command {
	var jsonOut, clear bool
	var reason, deadline string
	long := `Writes the halt file ` + ckpt.HaltName + ` in the run's meta_dir. The job's next
Checkpoint or Snapshot call (rank 0 reads the file at every Checkpoint call
and at least every second at Snapshot's checks) makes every rank take a
final checkpoint at the highest level whose measured cost fits the time
left, then ShouldExit (C: ftigo_should_exit) reports that the job should
end. The job removes the file once its final checkpoint is committed. A
halt file left while no job runs stops the next launch at its first check.

--reason is shown in the job's log. --deadline asks for the job to have
ended by then (an RFC 3339 time, or a duration from now such as 10m): the
job keeps running while the time left holds its checkpoint, and stops in
time. --clear removes the halt file instead.

Exit codes: 0 the file is written (or cleared, or there was none to
clear), 1 it could not be, 2 usage error.`
	c := &cobra.Command{
		Use:   "halt RUN",
		Short: "ask a running job to take a final checkpoint and end (the halt file)",
		Long:  long + "\n\n" + runArgHelp,
		Example: `  ftigo halt run
  ftigo halt run --reason "node maintenance at 14:00" --deadline 2026-12-03T13:50:00Z
  ftigo halt config.fti --deadline 15m
  ftigo halt run --clear`,
		Args: argNames(false, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := loadRun(args[0])
			if err != nil {
				return err
			}
			d := vfd.Sec2{}
			res := haltResult{HaltFile: filepath.Join(cfg.MetaDir, ckpt.HaltName)}
			if clear {
				if reason != "" || deadline != "" {
					return usagef("--clear takes neither --reason nor --deadline")
				}
				switch err := ckpt.ClearHalt(d, cfg.MetaDir); {
				case err == nil:
					res.Action = "cleared"
				case errors.Is(err, fs.ErrNotExist):
					res.Action = "none"
				default:
					return err
				}
				return a.printHalt(res, jsonOut)
			}
			h := ckpt.HaltRequest{Reason: reason}
			if strings.ContainsAny(reason, "\n\r\x00") {
				return usagef("--reason must be one line")
			}
			if deadline != "" {
				t, err := parseDeadline(deadline, a.now())
				if err != nil {
					return err
				}
				h.Deadline = t
				res.Deadline = t.Format(time.RFC3339)
			}
			if err := ckpt.WriteHalt(d, cfg.MetaDir, h); err != nil {
				return err
			}
			res.Action, res.Reason = "written", reason
			return a.printHalt(res, jsonOut)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	c.Flags().StringVar(&reason, "reason", "", "why the job is asked to stop, shown in its log (one line)")
	c.Flags().StringVar(&deadline, "deadline", "", "when the job must have ended: an RFC 3339 time or a duration from now (10m)")
	c.Flags().BoolVar(&clear, "clear", false, "remove the halt file instead of writing it")
	return c
}

// parseDeadline reads --deadline: an RFC 3339 time, or a positive
// duration from now.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur <= 0 {
		return time.Time{}, usagef("--deadline %q: want an RFC 3339 time (2026-12-03T13:50:00Z) or a positive duration (10m)", s)
	}
	return now.Add(dur).Truncate(time.Second), nil
}

func (a *app) printHalt(res haltResult, jsonOut bool) error {
	if jsonOut {
		return writeJSON(a.stdout, res)
	}
	switch res.Action {
	case "cleared":
		fmt.Fprintf(a.stdout, "halt file removed: %s\n", res.HaltFile)
	case "none":
		fmt.Fprintf(a.stdout, "no halt file to remove: %s\n", res.HaltFile)
	default:
		fmt.Fprintf(a.stdout, "halt file written: %s\n", res.HaltFile)
		if res.Reason != "" {
			fmt.Fprintf(a.stdout, "reason: %s\n", res.Reason)
		}
		if res.Deadline != "" {
			fmt.Fprintf(a.stdout, "to end by: %s\n", res.Deadline)
		}
		fmt.Fprintln(a.stdout, "the job takes a final checkpoint at its next Checkpoint or Snapshot call, then should end (ShouldExit)")
	}
	return nil
}
