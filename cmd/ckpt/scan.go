package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"scan", newScanCmd}) }

type scanOptions struct {
	JSON, All bool
}

func newScanCmd(s *streams) *cobra.Command {
	opts := &scanOptions{}
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Audit checkpoints without running them: every global their pickles import, with a verdict",
		Long: `scan finds every pickle in every file torch.load could be pointed at (torch zip
and the zips nested in it, such as TorchScript archives' data.pkl and
constants.pkl; the legacy magic-number stream; torch < 0.3 tar; gzip/zstd
wrapped files; bare pickles such as DCP's .metadata; directories, recursively)
and lists each global the pickles import, with where it is (file, record,
opcode offset) and a verdict:

  allowed  what torch.load(weights_only=True) itself accepts
  data     benign classes ckpt keeps as opaque values (argparse, numpy, ...)
  unsafe   can run code, import modules or touch the system
  unknown  on no list (model classes, user types, names computed at load)

Globals are found without running anything: names hidden behind memoized
strings and STACK_GLOBAL are traced, names computed at load time are
unknown, and a pickle the loader would refuse is still listed in full.
The human report shows every global that is not allowed (--all: every one).

Exit codes (the first that applies):
  1  an unsafe global, or anything not scanned in full: a file or record
     that cannot be read or parsed (a malformed GGUF header, a truncated
     pickle, a path that does not exist), listed under "Not scanned in full"
  2  usage error
  3  every file read in full, unknown globals found, nothing unsafe
  0  every file read in full, only allowed and data globals`,
		Example: `  ckpt scan model.pt
  ckpt scan --json downloads/ > audit.json
  ckpt scan checkpoint_dir/ || echo "do not torch.load this"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := ckpt.Scan(cmd.Context(), args)
			if err != nil {
				return err
			}
			if opts.JSON {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printScan(s, rep, opts.All)
			}
			return scanExit(rep)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON (every global, allowed ones included)")
	cmd.Flags().BoolVar(&opts.All, "all", false, "list allowed globals too")
	return cmd
}

func printScan(s *streams, rep *ckpt.ScanReport, all bool) {
	c := rep.Counts()
	fmt.Fprintf(s.Out, "Scanned:  %d files, %d pickles\n", rep.Files, rep.Pickles)
	fmt.Fprintf(s.Out, "Globals:  %d allowed, %d data, %d unknown, %d unsafe\n",
		c[ckpt.VerdictAllowed], c[ckpt.VerdictData], c[ckpt.VerdictUnknown], c[ckpt.VerdictUnsafe])
	fmt.Fprintf(s.Out, "Verdict:  %s\n", rep.Verdict)
	shown := false
	tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', 0)
	for _, f := range rep.Findings {
		if f.Verdict == ckpt.VerdictAllowed && !all {
			continue
		}
		if !shown {
			fmt.Fprintln(tw, "\nVERDICT\tGLOBAL\tFILE\tRECORD\tOFFSET\tWHY")
			shown = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", f.Verdict, clean(f.Global), clean(f.File), clean(f.Record), f.Offset, clean(f.Reason))
	}
	tw.Flush()
	if len(rep.Problems) > 0 {
		fmt.Fprintln(s.Out, "\nNot scanned in full (exit 1: what was not read was not checked; the verdict counts it as unknown):")
		for _, p := range rep.Problems {
			where := p.File
			if p.Record != "" {
				where += " (" + p.Record + ")"
			}
			fmt.Fprintf(s.Out, "  %s: %s\n", clean(where), clean(p.Error))
		}
	}
}

// scanExit maps a report to scan's exit code, by the one rule --help
// states: unsafe globals or anything not scanned in full exit 1 (what was
// not read was not checked, so it never reads as "nothing unsafe"); then
// unknown globals exit 3.
func scanExit(rep *ckpt.ScanReport) error {
	c := rep.Counts()
	switch {
	case c[ckpt.VerdictUnsafe] > 0 && len(rep.Problems) > 0:
		return exitCodeError{exitError, fmt.Errorf("scan: unsafe globals found, and not everything could be scanned in full (%d problems listed above)", len(rep.Problems))}
	case c[ckpt.VerdictUnsafe] > 0:
		return exitCodeError{exitError, fmt.Errorf("scan: unsafe globals found")}
	case len(rep.Problems) > 0:
		return exitCodeError{exitError, fmt.Errorf("scan: not everything could be scanned in full (%d problems listed above); what was not read was not checked", len(rep.Problems))}
	case c[ckpt.VerdictUnknown] > 0:
		return exitCodeError{exitUnknown, fmt.Errorf("scan: unknown globals found, nothing unsafe")}
	}
	return nil
}
