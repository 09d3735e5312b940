package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"devices", newDevicesCmd}) }

// devicesOptions holds the parsed flags of `ckpt devices`.
type devicesOptions struct {
	JSON bool
}

// devicesSource is what `ckpt devices` needs from the machine;
// ckpt.CUDASystem is the real one, tests pass a fake.
type devicesSource = ckpt.DeviceSource

func newDevicesCmd(s *streams) *cobra.Command {
	return devicesCommand(s, ckpt.CUDASystem{}, os.LookupEnv)
}

func devicesCommand(s *streams, src devicesSource, lookup func(string) (string, bool)) *cobra.Command {
	opts := &devicesOptions{}
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the NVIDIA GPUs this process can use, and why not if none",
		Long: `devices reports whether an NVIDIA driver is installed, its release and the
newest CUDA version it supports, and every GPU visible to this process: ordinal
(cuda:N), name, compute capability, total and free memory, PCI bus id and UUID
(MIG-... for a MIG instance). A GPU that fails (busy in exclusive-process
mode, too full for a context, faulted) is listed with its own error; the
others are listed as usual. It ends with how CUDA_VISIBLE_DEVICES and
CUDA_DEVICE_ORDER shape that list.

The driver is loaded at run time (libcuda.so.1, or the library that
CKPT_LIBCUDA names); no CUDA toolkit is needed. The list comes from attribute
queries; only reading free memory creates each GPU's primary context for a
moment.

A machine without a driver or without a visible GPU is a normal answer, not a
failure: devices prints why and exits 0. It exits 1 only if it cannot write
its report (or is interrupted), and 2 on usage errors.`,
		Example: `  # What can ckpt upload to on this machine?
  ckpt devices

  # The same as one JSON object (see docs/cli-json.md, "devices")
  ckpt devices --json

  # Check what a job restricted to two GPUs will see
  CUDA_VISIBLE_DEVICES=2,3 ckpt devices`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src := src
			if lib, ok := lookup(envLibCUDA); ok && lib != "" {
				if _, system := src.(ckpt.CUDASystem); system {
					src = ckpt.CUDASystem{Library: lib}
				}
			}
			return runDevices(cmd.Context(), s.Out, *opts, src, ckpt.CUDAEnvironment(lookup))
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON object instead of text")
	return cmd
}

// The report's types are the library's; these names keep the tests' decoding.
type (
	devicesReport  = ckpt.DevicesReport
	devicesGPUJSON = ckpt.GPUReport
)

// runDevices gathers the report from src and env and writes it to w.
func runDevices(ctx context.Context, w io.Writer, opts devicesOptions, src devicesSource, env ckpt.CUDAEnv) error {
	rep, err := ckpt.Devices(ctx, src, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeDevicesText(w, *rep, env)
}

func writeDevicesText(w io.Writer, rep devicesReport, env ckpt.CUDAEnv) error {
	var b strings.Builder
	switch {
	case !rep.Driver.Found:
		b.WriteString("NVIDIA driver: not found\n")
		fmt.Fprintf(&b, "  %s\n", rep.Error.Message)
		b.WriteString("  ckpt can still read, inspect, remap and convert checkpoints; only uploads to a GPU need the driver.\n")
	default:
		release := rep.Driver.Release
		if release == "" {
			release = "release unknown"
		}
		supports := rep.Driver.CUDAVersion
		if supports == "" {
			supports = "unknown"
		}
		fmt.Fprintf(&b, "NVIDIA driver: %s (supports CUDA %s)\n", release, supports)
		if rep.Driver.Library != "" {
			fmt.Fprintf(&b, "  library %s\n", rep.Driver.Library)
		}
		switch ckpt.ReleaseSource(rep.Driver.ReleaseSource) {
		case ckpt.ReleaseNVML:
			b.WriteString("  release from NVML\n")
		case ckpt.ReleaseLibraryFile:
			b.WriteString("  release from the library's file name (the user-space driver; no kernel module reported one)\n")
		}
		if !rep.Driver.KernelModule && len(rep.Devices) == 0 {
			b.WriteString("  no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing): the driver's library is installed, " +
				"but no GPU driver is running (a machine without a GPU, or a container started without GPUs: docker run --gpus all)\n")
		}
	}
	if rep.Driver.Found {
		if len(rep.Devices) == 0 {
			b.WriteString("\nDevices: none visible\n")
		} else {
			fmt.Fprintf(&b, "\nDevices: %d visible\n", len(rep.Devices))
		}
		for _, d := range rep.Devices {
			if d.Name == "" && d.Error != nil {
				fmt.Fprintf(&b, "  cuda:%d  (cannot be described)\n", d.Ordinal)
				fmt.Fprintf(&b, "          error: %s\n", d.Error.Message)
				continue
			}
			fmt.Fprintf(&b, "  cuda:%d  %s\n", d.Ordinal, d.Name)
			free := "free unknown"
			if d.FreeMemoryBytes != nil {
				free = human.Bytes(int64(*d.FreeMemoryBytes)) + " free"
			}
			fmt.Fprintf(&b, "          compute capability %s, memory %s total, %s\n",
				d.ComputeCapability, human.Bytes(int64(d.TotalMemoryBytes)), free)
			fmt.Fprintf(&b, "          PCI %s  %s\n", d.PCIBusID, d.UUID)
			if d.Error != nil {
				fmt.Fprintf(&b, "          error: %s\n", d.Error.Message)
			}
		}
		if e := rep.Error; e != nil {
			fmt.Fprintf(&b, "  %s\n", e.Message)
		}
	}
	b.WriteString("\nEnvironment:\n")
	for _, line := range env.Explain() {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
