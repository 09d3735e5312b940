package devicecopy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
)

// Sentinel errors of the load pre-flight. Every error Preflight returns
// for a plan that cannot be carried out matches ErrPreflight and one of the
// others; the typed errors below carry the facts.
var (
	// ErrPreflight matches every pre-flight refusal.
	ErrPreflight = errors.New("devicecopy: pre-flight failed")
	// ErrPreflightNoCUDA: the plan sends tensors to a GPU but CUDA cannot
	// be used (no driver, a driver too old, or one that fails to start).
	// See *NoCUDAError.
	ErrPreflightNoCUDA = errors.New("devicecopy: pre-flight: CUDA is not available")
	// ErrPreflightMissingDevice: a target GPU is not visible to this
	// process. See *MissingDeviceError.
	ErrPreflightMissingDevice = errors.New("devicecopy: pre-flight: target device does not exist")
	// ErrPreflightMemory: a target has less free memory than it must
	// receive. See *MemoryError.
	ErrPreflightMemory = errors.New("devicecopy: pre-flight: not enough free memory")
	// ErrPreflightUnsupported: a target is of a device type ckpt cannot
	// load to (only cpu and cuda are supported). See *UnsupportedError.
	ErrPreflightUnsupported = errors.New("devicecopy: pre-flight: unsupported target device")
	// ErrPreflightDevice: a target GPU exists but cannot be used (busy in
	// exclusive-process mode, no memory left for a context, faulted). See
	// *DeviceError.
	ErrPreflightDevice = errors.New("devicecopy: pre-flight: target device cannot be used")
)

// VerifyReserve is the device memory pre-flight keeps free on each target
// GPU beyond the arena: the checksum module, the two streams and the
// rounding of the arena allocation to the driver's 2 MiB pages.
const VerifyReserve = 8 << 20

// DeviceNeed returns an upper bound of the device memory an upload of u
// (one entry of remap.Plan.Devices) takes on its GPU: the arena (each
// storage at a 256-byte aligned offset, then 8 bytes of checksum per
// 64 KiB chunk of each storage) plus VerifyReserve. It saturates at the
// largest int64.
func DeviceNeed(u remap.DeviceUse) int64 {
	const most = math.MaxInt64
	if u.Bytes < 0 || u.Storages < 0 {
		return most
	}
	storages := uint64(u.Storages)
	padding := storages * (arenaAlign - 1)
	chunks := uint64(u.Bytes)/digest.ChunkSize + storages
	total := uint64(u.Bytes) + padding + chunks*8 + 2*arenaAlign + VerifyReserve
	if storages > maxArena || total > maxArena || total < uint64(u.Bytes) {
		return most
	}
	return int64(total)
}

// PreflightReport is what a successful pre-flight found: per target
// device, what it must receive and what it has.
type PreflightReport struct {
	Targets []TargetCheck     // one per target device of the plan, in the plan's order
	Devices []cuda.DeviceInfo // the visible GPUs; nil when no target is a GPU
	Env     cuda.Env          // the CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER reading used
}

// TargetCheck is one target device of a plan with its memory.
type TargetCheck struct {
	Device remap.Device
	// Needed is the memory the target must have free: the bytes the plan
	// puts there (each storage once) for the cpu; for a GPU, DeviceNeed:
	// those bytes plus alignment, checksums and VerifyReserve.
	Needed int64
	Data   int64  // bytes the plan puts there (each storage once)
	Free   uint64 // free bytes: device memory, or MemAvailable for the cpu
	Known  bool   // Free is known (false for the cpu where /proc/meminfo is unreadable)
	Name   string // the GPU's name; "" for the cpu
}

// NoCUDAError reports a plan that needs a GPU on a machine where CUDA cannot
// be used. It is the plain-words form of torch's "Attempting to
// deserialize object on a CUDA device but torch.cuda.is_available() is
// False". It matches ErrPreflight, ErrPreflightNoCUDA and the underlying
// error (cuda.ErrNoDriver, cuda.ErrDriverTooOld, a *cuda.CUDAError).
type NoCUDAError struct {
	Targets []remap.Device // the GPU targets of the plan
	Err     error          // why CUDA is unusable
}

// Error names the targets, the reason, and the map location that works.
func (e *NoCUDAError) Error() string {
	return fmt.Sprintf("devicecopy: pre-flight: the plan puts tensors on %s, but CUDA cannot be used on this machine: %v; "+
		"to load on the CPU instead use the map location %q (ckpt load --map-location cpu)",
		deviceList(e.Targets), e.Err, "cpu")
}

