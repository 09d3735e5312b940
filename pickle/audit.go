package pickle

import (
	"strconv"
	"strings"
	"sync"
)

// Verdict classifies a global a pickle imports.
type Verdict string

// The verdicts, from harmless to dangerous. Only VerdictAllowed globals are
// ones torch.load(weights_only=True) itself accepts.
const (
	// VerdictAllowed: what torch's weights_only unpickler allows (tensor
	// rebuild functions, dtypes, storage classes, OrderedDict, torch.Size,
	// torch.device, set, _codecs.encode, ...).
	VerdictAllowed Verdict = "allowed"
	// VerdictData: benign data classes that ckpt keeps as opaque values
	// (argparse.Namespace, numpy arrays and scalars, datetime, pathlib) and
	// constructors of plain containers. torch.load(weights_only=False)
	// would import and call them; none runs code of the file.
	VerdictData Verdict = "data"
	// VerdictUnsafe: can run code, import modules, reach arbitrary
	// attributes or touch files, processes or the network.
	VerdictUnsafe Verdict = "unsafe"
	// VerdictUnknown: not on any list; torch.load would import and possibly
	// call it. Model and user classes land here, and so does every global
	// whose name is computed while unpickling.
	VerdictUnknown Verdict = "unknown"
)

// GlobalUse is one global a pickle imports, found without running it.
type GlobalUse struct {
	Offset  int64  // byte offset of the opcode in the pickle
	Op      string // GLOBAL, INST or STACK_GLOBAL
	Module  string // as written (before mapping Python 2 names); "" when Dynamic
	Name    string
	Dynamic bool // STACK_GLOBAL whose module or name is not a string constant of the pickle
	Verdict Verdict
	Reason  string
	// Incomplete marks a finding that says a reading was cut short (the
	// resume-point readings' budget): part of the pickle was not read
	// as a loader may read it, so a scanner must not call it read in full.
	Incomplete bool
}

// recordGlobal appends the global of the current opcode to the audit.
func (s *scanner) recordGlobal(module, name string, dynamic bool) {
	g := GlobalUse{Offset: int64(s.start), Op: opTable[s.data[s.start]].name, Module: module, Name: name, Dynamic: dynamic}
	if dynamic {
		g.Verdict, g.Reason = VerdictUnknown, "module or name computed while unpickling (not a string constant)"
	} else {
		g.Verdict, g.Reason = Classify(module, name)
	}
	*s.audit = append(*s.audit, g)
}

// maxCrossings bounds the frame ends Globals scans from again.
const maxCrossings = 32

// recordBuild records a BUILD whose object is an imported global itself.
func (s *scanner) recordBuild(idx int) {
	c := s.prog.globals[idx]
	*s.audit = append(*s.audit, GlobalUse{Offset: int64(s.start), Op: "BUILD", Module: c.module, Name: c.name, Verdict: VerdictUnsafe,
		Reason: "BUILD sets attributes of the imported object itself (a module, class or function): what later globals resolve to changes"})
}

// Globals lists every global the pickle at the start of data imports
// (GLOBAL, INST, and STACK_GLOBAL, whose operands are traced through the
// stack and the memo), in stream order, with a verdict each. Nothing is
// built or called: unsafe globals are listed, not refused, and the walk
// goes on to the end of the pickle. It returns the bytes the pickle
// occupies through STOP. A stream that is not a valid pickle, or exceeds
// lim, returns the globals found so far and the error (an *OpError).
func Globals(data []byte, lim Limits) ([]GlobalUse, int, error) {
	var c config
	WithLimits(lim)(&c)
	out, crossings, end, err := globalsOnce(data, c.limits)
	// An opcode that reaches past the end of its FRAME is read two ways:
	// linearly, as here, and by Python's C unpickler reading a buffered
	// file, which resumes at the frame's end. Python's pickler never
	// writes one; both readings are listed.
	if len(crossings) > 0 {
		out = append(out, GlobalUse{Offset: int64(crossings[0]), Op: "FRAME", Verdict: VerdictUnknown, Dynamic: true,
			Reason: "an opcode reaches past the end of its FRAME, which Python's pickler never writes: loaders disagree on what follows, and each reading is scanned"})
	}
	out = append(out, reread(data, c.limits, crossings)...)
	if err != nil {
		return out, 0, err
	}
	return out, end, nil
}

// globalsOnce is Globals without the second reading from frame ends: the
// globals, the frame ends crossed, the end of the pickle and the error.
func globalsOnce(data []byte, lim Limits) ([]GlobalUse, []int, int, error) {
	var out []GlobalUse
	s := newScanner(data, lim)
	s.audit = &out
	s.noEmit = true // nothing runs the rewritten stream
	if _, err := s.run(-1); err != nil {
		return out, s.crossings, 0, err
	}
	return out, s.crossings, s.prog.end, nil
}

