package ckpt

import (
	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Option configures Open and Load. Options that concern only Load are
// ignored by Open.
type Option func(*config)

type config struct {
	open      []statedict.Option
	rules     remap.Rules
	rulesText string
	rulesErr  error
	remap     []remap.Option
	strict    bool
	verify    bool
	dryRun    bool
	progress  func(Progress)
	filter    func(name string) bool
	workers   int
	maxHost   int64
	mapFiles  bool
	inv       cuda.Inventory
	driver    *cuda.Driver
	env       *cuda.Env
	rank      int
	world     int
	split     []statedict.SplitRule
	store     func(*objstore.Store)
}

func newConfig(opts []Option) *config {
	c := &config{verify: true}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// WithRank makes Load load only the part of the checkpoint that rank holds
// in a tensor-parallel group of world ranks (statedict.RankCheckpoint):
// each tensor a rule splits is cut to its torch.chunk range along the rule's
// dimension, reading only those bytes; other tensors load whole. Names are
// unchanged. rules come from ParseSplitRules. A rank outside [0, world)
// makes Load fail.
func WithRank(rank, world int, rules []SplitRule) Option {
	return func(c *config) { c.rank, c.world, c.split = rank, world, rules }
}

// WithObjectStore calls fn with the object store a URL source was opened
// through (for its request count, Store.Requests); it is not called for a
// local source.
func WithObjectStore(fn func(*objstore.Store)) Option {
	return func(c *config) { c.store = fn }
}

// WithMapLocation sets where tensors go, in torch's map_location forms as
// typed on a command line (remap.Parse): "cpu", "cuda:1", or SRC=DST pairs
// such as "cuda:1=cuda:0,cuda:0=cuda:1". A string that does not parse makes
// Load fail with an error matching remap.ErrSyntax or remap.ErrDevice
// (*remap.RuleError). Without a map location tensors go where they were
// saved (map_location=None).
func WithMapLocation(rules string) Option {
	return func(c *config) {
		c.rulesText = rules
		c.rules, c.rulesErr = remap.Parse(rules, c.remap...)
	}
}

// WithRules sets where tensors go as remap.Rules (remap.To, remap.Dict,
// remap.Func), for callers that build them in code.
func WithRules(r remap.Rules) Option {
	return func(c *config) { c.rules, c.rulesText, c.rulesErr = r, r.String(), nil }
}

// WithRemapOptions passes options to the planner (remap.WithBackend,
// remap.WithCurrentDevice). Give it before WithMapLocation.
func WithRemapOptions(opts ...remap.Option) Option {
	return func(c *config) { c.remap = append(c.remap, opts...) }
}

// WithStrict makes Load refuse (*StrayError, ErrStray) a checkpoint with
// stray tensors: CPU tensors in a checkpoint at home on an accelerator, or
// a small minority on another accelerator (remap.DetectStrays), judged
// among the selected tensors.
func WithStrict() Option { return func(c *config) { c.strict = true } }

// WithoutVerify skips the checksum kernel that verifies uploaded bytes in
// GPU memory. Zip CRC32s and save-time digests are checked regardless.
func WithoutVerify() Option { return func(c *config) { c.verify = false } }

// WithDryRun makes Load plan and stop: no pre-flight, nothing read. The
// Model holds every selected tensor's metadata and target, and no data.
func WithDryRun() Option { return func(c *config) { c.dryRun = true } }

// Stage names a phase of Load in Progress.
type Stage string

// The stages that report progress.
const (
	StageHost   Stage = "load"   // reading CPU tensors into host memory
	StageUpload Stage = "upload" // reading and uploading GPU tensors
)

// Progress is one progress report: Done of Total bytes of Stage.
type Progress struct {
	Stage Stage
	Done  int64
	Total int64
}

// WithProgress has fn called as data is read (every few MiB) with the
// bytes done so far of each stage. Calls are serialised within a stage but
// come from loading goroutines: fn must be quick.
func WithProgress(fn func(Progress)) Option { return func(c *config) { c.progress = fn } }

// WithFilter loads only the tensors whose name keep accepts; the others are
// neither planned, checked nor read. Quantizer scale and zero-point
// storages follow their tensor.
func WithFilter(keep func(name string) bool) Option { return func(c *config) { c.filter = keep } }

// WithConcurrency sets how many storages are read at once into host
// memory, and how many goroutines hash each staging buffer of an upload
// (default GOMAXPROCS).
func WithConcurrency(n int) Option { return func(c *config) { c.workers = n } }

// WithFileMapping makes Load take the CPU tensors' storages held
// uncompressed in local files from a private, copy-on-write mapping of the
// file instead of copying them into new memory (devicecopy.WithFileMapping):
// the way torch.load(mmap=True) and safetensors load, at the cost of reading
// the file and no more. The bytes are checked and hashed all the same. The
// mapped data is valid until Model.Close and no longer; a later change to
// the file may show through it. From an object store (s3://, gs://, az://,
// https://) the storages are received into a memory file that the data
// maps, with the same lifetime (devicecopy.WithFileMapping).
func WithFileMapping() Option { return func(c *config) { c.mapFiles = true } }

// WithMaxHostBytes refuses (devicecopy.ErrHostLimit) a load whose CPU
// tensors need more than n bytes of host memory, before anything is
// allocated. By default the limit is the memory available.
func WithMaxHostBytes(n int64) Option { return func(c *config) { c.maxHost = n } }

// WithOpenOptions passes options to statedict.Open (limits, temporary
// directory for decompression, ...).
func WithOpenOptions(opts ...statedict.Option) Option {
	return func(c *config) { c.open = append(c.open, opts...) }
}

// WithDriver uploads through d, and lists GPUs for the pre-flight with it,
// instead of the system's libcuda.so.1 (cuda.OpenLibrary loads
// another driver library).
func WithDriver(d *cuda.Driver) Option {
	return func(c *config) {
		c.driver = d
		if d != nil {
			c.inv = d
		}
	}
}

// WithInventory sets what the pre-flight asks for the visible GPUs
// (default cuda.System{}); tests pass a fake.
func WithInventory(inv cuda.Inventory) Option { return func(c *config) { c.inv = inv } }

// WithEnv sets the environment the pre-flight explains GPU visibility with
// (CUDA_VISIBLE_DEVICES...); default cuda.Environment(os.LookupEnv).
func WithEnv(env cuda.Env) Option { return func(c *config) { c.env = &env } }

// Rules say where tensors go (remap.Rules): ParseMapLocation reads them
// as typed on a command line, WithRules applies them.
type Rules = remap.Rules

// RuleError is a map location that does not parse (remap.RuleError); it
// matches remap.ErrSyntax or remap.ErrDevice.
type RuleError = remap.RuleError

// ParseMapLocation parses rules in torch's map_location forms, as
// WithMapLocation does, for a caller that reports a bad value itself
// before loading. Its errors are *RuleError.
func ParseMapLocation(rules string) (Rules, error) { return remap.Parse(rules) }