// Unwrap returns ErrPreflight, ErrPreflightNoCUDA and the reason.
func (e *NoCUDAError) Unwrap() []error { return []error{ErrPreflight, ErrPreflightNoCUDA, e.Err} }

// MissingDeviceError reports target GPUs this process cannot see. It is the
// plain-words form of torch's "Attempting to deserialize object on CUDA
// device 1 but torch.cuda.device_count() is 1". It matches ErrPreflight and
// ErrPreflightMissingDevice.
type MissingDeviceError struct {
	Missing []remap.Device // targets with no visible GPU, ascending
	Visible int            // how many GPUs this process sees
	Env     cuda.Env       // how CUDA_VISIBLE_DEVICES shaped that
	// Suggest is a map location (remap.Parse syntax) that sends every
	// tensor to a device that exists: the plan's own choices where they
	// exist, the missing ones moved to a visible GPU, or "cpu" when none
	// is visible.
	Suggest string
	Err     error // the inventory's error when it saw no GPU at all; nil otherwise
}

// Error names the missing devices, what is visible and why, and the fix.
func (e *MissingDeviceError) Error() string {
	var b strings.Builder
	verb := "does"
	if len(e.Missing) > 1 {
		verb = "do"
	}
	fmt.Fprintf(&b, "devicecopy: pre-flight: %s %s not exist: ", deviceList(e.Missing), verb)
	switch e.Visible {
	case 0:
		b.WriteString("this process sees no GPU")
	case 1:
		b.WriteString("this process sees 1 GPU (cuda:0)")
	default:
		fmt.Fprintf(&b, "this process sees %d GPUs (cuda:0 to cuda:%d)", e.Visible, e.Visible-1)
	}
	switch {
	case !e.Env.VisibleSet:
		b.WriteString("; " + cuda.EnvVisibleDevices + " is not set")
	case e.Env.HidesAll:
		fmt.Fprintf(&b, "; %s=%q hides every GPU (unset it to see them all)", cuda.EnvVisibleDevices, e.Env.Visible)
	default:
		fmt.Fprintf(&b, "; %s=%q makes only the listed GPUs visible, renumbered from cuda:0", cuda.EnvVisibleDevices, e.Env.Visible)
	}
	if e.Visible == 0 && e.Err != nil && !e.Env.HidesAll {
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	fmt.Fprintf(&b, "; this map location would work: %s", e.Suggest)
	return b.String()
}

// Unwrap returns ErrPreflight, ErrPreflightMissingDevice and, when the
// inventory saw no GPU, its error.
func (e *MissingDeviceError) Unwrap() []error {
	errs := []error{ErrPreflight, ErrPreflightMissingDevice}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// MemoryError reports targets with less free memory than the plan puts
// on them. It matches ErrPreflight and ErrPreflightMemory.
type MemoryError struct {
	Short []TargetCheck // the targets whose Needed exceeds Free
}

// Error lists needed versus free bytes per device.
func (e *MemoryError) Error() string {
	parts := make([]string, len(e.Short))
	for i, t := range e.Short {
		name := t.Device.String()
		if t.Name != "" {
			name += " (" + t.Name + ")"
		}
		parts[i] = fmt.Sprintf("%s needs %s but has %s free", name, sizeString(uint64(t.Needed)), sizeString(t.Free))
	}
	return "devicecopy: pre-flight: not enough free memory: " + strings.Join(parts, "; ") +
		"; free memory there, or send some tensors elsewhere with the map location"
}

// Unwrap returns ErrPreflight and ErrPreflightMemory.
func (e *MemoryError) Unwrap() []error { return []error{ErrPreflight, ErrPreflightMemory} }

// UnsupportedError reports targets of a device type ckpt cannot load to.
// It matches ErrPreflight and ErrPreflightUnsupported.
type UnsupportedError struct {
	Devices []remap.Device
}

// Error names the devices and what is supported.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("devicecopy: pre-flight: ckpt cannot load to %s: only cpu and cuda targets are supported", deviceList(e.Devices))
}

// Unwrap returns ErrPreflight and ErrPreflightUnsupported.
func (e *UnsupportedError) Unwrap() []error { return []error{ErrPreflight, ErrPreflightUnsupported} }

// DeviceError reports target GPUs that exist but could not be described or
// measured. Only the plan's targets are judged: a failing GPU the plan does
// not use is no error. It matches ErrPreflight, ErrPreflightDevice and each
// device's error.
type DeviceError struct {
	Failed []cuda.DeviceInfo // the failing targets, ascending, each with its Err
}

// Error names each failing device and why.
func (e *DeviceError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, d := range e.Failed {
		name := fmt.Sprintf("cuda:%d", d.Ordinal)
		if d.Name != "" {
			name += " (" + d.Name + ")"
		}
		parts[i] = fmt.Sprintf("%s: %v", name, d.Err)
	}
	return "devicecopy: pre-flight: a target GPU cannot be used: " + strings.Join(parts, "; ") +
		"; run `ckpt devices` to see every GPU, or send the tensors elsewhere with the map location"
}

// Unwrap returns ErrPreflight, ErrPreflightDevice and the devices' errors.
func (e *DeviceError) Unwrap() []error {
	errs := []error{ErrPreflight, ErrPreflightDevice}
	for _, d := range e.Failed {
		errs = append(errs, d.Err)
	}
	return errs
}

// Preflight checks, before any byte is read, that plan can be carried out
// here: every target is cpu or a GPU this process sees (inv lists them;
// env says how CUDA_VISIBLE_DEVICES shaped that list), each target GPU
// works, and every target has as much free memory as the plan needs there
// (TargetCheck.Needed). The inventory is asked only when a target is a
// GPU, and only the target GPUs are judged: another GPU that is busy or
// broken does not matter.
//
// The checks come in this order, and the first that fails is returned:
// unsupported device types (*UnsupportedError), CUDA unusable
// (*NoCUDAError), missing GPUs (*MissingDeviceError), target GPUs that
// fail (*DeviceError), memory (*MemoryError). Free GPU memory is as the
// inventory listed it or, where it did not, as inv measures it when it is a
// cuda.FreeMemoryReader (which needs a context on the target only); it is not
// checked where neither is known. The cpu's is MemAvailable of
// /proc/meminfo, not checked where that cannot be read. Errors from ctx are
// returned as they are.
func Preflight(ctx context.Context, plan *remap.Plan, inv cuda.Inventory, env cuda.Env) (*PreflightReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &PreflightReport{Env: env}
	var gpus, unsupported []remap.Device
	for _, u := range plan.Devices() {
		switch u.Device.Type {
		case "cpu":
		case "cuda":
			gpus = append(gpus, u.Device)
		default:
			unsupported = append(unsupported, u.Device)
		}
		t := TargetCheck{Device: u.Device, Needed: u.Bytes, Data: u.Bytes}
		if u.Device.Type == "cuda" {
			t.Needed = DeviceNeed(u)
		}
		rep.Targets = append(rep.Targets, t)
	}
	if len(unsupported) > 0 {
		return nil, &UnsupportedError{Devices: unsupported}
	}
	byOrdinal := map[int]cuda.DeviceInfo{}
	if len(gpus) > 0 {
		devs, err := inv.Devices(ctx)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		switch {
		case errors.Is(err, cuda.ErrNoDevice):
			return nil, missing(plan, gpus, nil, env, err)
		case err != nil:
			return nil, &NoCUDAError{Targets: gpus, Err: err}
		}
		rep.Devices = devs
		for _, d := range devs {
			byOrdinal[d.Ordinal] = d
		}
		if err := missing(plan, gpus, byOrdinal, env, nil); err != nil {
			return nil, err
		}
		if err := judgeTargets(ctx, gpus, inv, rep.Devices, byOrdinal); err != nil {
			return nil, err
		}
	}
	host, hostKnown := hostAvailable()
	var short []TargetCheck
	for i := range rep.Targets {
		t := &rep.Targets[i]
		if t.Device.Type == "cpu" {
			t.Free, t.Known = host, hostKnown
		} else {
			d := byOrdinal[t.Device.Index]
			t.Free, t.Known, t.Name = d.FreeMemory, d.FreeKnown, d.Name
		}
		if t.Known && uint64(t.Needed) > t.Free {
			short = append(short, *t)
		}
	}
	if len(short) > 0 {
		return nil, &MemoryError{Short: short}
	}
	return rep, nil
}

// judgeTargets measures the free memory of the target GPUs where the
// listing did not (updating devs and byOrdinal) and returns a *DeviceError
// for the targets that failed either.
func judgeTargets(ctx context.Context, gpus []remap.Device, inv cuda.Inventory, devs []cuda.DeviceInfo, byOrdinal map[int]cuda.DeviceInfo) error {
	reader, _ := inv.(cuda.FreeMemoryReader)
	var failed []cuda.DeviceInfo
	done := map[int]bool{}
	for _, g := range gpus {
		if done[g.Index] {
			continue
		}
		done[g.Index] = true
		d := byOrdinal[g.Index]
		if d.Err == nil && !d.FreeKnown && reader != nil {
			free, err := reader.FreeMemory(ctx, g.Index)
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			if err != nil {
				d.Err = err
			} else {
				d.FreeMemory, d.FreeKnown = free, true
			}
			byOrdinal[g.Index] = d
			for i := range devs {
				if devs[i].Ordinal == g.Index {
					devs[i] = d
				}
			}
		}
		if d.Err != nil {
			failed = append(failed, d)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Ordinal < failed[j].Ordinal })
	return &DeviceError{Failed: failed}
}

// missing returns a *MissingDeviceError when a GPU target has no visible
// device in visible (by ordinal), nil otherwise.
func missing(plan *remap.Plan, gpus []remap.Device, visible map[int]cuda.DeviceInfo, env cuda.Env, invErr error) error {
	var gone []remap.Device
	for _, d := range gpus {
		if _, ok := visible[d.Index]; !ok {
			gone = append(gone, d)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].Index < gone[j].Index })
	return &MissingDeviceError{Missing: gone, Visible: len(visible), Env: env, Suggest: suggest(plan, visible), Err: invErr}
}

