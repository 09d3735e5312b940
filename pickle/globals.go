package pickle

import (
	"fmt"
	"strings"
	"sync"
)

// classKind says what a resolved global may do.
type classKind uint8

const (
	kindValue   classKind = iota // harmless value (dtype, layout, storage class, type); not callable
	kindFunc                     // implemented here by a Go function
	kindObject                   // benign data class: calls are recorded as *Object
	kindForeign                  // unknown: calls are recorded as *Foreign
)

// hookEnv is state shared by the callables of one Unpickle call.
type hookEnv struct {
	// budget is the number of elements the hooks may still copy. Arguments
	// can be shared through the memo, so copying them on every call could
	// otherwise grow quadratically with the input.
	budget   int64
	total    int64 // the initial budget, for messages
	depth    int   // nesting of hook calls (_rebuild_from_type_v2 calls another)
	maxDepth int
}

func (rt *hookEnv) charge(n int) error {
	rt.budget -= int64(n)
	if rt.budget < 0 {
		return limitErr("", "elements copied by rebuild calls (twice the input size)", rt.total-rt.budget, rt.total)
	}
	return nil
}

type hookFunc func(rt *hookEnv, args []any) (any, error)

// pyClass is a resolved global as it lives on gopickle's stack.
type pyClass struct {
	module, name string
	kind         classKind
	fn           hookFunc
	rt           *hookEnv
}

func (c *pyClass) String() string { return c.module + "." + c.name }

// Call implements gopickle's types.Callable (REDUCE, OBJ, INST).
func (c *pyClass) Call(args ...any) (any, error) {
	switch c.kind {
	case kindFunc:
		c.rt.depth++
		defer func() { c.rt.depth-- }()
		if c.rt.depth > c.rt.maxDepth {
			return nil, fmt.Errorf("%w: rebuild calls nested deeper than %d", ErrLimit, c.rt.maxDepth)
		}
		return c.fn(c.rt, args)
	case kindObject, kindForeign:
		if args == nil {
			args = []any{}
		}
		return &pyObj{cls: c, args: args}, nil
	}
	return nil, malformed("%s is not callable", c)
}

// PyNew implements gopickle's types.PyNewable (NEWOBJ, NEWOBJ_EX). ckpt
// does not distinguish cls.__new__(cls, *args) from cls(*args).
func (c *pyClass) PyNew(args ...any) (any, error) { return c.Call(args...) }

// pyObj is an instance of a kindObject or kindForeign class.
type pyObj struct {
	cls       *pyClass
	args      []any
	state     any
	dictItems []DictEntry
	listItems []any
}

// PySetState implements BUILD: the state is recorded, never applied.
func (o *pyObj) PySetState(state any) error { o.state = state; return nil }

// Set records SETITEM(S) on an instance of a dict subclass.
func (o *pyObj) Set(k, v any) { o.dictItems = append(o.dictItems, DictEntry{k, v}) }

// Append records APPEND(S) on an instance of a list subclass.
func (o *pyObj) Append(v any) { o.listItems = append(o.listItems, v) }

// pyDict is a dict-like object made by a known class (OrderedDict, Counter, ...).
type pyDict struct {
	class   string
	entries []DictEntry
	state   any
}

// Set implements SETITEM(S).
func (d *pyDict) Set(k, v any) { d.entries = append(d.entries, DictEntry{k, v}) }

// PySetState implements BUILD (torch's state dicts carry _metadata this way).
func (d *pyDict) PySetState(state any) error { d.state = state; return nil }

// pySet is a set or frozenset in stream order.
type pySet struct {
	items  []any
	frozen bool
}

// Add implements ADDITEMS.
func (s *pySet) Add(v any) { s.items = append(s.items, v) }

// pyTensor wraps a tensor on the stack; BUILD on a tensor is ignored.
// state holds _rebuild_from_type_v2's attributes until conversion.
type pyTensor struct {
	t     *Tensor
	state any
}

// PySetState implements BUILD on a tensor by ignoring the state, which only
// sets Python attributes.
func (p *pyTensor) PySetState(any) error { return nil }

// Module spellings that protocol-2 pickles use for Python 3 modules
// (the inverse of Python's fix_imports mapping, for the modules that matter).
var moduleAliases = map[string]string{
	"__builtin__": "builtins",
	"copy_reg":    "copyreg",
	"exceptions":  "builtins",
	"commands":    "subprocess",
	"cPickle":     "pickle",
}

