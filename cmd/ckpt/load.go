package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ckpt-dev/ckpt"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"load", newLoadCmd}) }

// loadOptions holds the parsed flags of `ckpt load`.
type loadOptions struct {
	MapLocation string
	MapSet      bool // --map-location was given (an empty value is an error, not the default)
	Strict      bool
	DryRun      bool
	JSON        bool
	NoVerify    bool
	NoMmap      bool
	Rank        int    // --rank (resolved from RankSpec)
	RankSpec    string // --rank as given: N or auto
	WorldSize   int    // --world-size
	Split       string // --split
	Quant       quantFlags
}

// envLibCUDA names a CUDA driver library to use instead of libcuda.so.1,
// for tests (the fake driver of internal/fakecuda) and diagnostics.
const envLibCUDA = "CKPT_LIBCUDA"

func newLoadCmd(s *streams) *cobra.Command {
	return loadCommand(s, ckpt.CUDASystem{}, os.LookupEnv)
}

func loadCommand(s *streams, inv ckpt.Inventory, lookup func(string) (string, bool)) *cobra.Command {
	opts := &loadOptions{}
	cmd := &cobra.Command{
		Use:   "load PATH",
		Short: "Load a checkpoint where --map-location says, after a pre-flight check",
		Long: `load plans where every tensor goes (like torch.load's map_location), checks
before reading a byte that every target device exists and has the free memory
it must receive, then loads. Only the GPUs the plan uses are judged; a GPU
needs the storage bytes plus alignment, checksums and an 8 MiB reserve.

With the CPU as the target it reads every storage once into host memory,
checks each zip record's CRC32 where the file has one, computes the xxh64c
digest of every storage (docs/checksum.md) and reports bytes, time and rate.
Storages stored uncompressed in a local file are mapped from it (as
torch.load(mmap=True) does), not copied: the load costs what reading the
file costs; from an object store they are received into a memory file
(memfd) the load maps; --no-mmap copies them into new memory instead.

With GPU targets (cuda:N) it uploads every storage once per device into one
allocation per GPU, through page-locked staging buffers, checking CRC32s and
computing digests on the host as it reads; then a checksum kernel hashes the
bytes in device memory and the digests are compared with the host's, chunk
by chunk (--no-verify skips the kernel, and is the way where the driver
cannot load it: a GPU newer than sm_90 without a PTX JIT, or one older than
sm_75). It reports bytes per device and
time and rate for reading, uploading and verifying, and "verified" or every mismatch
(tensor, device, 64 KiB chunk). The GPU memory is freed when ckpt exits: the
command proves a checkpoint loads and measures how fast.

CKPT_LIBCUDA=PATH makes ckpt use that CUDA driver library instead of
libcuda.so.1 (for tests with a fake driver, and diagnostics).

--map-location takes torch's forms: a device (cpu, cuda, cuda:1) sending
everything there, or SRC=DST pairs per saved tag (cuda:1=cuda:0). A bare type
as SRC (cuda=cpu) matches every index, which torch's dict does not. Without
it, tensors go where they were saved (map_location=None).

--rank R --world-size W --split RULES loads only rank R's part of a
tensor-parallel split, reading only its bytes. ` + splitRulesDoc + `

Exit codes: 0 loaded (or planned, with --dry-run); 1 unreadable file, failed
pre-flight, CRC32 mismatch, strays under --strict, failed upload or
verification mismatch; 2 usage.`,
		Example: `  # Load a GPU checkpoint on a machine without a GPU
  ckpt load model.pt --map-location cpu

  # See where every tensor would go, and the bytes per device, without reading data
  ckpt load model.pt --map-location cuda:1=cuda:0 --dry-run

  # Upload to the second GPU and verify the bytes there
  ckpt load model.pt --map-location cuda:1

  # Refuse a checkpoint with tensors saved on an unexpected device
  ckpt load model.pt --map-location cpu --strict

  # Rank 1 of 4 tensor-parallel ranks: only its rows of q/k/v, columns of o
  ckpt load model.safetensors --rank 1 --world-size 4 --map-location cuda:1 \
      --split '*.q_proj.weight=0,*.k_proj.weight=0,*.v_proj.weight=0,*.o_proj.weight=1'

  # One JSON object (see docs/cli-json.md, "load")
  ckpt load model.pt --map-location cpu --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var drv *ckpt.CUDADriver
			if lib, ok := lookup(envLibCUDA); ok && lib != "" {
				d, err := ckpt.OpenCUDALibrary(lib)
				if err != nil {
					return fmt.Errorf("%s=%s: %w", envLibCUDA, lib, err)
				}
				drv, inv = d, d
			}
			opts.MapSet = cmd.Flags().Changed("map-location")
			return runLoad(cmd.Context(), s, args[0], *opts, inv, drv, ckpt.CUDAEnvironment(lookup))
		},
	}
	f := cmd.Flags()
	opts.Quant.add(f)
	f.StringVar(&opts.MapLocation, "map-location", "", "where tensors go: a device (cpu, cuda:1) or SRC=DST pairs (cuda:1=cuda:0); default: where they were saved")
	f.BoolVar(&opts.Strict, "strict", false, "fail if any tensor was saved on another device than the rest (a stray)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the plan and stop before the pre-flight and before reading any data")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object instead of text")
	f.BoolVar(&opts.NoVerify, "no-verify", false, "skip the on-device checksum of what was uploaded to GPUs")
	f.BoolVar(&opts.NoMmap, "no-mmap", false, "copy local files into new host memory instead of mapping them (cpu targets)")
	f.StringVar(&opts.RankSpec, "rank", "", "with --world-size: load only this tensor-parallel rank's part (see --split); auto: from torchrun (RANK, WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS) or an Indexed Job (JOB_COMPLETION_INDEX with --world-size)")
	f.IntVar(&opts.WorldSize, "world-size", 0, "number of tensor-parallel ranks --split divides tensors over")
	f.StringVar(&opts.Split, "split", "", splitHelp)
	return cmd
}

// runLoad plans, checks and loads path through the ckpt package, then
// writes the report.
func runLoad(ctx context.Context, s *streams, path string, opts loadOptions, inv ckpt.Inventory, drv *ckpt.CUDADriver, env ckpt.CUDAEnv) error {
	var rules ckpt.Rules
	var pre []ckpt.Option
	if opts.MapLocation != "" || opts.MapSet {
		var err error
		if rules, err = ckpt.ParseMapLocation(opts.MapLocation); err != nil {
			return mapLocationError("load", opts.MapLocation, err)
		}
	}
	if opts.RankSpec != "" {
		var err error
		if opts.Rank, opts.WorldSize, err = resolveRank(s, opts.RankSpec, opts.WorldSize); err != nil {
			return err
		}
	}
	if opts.WorldSize != 0 || opts.Split != "" || opts.Rank != 0 {
		part, err := rankOption(opts.Rank, opts.WorldSize, opts.Split)
		if err != nil {
			return err
		}
		pre = append(pre, part)
	}
	bars := newStageBars(s, opts.JSON)
	lopts := []ckpt.Option{ckpt.WithRules(rules), ckpt.WithInventory(inv), ckpt.WithEnv(env), ckpt.WithProgress(bars.update)}
	if drv != nil {
		lopts = append(lopts, ckpt.WithDriver(drv))
	}
	if opts.Strict {
		lopts = append(lopts, ckpt.WithStrict())
	}
	if opts.NoVerify {
		lopts = append(lopts, ckpt.WithoutVerify())
	}
	if opts.DryRun {
		lopts = append(lopts, ckpt.WithDryRun())
	}
	if !opts.NoMmap {
		lopts = append(lopts, ckpt.WithFileMapping())
	}
	lopts = append(lopts, opts.Quant.options()...)
	var st *ckpt.ObjectStore
	lopts = append(lopts, ckpt.WithObjectStore(func(s *ckpt.ObjectStore) { st = s }))
	m, err := ckpt.Load(ctx, path, append(pre, lopts...)...)
	bars.done()
	var se *ckpt.StrayError
	if errors.As(err, &se) {
		return fmt.Errorf("--strict: %w", err)
	}
	// A verification failure still prints the report, then exits 1.
	failed := err
	if err != nil && (m == nil || !errors.Is(err, ckpt.ErrVerify)) {
		return err
	}
	defer m.Close()
	if opts.NoVerify && !hasGPUTarget(m) {
		fmt.Fprintln(s.Err, "ckpt: warning: --no-verify has no effect: no tensor goes to a GPU (CRC32s and digests are checked regardless)")
	}
	rep := m.Report()
	var ve *ckpt.VerifyError
	if errors.As(failed, &ve) {
		failed = verifyFailed{ve}
	}
	rep.Requests = requests(st)
	var werr error
	if opts.JSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		werr = enc.Encode(rep)
	} else {
		werr = writeLoadText(s.Out, rep)
	}
	if failed != nil {
		return failed
	}
	return werr
}

// verifyFailed is the one-line summary of a failed verification; the report
// lists each mismatch. It still matches ckpt.ErrVerify.
type verifyFailed struct{ ve *ckpt.VerifyError }

func (v verifyFailed) Error() string {
	for _, m := range v.ve.Mismatches {
		if m.Kind != ckpt.MismatchSaved {
			return fmt.Sprintf("%d storage(s) failed verification: the bytes on the GPU are not the bytes of the file, or not what was saved", len(v.ve.Mismatches))
		}
	}
	return fmt.Sprintf("%d storage(s) failed verification: the file's bytes are not what was saved (the digests ckpt convert recorded)", len(v.ve.Mismatches))
}

func (v verifyFailed) Unwrap() error { return v.ve }

// seconds turns a report's seconds back into a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// hasGPUTarget reports whether the load's plan sends anything to a GPU.
func hasGPUTarget(m *ckpt.Model) bool {
	for _, u := range m.Plan.Devices() {
		if u.Device.Type == "cuda" {
			return true
		}
	}
	return false
}
