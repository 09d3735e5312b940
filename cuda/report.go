package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ReportSource is what NewDevicesReport needs from the machine: the device
// inventory plus a description of the driver. System is the real one.
type ReportSource interface {
	Inventory
	Driver(ctx context.Context) (DriverInfo, error)
}

// DevicesReport is `ckpt devices --json`, documented in docs/cli-json.md
// ("devices"): the driver, every visible GPU and the environment.
type DevicesReport struct {
	Driver      DriverReport `json:"driver"`
	Devices     []GPUReport  `json:"devices"`
	Error       *ErrorReport `json:"error"`
	Environment EnvReport    `json:"environment"`
}

// DriverReport is the report's "driver": whether a driver library loaded,
// its release and where that was read, the newest CUDA version it supports,
// the library file and whether an NVIDIA kernel module is loaded.
type DriverReport struct {
	Found         bool   `json:"found"`
	Release       string `json:"release"`
	ReleaseSource string `json:"release_source"`
	CUDAVersion   string `json:"cuda_version"`
	Library       string `json:"library"`
	KernelModule  bool   `json:"kernel_module"`
}

// GPUReport is one entry of the report's "devices": a visible GPU as
// DeviceInfo describes it, free memory null where it could not be measured,
// and its own error, if any.
type GPUReport struct {
	Ordinal           int          `json:"ordinal"`
	Name              string       `json:"name"`
	ComputeCapability string       `json:"compute_capability"`
	TotalMemoryBytes  uint64       `json:"total_memory_bytes"`
	FreeMemoryBytes   *uint64      `json:"free_memory_bytes"`
	PCIBusID          string       `json:"pci_bus_id"`
	UUID              string       `json:"uuid"`
	MIG               bool         `json:"mig"`
	Error             *ErrorReport `json:"error"`
}

// ErrorReport is an error in the report: its kind ("no_driver",
// "driver_too_old", "no_device", "cuda" or "other"), message and, for a
// CUDA error, the call, CUresult code, name and hint.
type ErrorReport struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Op      string `json:"op,omitempty"`
	Code    int    `json:"code,omitempty"`
	Name    string `json:"name,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// EnvReport is the report's "environment": CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER as set (null when unset) and what CUDA makes of them
// (see Env).
type EnvReport struct {
	CUDAVisibleDevices *string       `json:"cuda_visible_devices"`
	CUDADeviceOrder    *string       `json:"cuda_device_order"`
	EffectiveOrder     string        `json:"effective_order"`
	Visible            []EnvIDReport `json:"visible"`
	InvalidEntry       *string       `json:"invalid_entry"`
	IgnoredEntries     []string      `json:"ignored_entries"`
	HidesAll           bool          `json:"hides_all"`
	Notes              []string      `json:"notes"`
}

// EnvIDReport is one visible entry of CUDA_VISIBLE_DEVICES (see
// VisibleID); index is null unless it is a device index.
type EnvIDReport struct {
	Ordinal int    `json:"ordinal"`
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Index   *int   `json:"index"`
}

// NewDevicesReport describes the driver and every GPU src sees, and how
// env (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) shapes that list: what
// `ckpt devices` prints. A missing driver or GPU is a normal answer in the
// report; the error is only the context's.
func NewDevicesReport(ctx context.Context, src ReportSource, env Env) (*DevicesReport, error) {
	rep := &DevicesReport{Devices: []GPUReport{}, Environment: envReport(env)}
	info, err := src.Driver(ctx)
	rep.Driver.Release, rep.Driver.ReleaseSource = info.Release, string(info.ReleaseSource)
	rep.Driver.Library, rep.Driver.KernelModule = info.Library, info.KernelModule
	if info.CUDAVersion > 0 {
		rep.Driver.CUDAVersion = info.CUDAVersion.String()
	}
	rep.Driver.Found = !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrDriverTooOld)
	if err == nil {
		var devs []DeviceInfo
		devs, err = src.Devices(ctx)
		reader, _ := src.(FreeMemoryReader)
		for _, d := range devs {
			if ctx.Err() != nil {
				break
			}
			// The driver tells a MIG instance by its two UUIDs (see
			// DeviceInfo); where it cannot, a MIG entry of
			// CUDA_VISIBLE_DEVICES for this ordinal says the same.
			if id := d.Ordinal; !d.MIG && id >= 0 && id < len(env.IDs) && env.IDs[id].Kind == IDMIG {
				if rest, ok := strings.CutPrefix(d.UUID, "GPU-"); ok {
					d.MIG, d.UUID = true, "MIG-"+rest
				}
			}
			if d.Err == nil && !d.FreeKnown && reader != nil {
				free, ferr := reader.FreeMemory(ctx, d.Ordinal)
				if ferr != nil {
					d.Err = fmt.Errorf("free memory unknown: %w", ferr)
				} else {
					d.FreeMemory, d.FreeKnown = free, true
				}
			}
			j := GPUReport{
				Ordinal:  d.Ordinal,
				Name:     d.Name,
				PCIBusID: d.PCIBusID,
				UUID:     d.UUID,
				MIG:      d.MIG,
			}
			if d.Name != "" || d.Err == nil {
				j.ComputeCapability = fmt.Sprintf("%d.%d", d.ComputeCapability[0], d.ComputeCapability[1])
				j.TotalMemoryBytes = d.TotalMemory
			}
			if d.FreeKnown {
				free := d.FreeMemory
				j.FreeMemoryBytes = &free
			}
			if d.Err != nil {
				j.Error = errorReport(d.Err)
			}
			rep.Devices = append(rep.Devices, j)
		}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		rep.Error = errorReport(err)
	}
	return rep, nil
}

func errorReport(err error) *ErrorReport {
	e := &ErrorReport{Kind: "other", Message: err.Error()}
	var ce *CUDAError
	switch {
	case errors.Is(err, ErrNoDriver) && !errors.As(err, &ce):
		e.Kind = "no_driver"
	case errors.Is(err, ErrDriverTooOld):
		e.Kind = "driver_too_old"
	case errors.As(err, &ce):
		e.Kind = "cuda"
		if errors.Is(err, ErrNoDevice) {
			e.Kind = "no_device"
		}
		e.Op, e.Code, e.Name, e.Hint = ce.Op, ce.Code, ce.Name, ce.Hint
	}
	return e
}

func envReport(env Env) EnvReport {
	j := EnvReport{
		EffectiveOrder: env.Order,
		Visible:        []EnvIDReport{},
		IgnoredEntries: []string{},
		HidesAll:       env.HidesAll,
		Notes:          append([]string{}, env.Notes...),
	}
	if env.VisibleSet {
		j.CUDAVisibleDevices = &env.Visible
	}
	if env.OrderSet {
		j.CUDADeviceOrder = &env.OrderRaw
	}
	if env.Hidden != nil {
		j.InvalidEntry = &env.Invalid
		j.IgnoredEntries = append(j.IgnoredEntries, env.Hidden...)
	}
	for _, id := range env.IDs {
		e := EnvIDReport{Ordinal: id.Ordinal, ID: id.ID, Kind: id.Kind.String()}
		if id.Kind == IDIndex {
			e.Index = &id.Index
		}
		j.Visible = append(j.Visible, e)
	}
	return j
}