// unsafeModules can run code, touch files or the network, or reach
// arbitrary attributes. Submodules are included.
var unsafeModules = []string{
	"os", "posix", "nt", "sys", "subprocess", "_posixsubprocess", "shutil", "socket", "_socket",
	"importlib", "imp", "zipimport", "pkgutil", "pickle", "_pickle", "cPickle", "dill", "cloudpickle",
	"runpy", "code", "codeop", "pty", "webbrowser", "marshal", "ctypes", "_ctypes", "multiprocessing",
	"commands", "popen2", "platform", "signal", "threading", "_thread", "thread", "asyncio", "io", "_io",
	"codecs", "types", "operator", "_operator", "bdb", "pdb", "timeit", "trace", "profile", "cProfile",
	"doctest", "tempfile", "glob", "fileinput", "shelve", "dbm", "sqlite3", "urllib", "urllib2", "http",
	"httplib", "ftplib", "smtplib", "telnetlib", "requests", "setuptools", "distutils", "pip", "venv",
	"ensurepip", "gc", "inspect", "sysconfig", "site", "_frozen_importlib", "_frozen_importlib_external", "_imp",
	// Found by the public scanner corpora (docs/scan-corpora.md): shell
	// helpers, mail and news clients that connect, subinterpreters,
	// pagers, the test suite's script helpers, logging handlers that open
	// files and sockets, and HTTP clients.
	"_aix_support", "_osx_support", "imaplib", "poplib", "nntplib", "smtpd", "_pyrepl", "test", "logging",
	"mailcap", "_interpreters", "_xxsubinterpreters", "interpreters", "concurrent", "socketserver", "wsgiref",
	"cgi", "cgitb", "compileall", "py_compile", "zipapp", "sched", "_winapi", "winreg", "msvcrt",
	"aiohttp", "urllib3", "httpx", "paramiko", "boto3", "botocore", "websocket", "websockets", "mlflow",
}

// builtinsAllowed is the whole allowlist for the builtins module; every
// other builtin (eval, exec, compile, open, getattr, __import__, ...) is unsafe.
var builtinsAllowed = sync.OnceValue(func() map[string]classKind {
	return map[string]classKind{
		"int": kindValue, "float": kindValue, "str": kindValue, "bool": kindValue, "bytes": kindValue,
		"dict": kindValue, "list": kindValue, "tuple": kindValue, "object": kindValue, "type": kindValue,
		"Ellipsis": kindValue, "NotImplemented": kindValue,
		"set": kindFunc, "frozenset": kindFunc, "bytearray": kindFunc, "complex": kindFunc,
		"slice": kindObject, "range": kindObject,
	}
})

// objectClasses are benign data classes that real checkpoints carry; their
// construction is recorded as *Object. Built on first use, as are this
// package's other large tables (start-up, issue 35).
var objectClasses = sync.OnceValue(func() map[string]bool {
	return addDCPClasses(map[string]bool{
		"argparse.Namespace": true,
		"numpy.ndarray":      true, "numpy.dtype": true,
		"numpy.core.multiarray._reconstruct": true, "numpy._core.multiarray._reconstruct": true,
		"numpy.core.multiarray.scalar": true, "numpy._core.multiarray.scalar": true,
		"numpy.core.numeric._frombuffer": true, "numpy._core.numeric._frombuffer": true,
		"numpy.random._pickle.__randomstate_ctor": true, "numpy.random._pickle.__bit_generator_ctor": true,
		"numpy.random._pickle.__generator_ctor": true, "numpy.random.__RandomState_ctor": true,
		"datetime.datetime": true, "datetime.date": true, "datetime.time": true,
		"datetime.timedelta": true, "datetime.timezone": true,
		"pathlib.Path": true, "pathlib.PosixPath": true, "pathlib.WindowsPath": true,
		"pathlib.PurePath": true, "pathlib.PurePosixPath": true, "pathlib.PureWindowsPath": true,
		"decimal.Decimal": true, "fractions.Fraction": true, "uuid.UUID": true, "collections.deque": true,
	})
})