// suggest builds a map location under which every tensor of plan lands on
// a device that exists: a tensor whose target is visible (or not a GPU)
// keeps it, one whose target GPU is missing moves to visible GPU number
// index mod count, or to the cpu when no GPU is visible. Written as one
// device when every tensor ends up on the same one, else as SRC=DST pairs
// of the saved tags, leaving out tags that stay where they were saved.
func suggest(plan *remap.Plan, visible map[int]cuda.DeviceInfo) string {
	ordinals := make([]int, 0, len(visible))
	for o := range visible {
		ordinals = append(ordinals, o)
	}
	sort.Ints(ordinals)
	pairs := map[string]string{}
	targets := map[string]bool{}
	placed := make([]remap.Entry, 0, len(plan.Entries)+len(plan.Storages))
	placed = append(placed, plan.Entries...)
	for _, v := range plan.Storages {
		placed = append(placed, remap.Entry{Name: v.Name, Source: v.Source, Target: v.Target})
	}
	for _, e := range placed {
		to := e.Target
		if _, ok := visible[to.Index]; to.Type == "cuda" && !ok {
			if len(ordinals) == 0 {
				to = remap.Device{Type: "cpu", Index: -1}
			} else {
				to = remap.Device{Type: "cuda", Index: ordinals[to.Index%len(ordinals)]}
			}
		}
		pairs[e.Source] = to.String()
		targets[to.String()] = true
	}
	if len(targets) == 1 {
		for t := range targets {
			return t
		}
	}
	// A tag that stays is left out, unless a bare key of its type ("cuda")
	// is written, which would match it too.
	stays := func(src, dst string) bool {
		saved, err := remap.ParseDevice(src)
		return err == nil && saved.String() == dst
	}
	bare := map[string]bool{}
	for src, dst := range pairs {
		if d, err := remap.ParseDevice(src); err == nil && d.Index < 0 && !stays(src, dst) {
			bare[d.Type] = true
		}
	}
	var out []string
	for src, dst := range pairs {
		if d, err := remap.ParseDevice(src); stays(src, dst) && err == nil && !bare[d.Type] {
			continue
		}
		out = append(out, src+"="+dst)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// hostAvailable returns MemAvailable of /proc/meminfo in bytes.
func hostAvailable() (uint64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > 1<<53 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// deviceList joins device names: "cuda:1", "cuda:1 and cuda:2", "a, b and c".
func deviceList(ds []remap.Device) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// sizeString renders bytes exactly and in GiB: "1073741824 bytes (1.00 GiB)".
func sizeString(n uint64) string {
	return fmt.Sprintf("%d bytes (%.2f GiB)", n, float64(n)/(1<<30))
}
