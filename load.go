package ckpt

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Model is a loaded checkpoint: every selected tensor with its target
// device and either its bytes in host memory or its pointer on a GPU.
// Close frees both; tensor data must not be used afterwards.
type Model struct {
	// Checkpoint is the opened checkpoint: metadata, non-tensor values,
	// warnings. Load's Model closes it on Close; LoadCheckpoint's does not.
	Checkpoint *statedict.Checkpoint
	// Plan says where every selected tensor went (remap), with the strays.
	Plan *remap.Plan
	// Preflight is the pre-flight's report (nil with WithDryRun).
	Preflight *devicecopy.PreflightReport
	// Host holds the storages loaded into host memory: digests, CRC32
	// checks, timing (nil when no tensor goes to the cpu).
	Host *devicecopy.HostResult
	// Device holds the uploads to GPUs: arenas, digests, timings (nil when
	// no tensor goes to a GPU).
	Device *devicecopy.DeviceState
	// Tensors lists the selected tensors in the checkpoint's order.
	Tensors []*Tensor
	// Storages lists the selected storage values (storages saved as values
	// of their own) in the plan's order; see Storage.
	Storages []*Storage

	byName  map[string]*Tensor
	ownCk   bool
	src     string // the source given to Load
	rules   string // the rules, normalised
	dryRun  bool
	verify  bool  // on-device verification asked for
	failed  error // the verification failure Load returned with the Model
	mu      sync.Mutex
	closed  bool
	session *statedict.Checkpoint // the selected view given to devicecopy
}

// Load opens src (see Open), plans where every tensor goes, runs the
// pre-flight (every target device exists and has the memory it must
// receive) before reading any tensor data, then loads: CPU tensors into host
// memory, with each zip record's CRC32 checked and xxh64c digests computed;
// GPU tensors uploaded once per device and, unless WithoutVerify, verified
// on the device. Digests that `ckpt convert` saved with a safetensors file
// are compared with the bytes read (a *devicecopy.VerifyError of kind
// devicecopy.MismatchSaved on a mismatch).
//
// On error nothing stays allocated, except for a verification failure
// (errors.Is(err, devicecopy.ErrVerify)): then the Model is returned too,
// its GPU memory already freed, so that a caller can report what was
// checked; Close it.
func Load(ctx context.Context, src string, opts ...Option) (*Model, error) {
	cfg := newConfig(opts)
	if cfg.rulesErr != nil {
		return nil, cfg.rulesErr
	}
	ck, err := open(ctx, src, cfg)
	if err != nil {
		return nil, err
	}
	m, err := load(ctx, ck, cfg)
	if m == nil {
		ck.Close()
		return nil, err
	}
	m.ownCk, m.src = true, src
	return m, err
}

// LoadCheckpoint is Load for a checkpoint already opened (by Open, or by
// statedict.NewReader over any io.ReaderAt). The caller keeps ownership of
// ck: the Model's Close frees the loaded memory, not ck.
func LoadCheckpoint(ctx context.Context, ck *statedict.Checkpoint, opts ...Option) (*Model, error) {
	cfg := newConfig(opts)
	if cfg.rulesErr != nil {
		return nil, cfg.rulesErr
	}
	return load(ctx, ck, cfg)
}

// NewPlan returns where Load would put every selected tensor of ck, and
// every selected storage value (Plan.Storages), with the strays, reading no tensor data and checking no device. It honours
// WithMapLocation, WithRules, WithRemapOptions, WithFilter and WithStrict.
func NewPlan(ck *statedict.Checkpoint, opts ...Option) (*remap.Plan, error) {
	cfg := newConfig(opts)
	if cfg.rulesErr != nil {
		return nil, cfg.rulesErr
	}
	_, plan, err := makePlan(ck, cfg)
	return plan, err
}

// makePlan selects the tensors and plans them. The returned checkpoint is
// ck itself, or a shallow copy holding only the selected tensors (it must
// not be closed).
func makePlan(ck *statedict.Checkpoint, cfg *config) (*statedict.Checkpoint, *remap.Plan, error) {
	sel := ck
	if cfg.world > 0 {
		part, err := statedict.RankCheckpoint(ck, cfg.rank, cfg.world, cfg.split)
		if err != nil {
			return nil, nil, err
		}
		sel = part
	}
	if cfg.filter != nil {
		sub := *sel
		sub.Tensors = nil
		for _, t := range sel.Tensors {
			if cfg.filter(t.Name) {
				sub.Tensors = append(sub.Tensors, t)
			}
		}
		sel = &sub
	}
	// Storage values are placed as torch.load maps them; a rank's part
	// keeps them whole, as it keeps every value.
	vals := storageValues(ck, cfg.filter)
	if cfg.world > 0 && len(vals) > 0 {
		sel.Storages = append([]*statedict.Storage(nil), sel.Storages...)
		for _, v := range vals {
			sel.Storages = append(sel.Storages, v.Storage)
		}
	}
	ropts := append(append([]remap.Option(nil), cfg.remap...), remap.WithStorageValues(vals...))
	plan, err := remap.NewPlan(sel.Tensors, cfg.rules, ropts...)
	if err != nil {
		return nil, nil, err
	}
	if cfg.strict && len(plan.Strays) > 0 {
		return nil, nil, &StrayError{Strays: append([]remap.Stray(nil), plan.Strays...)}
	}
	return sel, plan, nil
}