// funcs maps module.name to the Go implementation of known callables.
var funcs = sync.OnceValue(func() map[string]hookFunc {
	return map[string]hookFunc{
		"torch._utils._rebuild_tensor":                        rebuildTensor,
		"torch._utils._rebuild_tensor_v2":                     rebuildTensorV2,
		"torch._utils._rebuild_tensor_v3":                     rebuildTensorV3,
		"torch._utils._rebuild_parameter":                     rebuildParameter,
		"torch._utils._rebuild_parameter_with_state":          rebuildParameterWithState,
		"torch._utils._rebuild_qtensor":                       rebuildQTensor,
		"torch._utils._rebuild_sparse_tensor":                 rebuildSparse,
		"torch._utils._rebuild_sparse_csr_tensor":             rebuildSparse,
		"torch._utils._rebuild_nested_tensor":                 rebuildNested,
		"torch.nested._internal.nested_tensor._rebuild_njt":   rebuildNJT,
		"torch._utils._rebuild_meta_tensor_no_storage":        rebuildMeta,
		"torch._utils._rebuild_wrapper_subclass":              rebuildWrapperSubclass,
		"torch._utils._rebuild_device_tensor_from_numpy":      rebuildFromNumpy,
		"torch._utils._rebuild_xla_tensor":                    rebuildFromNumpy,
		"torch._utils._rebuild_mtia_tensor":                   rebuildFromNumpy,
		"torch._utils._rebuild_device_tensor_from_cpu_tensor": rebuildFromCPUTensor,
		"torch._tensor._rebuild_from_type":                    rebuildFromType,
		"torch._tensor._rebuild_from_type_v2":                 rebuildFromType,
		"torch.nn.parameter.Parameter":                        newParameter,
		"torch.nn.Parameter":                                  newParameter,
		"torch.Size":                                          newSize,
		"torch.device":                                        newDevice,
		"torch.serialization._get_layout":                     getLayout,
		"collections.OrderedDict":                             dictMaker("collections.OrderedDict"),
		"collections.Counter":                                 dictMaker("collections.Counter"),
		"collections.defaultdict":                             newDefaultDict,
		"builtins.set":                                        setMaker(false),
		"builtins.frozenset":                                  setMaker(true),
		"builtins.bytearray":                                  newByteArray,
		"builtins.complex":                                    newComplex,
		"_codecs.encode":                                      codecsEncode,
		"copyreg._reconstructor":                              reconstructor,
		"copyreg.__newobj__":                                  newObj,
	}
})

// tensorClasses are torch's tensor class globals (values, e.g. the new_type
// of _rebuild_from_type_v2).
var tensorClasses = map[string]bool{"torch.Tensor": true, "torch._tensor.Tensor": true}

func normalizeModule(m string) string {
	if a, ok := moduleAliases[m]; ok {
		return a
	}
	return m
}

func isUnsafe(module, name string) bool {
	if module == "builtins" {
		_, ok := builtinsAllowed()[name]
		return !ok
	}
	for _, m := range unsafeModules {
		if module == m || strings.HasPrefix(module, m+".") {
			return true
		}
	}
	return false
}

// resolve classifies module.name. It never imports or runs anything.
func resolve(module, name string, rt *hookEnv) (*pyClass, error) {
	mod := normalizeModule(module)
	if isUnsafe(mod, name) {
		return nil, &UnsafeError{Module: mod, Name: name}
	}
	c := &pyClass{module: mod, name: name, kind: kindForeign, rt: rt}
	full := mod + "." + name
	switch {
	case funcs()[full] != nil:
		c.kind, c.fn = kindFunc, funcs()[full]
	case mod == "builtins":
		c.kind = builtinsAllowed()[name]
		if c.kind == kindFunc {
			c.fn = funcs()[full]
		}
	case objectClasses()[full]:
		c.kind = kindObject
	case legacyTensorClass(mod, name):
		d, _ := legacyTensorDType(mod, name)
		c.kind, c.fn = kindFunc, legacyTensorMaker(full, d)
	case tensorClasses[full]:
		// torch.Tensor() is an empty tensor of the default dtype
		// (float32); old pickles reduce through it like torch.FloatTensor.
		// As a value (_rebuild_from_type_v2's new_type) it stays a Global.
		c.kind, c.fn = kindFunc, legacyTensorMaker(full, "float32")
	case tensorClasses[full], isDTypeGlobal(mod, name), storageDTypes(mod, name) != nil,
		mod == "torch" && (layouts[name] || qschemes[name]):
		c.kind = kindValue
	}
	return c, nil
}

// internalClass makes one of the helpers the rewritten stream calls.
func internalClass(name string, rt *hookEnv) *pyClass {
	c := &pyClass{module: "\x00ckpt", name: name, kind: kindFunc, rt: rt}
	switch name {
	case "long":
		c.fn = decodeLong
	case "set":
		c.fn = setMaker(false)
	}
	return c
}

func legacyTensorClass(module, name string) bool {
	_, ok := legacyTensorDType(module, name)
	return ok
}