// scanUnsafe are globals outside unsafeModules that published exploits
// and scanner bypasses use to run code; the loader already refuses to call
// them (they are not on the allowlist), the audit names them unsafe.
var scanUnsafe = []string{
	"torch.utils.collect_env", "torch._inductor", "torch.hub", "torch.jit", "torch.package",
	"torch.utils.cpp_extension", "torch.utils.bottleneck", "torch._dynamo", "torch.fx",
	"torch.serialization.load", "torch.load", "torch.serialization._load", "torch._C._jit",
	"torch.distributed.rpc", "torch.testing", "numpy.testing", "numpy.load", "numpy.lib.npyio",
	"numpy.f2py", "numpy.distutils", "functools", "_functools", "copy", "weakref",
	"asyncore", "ssl", "select", "selectors", "mmap", "resource", "fcntl", "xmlrpc", "logging.config",
	"idlelib", "lib2to3", "pydoc", "ensurepip", "uuid._get_command_stdout", "ctypes", "cffi",
	"IPython", "jinja2", "yaml", "joblib", "torch.utils.data.datapipes", "pandas.io", "keras", "tensorflow",
	"zipfile", "tarfile", "tty", "termios",
	// Imports any module by name (warnings._getcategory, which
	// _setoption calls); tempfile and hmac hold it as _warnings.
	"warnings",
	// Loaders nested in a load: each unpickles (or executes) other data
	// with no allowlist of its own.
	"torch.storage._load_from_bytes", "torch.utils.model_zoo", "torch.multiprocessing.reductions",
	"torch.distributed.checkpoint", "numpy.lib.format",
	"pandas.read_pickle", "torch.utils.checkpoint",
	// Compilers, config loaders and model loaders that fetch or run code.
	"torch.compile", "torch.utils._config_module", "torch.distributed.elastic", "torch._export", "torch.export",
	"transformers.models.auto", "transformers.dynamic_module_utils", "huggingface_hub", "diffusers.utils.dynamic_modules_utils",
}

// harmlessBuiltins are builtin functions that compute a value from their
// arguments and reach nothing else; scan rates them data (ckpt's loader
// still calls none of them).
var harmlessBuiltins = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"len": true, "abs": true, "min": true, "max": true, "sum": true, "round": true, "divmod": true, "hex": true,
		"oct": true, "bin": true, "chr": true, "ord": true, "all": true, "any": true, "isinstance": true,
		"issubclass": true, "callable": true, "ascii": true,
	}
})

// dataFuncs are callables ckpt implements that torch's weights_only
// loader does not allow; they only build plain values.
var dataFuncs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"collections.Counter": true, "collections.defaultdict": true, "copyreg._reconstructor": true,
		"copyreg.__newobj__": true, "builtins.slice": true, "builtins.range": true, "builtins.type": true,
		"builtins.object": true, "builtins.Ellipsis": true, "builtins.NotImplemented": true,
		"builtins.bytearray": true, "builtins.complex": true,
	}
})

// Classify returns the verdict on module.name and why. It looks only at
// the name: it never imports anything.
//
// A dotted name (protocol 4 and later look names up attribute by
// attribute: module "torch.serialization" with name "os.system" is
// os.system, reached through the os module torch.serialization imports) is
// judged by everything it can resolve to: unsafe when any tail of the path
// names an unsafe global or when it walks a dunder attribute (__globals__,
// __class__, ...), which reaches arbitrary objects; at best unknown
// otherwise, since what an attribute of a module is cannot be known
// without importing it.
//
// Whatever the module, a component that is a module's private alias of an
// unsafe module or function (random's _os, bz2's _builtin_open) is read as
// what it aliases, and a final name that runs commands, opens or deletes
// files or imports modules (system, popen, exec*, spawn*, open, rmtree,
// import_module, ...) is unsafe: a module's attribute may be another
// module's function it imported.
func Classify(module, name string) (Verdict, string) {
	if strings.Contains(name, ".") {
		return classifyDotted(normalizeModule(module), name)
	}
	v, why := classifyName(module, name)
	if v != VerdictUnsafe {
		if av, awhy := classifyAlias(normalizeModule(module), []string{name}); av == VerdictUnsafe {
			return av, awhy
		}
	}
	return v, why
}