func load(ctx context.Context, ck *statedict.Checkpoint, cfg *config) (*Model, error) {
	sel, plan, err := makePlan(ck, cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{Checkpoint: ck, Plan: plan, session: sel, rules: cfg.rules.String(), dryRun: cfg.dryRun, verify: cfg.verify}
	if cfg.dryRun {
		m.index()
		return m, nil
	}
	inv := cfg.inv
	if inv == nil {
		inv = cuda.System{}
	}
	env := cuda.Environment(os.LookupEnv)
	if cfg.env != nil {
		env = *cfg.env
	}
	if m.Preflight, err = devicecopy.Preflight(ctx, plan, inv, env); err != nil {
		return nil, err
	}
	saved, err := digest.ParseMetadata(ck.Metadata)
	if err != nil {
		return nil, err
	}
	// A weight read dequantized: the digest saved under its name is of
	// its stored codes (ckpt.Check checks those), not of the values loaded.
	for _, t := range ck.Tensors {
		if t.QuantStored != nil {
			delete(saved, t.Name)
		}
	}
	var cpu, gpu bool
	for _, u := range plan.Devices() {
		switch u.Device.Type {
		case "cpu":
			cpu = true
		case "cuda":
			gpu = true
		}
	}
	if cpu {
		hopts := []devicecopy.HostOption{devicecopy.WithConcurrency(cfg.workers)}
		if cfg.maxHost > 0 {
			hopts = append(hopts, devicecopy.WithMaxHostBytes(cfg.maxHost))
		}
		if cfg.mapFiles {
			hopts = append(hopts, devicecopy.WithFileMapping())
		}
		if cfg.progress != nil {
			hopts = append(hopts, devicecopy.WithProgress(func(done, total int64) {
				cfg.progress(Progress{Stage: StageHost, Done: done, Total: total})
			}))
		}
		if m.Host, err = devicecopy.LoadHost(ctx, sel, plan, hopts...); err != nil {
			return nil, err
		}
		if bad := hostSavedMismatches(m.Host, saved); len(bad) > 0 {
			m.Host.Mismatches = bad
			m.index()
			m.failed = &devicecopy.VerifyError{Mismatches: bad}
			return m, m.failed
		}
	}
	if gpu {
		uopts := []devicecopy.UploadOption{}
		if cfg.workers > 0 {
			uopts = append(uopts, devicecopy.WithHashConcurrency(cfg.workers))
		}
		if cfg.driver != nil {
			uopts = append(uopts, devicecopy.WithDriver(cfg.driver))
		}
		if !cfg.verify {
			uopts = append(uopts, devicecopy.WithoutVerify())
		}
		if len(saved) > 0 {
			uopts = append(uopts, devicecopy.WithSavedDigests(saved))
		}
		if cfg.progress != nil {
			uopts = append(uopts, devicecopy.WithUploadProgress(func(done, total int64) {
				cfg.progress(Progress{Stage: StageUpload, Done: done, Total: total})
			}))
		}
		m.Device, err = devicecopy.Upload(ctx, sel, plan, uopts...)
		if err != nil {
			if errors.Is(err, devicecopy.ErrVerify) {
				m.index()
				m.failed = err
				return m, err
			}
			if m.Host != nil {
				m.Host.Release()
			}
			return nil, err
		}
	}
	m.index()
	return m, nil
}

// hostSavedMismatches compares the digests of the storages read into host
// memory with the digests saved by tensor name.
func hostSavedMismatches(h *devicecopy.HostResult, saved map[string]digest.Value) []devicecopy.Mismatch {
	var out []devicecopy.Mismatch
	if len(saved) == 0 {
		return nil
	}
	for _, hs := range h.Storages {
		for _, name := range hs.Tensors {
			if want, ok := saved[name]; ok && want != hs.Digest {
				out = append(out, devicecopy.Mismatch{Kind: devicecopy.MismatchSaved, Storage: hs.Storage.Key,
					Tensors: []string{name}, Device: remap.Device{Type: "cpu", Index: -1}, Want: want, Got: hs.Digest})
			}
		}
	}
	return out
}

// index builds Tensors from the plan and the loaded data.
func (m *Model) index() {
	m.byName = make(map[string]*Tensor, len(m.Plan.Entries))
	m.Tensors = make([]*Tensor, 0, len(m.Plan.Entries))
	host := map[*statedict.Tensor]*devicecopy.HostTensor{}
	if m.Host != nil {
		for i := range m.Host.Tensors {
			host[m.Host.Tensors[i].Tensor] = &m.Host.Tensors[i]
		}
	}
	dev := map[string]*devicecopy.DeviceTensor{}
	if m.Device != nil {
		for i := range m.Device.Tensors {
			if _, dup := dev[m.Device.Tensors[i].Name]; !dup {
				dev[m.Device.Tensors[i].Name] = &m.Device.Tensors[i]
			}
		}
	}
	for i, e := range m.Plan.Entries {
		src := m.session.Tensors[i]
		t := &Tensor{Name: e.Name, Saved: e.Source, Device: e.Target, DType: src.DType, Shape: src.Shape,
			Strides: src.Strides, Offset: src.Offset, NBytes: src.NBytes(), Source: src, m: m,
			host: host[src]}
		if e.Target.Type == "cuda" {
			t.dev = dev[e.Name]
		}
		m.Tensors = append(m.Tensors, t)
		if _, dup := m.byName[e.Name]; !dup {
			m.byName[e.Name] = t
		}
	}
	m.indexStorages()
}

// Tensor returns the selected tensor with the given name (the first, should
// a checkpoint repeat a name).
func (m *Model) Tensor(name string) (*Tensor, bool) {
	t, ok := m.byName[name]
	return t, ok
}

// Close frees the host memory and the GPU memory of the load, and closes
// the checkpoint when Load opened it. It is safe to call twice.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if m.Host != nil {
		m.Host.Release()
	}
	if m.Device != nil {
		errs = append(errs, m.Device.Close())
	}
	if m.ownCk {
		errs = append(errs, m.Checkpoint.Close())
	}
	return errors.Join(errs...)
}

func (m *Model) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
