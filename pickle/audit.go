package pickle

import (
	"strings"
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
	var out []GlobalUse
	s := newScanner(data, c.limits)
	s.audit = &out
	if _, err := s.run(-1); err != nil {
		return out, 0, err
	}
	return out, s.prog.end, nil
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
}

// dataFuncs are callables ckpt implements that torch's weights_only
// loader does not allow; they only build plain values.
var dataFuncs = map[string]bool{
	"collections.Counter": true, "collections.defaultdict": true, "copyreg._reconstructor": true,
	"copyreg.__newobj__": true, "builtins.slice": true, "builtins.range": true, "builtins.type": true,
	"builtins.object": true, "builtins.Ellipsis": true, "builtins.NotImplemented": true,
	"builtins.bytearray": true, "builtins.complex": true,
}

// Classify returns the verdict on module.name and why. It looks only at
// the name: it never imports anything.
func Classify(module, name string) (Verdict, string) {
	mod := normalizeModule(module)
	full := mod + "." + name
	if isUnsafe(mod, name) {
		return VerdictUnsafe, "can run code or touch the system (" + mod + ")"
	}
	for _, p := range scanUnsafe {
		if mod == p || strings.HasPrefix(mod, p+".") || full == p || strings.HasPrefix(full, p+".") {
			return VerdictUnsafe, "can run code or load other files (" + p + ")"
		}
	}
	switch {
	case dataFuncs[full]:
		return VerdictData, "builds a plain value; not in torch's weights_only allowlist"
	case funcs[full] != nil, tensorClasses[full], mod == "builtins":
		return VerdictAllowed, "in torch's weights_only allowlist"
	case isDTypeGlobal(mod, name), storageDTypes(mod, name) != nil, mod == "torch" && (layouts[name] || qschemes[name]):
		return VerdictAllowed, "in torch's weights_only allowlist"
	case (mod == "torch" || mod == "torch.cuda") && strings.HasSuffix(name, "Tensor") &&
		storageClasses[strings.TrimSuffix(name, "Tensor")+"Storage"] != "":
		return VerdictAllowed, "a legacy tensor type (torch < 0.4), used as a value"
	case objectClasses[full]:
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