// classifyAlias judges each component of parts that is a private alias
// (aliasTarget) as what it aliases, followed by the rest of the path.
func classifyAlias(mod string, parts []string) (Verdict, string) {
	for k, p := range parts {
		t := aliasTarget(strings.Join(append([]string{mod}, parts[:k]...), "."), p)
		if t == "" {
			continue
		}
		full := strings.Join(append([]string{t}, parts[k+1:]...), ".")
		i := strings.LastIndexByte(full, '.')
		var v Verdict
		var why string
		if i < 0 {
			v, why = VerdictUnknown, ""
			if unsafeModuleName(full) {
				v, why = VerdictUnsafe, "names the module "+full+" itself"
			}
		} else {
			v, why = classifyName(full[:i], full[i+1:])
		}
		if v == VerdictUnsafe {
			return v, "reached through " + mod + ", whose " + p + " is a private alias of " + t + ", it is " + full + ": " + why
		}
	}
	return VerdictUnknown, ""
}

// classifyDotted judges module + dotted name; see Classify.
func classifyDotted(mod, name string) (Verdict, string) {
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" || strings.HasPrefix(p, "__") {
			return VerdictUnsafe, "dotted name walks attribute " + strconv.Quote(p) + " of " + mod + ", which reaches arbitrary objects"
		}
	}
	if v, why := classifyName(mod, name); v == VerdictUnsafe {
		return v, why
	}
	if v, why := classifyAlias(mod, parts); v == VerdictUnsafe {
		return v, "dotted name " + why
	}
	// Every tail of the path as a global of its own: a module's
	// attribute may be another module it imports (torch.serialization.os).
	for k := 0; k < len(parts)-1; k++ {
		m, n := strings.Join(parts[k:len(parts)-1], "."), parts[len(parts)-1]
		if v, why := classifyName(m, n); v == VerdictUnsafe {
			return v, "dotted name resolved through " + mod + " reaches " + m + "." + n + ": " + why
		}
	}
	return VerdictUnknown, "dotted name resolved attribute by attribute through " + mod + ": on no list"
}

// classifyName judges module.name with a plain (undotted) name.
func classifyName(module, name string) (Verdict, string) {
	mod := normalizeModule(module)
	full := mod + "." + name
	if mod == "builtins" && harmlessBuiltins()[name] {
		return VerdictData, "a builtin that only computes a value from its arguments"
	}
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") && funcs()[full] == nil && !dataFuncs()[full] {
		return VerdictUnsafe, "names the module's dunder attribute " + strconv.Quote(name) + ", which reaches its namespace or internals"
	}
	if mod == "torch.serialization" && funcs()[full] == nil {
		// Everything in torch.serialization but the layout helper the
		// weights_only loader allows opens or unpickles other data.
		return VerdictUnsafe, "can load other files or pickles (torch.serialization)"
	}
	if isUnsafe(mod, name) {
		return VerdictUnsafe, "can run code or touch the system (" + mod + ")"
	}
	if runnerName(name) {
		return VerdictUnsafe, "named " + strconv.Quote(name) + ", which runs commands, opens or deletes files or imports modules wherever it is defined (" + mod + " may have imported it)"
	}
	for _, p := range scanUnsafe {
		if mod == p || strings.HasPrefix(mod, p+".") || full == p || strings.HasPrefix(full, p+".") {
			return VerdictUnsafe, "can run code or load other files (" + p + ")"
		}
	}
	switch {
	case dataFuncs()[full]:
		return VerdictData, "builds a plain value; not in torch's weights_only allowlist"
	case funcs()[full] != nil, tensorClasses[full], mod == "builtins":
		return VerdictAllowed, "in torch's weights_only allowlist"
	case isDTypeGlobal(mod, name), storageDTypes(mod, name) != nil, mod == "torch" && (layouts[name] || qschemes[name]):
		return VerdictAllowed, "in torch's weights_only allowlist"
	case (mod == "torch" || mod == "torch.cuda") && strings.HasSuffix(name, "Tensor") &&
		storageClasses()[strings.TrimSuffix(name, "Tensor")+"Storage"] != "":
		return VerdictAllowed, "a legacy tensor type (torch < 0.4), used as a value"
	case objectClasses()[full]:
		return VerdictData, "benign data class, kept as an opaque value"
	}
	return VerdictUnknown, "not on the allowlist: torch.load would import it and may call it"
}

// StorageClassDType returns the torch dtype name of a storage class global
// (torch.FloatStorage is "float32"; torch.UntypedStorage is "" with ok
// true), for readers that must skip a storage's bytes by its class.
func StorageClassDType(module, name string) (string, bool) {
	d := storageDTypes(normalizeModule(module), name)
	if d == nil {
		return "", false
	}
	return *d, true
}
