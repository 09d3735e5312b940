package pickle

import (
	"strings"
	"sync"
)

// What a component of a dotted global can be, whatever module it is
// reached through (issue 34 item 1). Protocol 4 resolves
// STACK_GLOBAL('random', '_os.system') attribute by attribute: random's
// `import os as _os` makes it os.system. A module's private alias of
// another module, and a final name that runs commands, opens files or
// imports modules, say what the global is without importing anything.

// privateAliases are the module-level `import X as _Y` and `from M import
// N as _Y` of CPython 3.11's standard library and torch 2.6 whose alias is
// not X with underscores in front (those are found by stripping them):
// scripts/gen_scan_advisories.py lists them all from the sources and
// proves each reachable in CPython.
var privateAliases = map[string]string{
	"_builtin_open":       "builtins.open",              // bz2, tokenize
	"_pyprofile":          "profile",                    // cProfile
	"_bootstrap":          "_frozen_importlib",          // importlib, zipimport
	"_bootstrap_external": "_frozen_importlib_external", // importlib, zipimport
	"_interpreters":       "_xxsubinterpreters",         // test.support.interpreters
	"_winreg":             "winreg",                     // mimetypes
	"_osp":                "os.path",                    // torch.utils
	"_util":               "multiprocessing.util",       // torch.multiprocessing._atfork
}

// fromAliases are the `from M import N as _Y` of the same sources whose
// M.N is unsafe, by the module that holds the alias: collections'
// _itemgetter is operator.itemgetter. (A name like _index is too common
// to read as operator.index in every module; so are torch's _osp and _util.)
var fromAliases = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"_pyio._setmode":                  "msvcrt.setmode",
		"_strptime._thread_allocate_lock": "_thread.allocate_lock",
		"collections._eq":                 "operator.eq",
		"collections._itemgetter":         "operator.itemgetter",
		"datetime._index":                 "operator.index",
		"dis._opcodes_all":                "opcode.__all__",
		"enum._or_":                       "operator.or_",
		"hashlib._warn":                   "warnings.warn",
		"ntpath._LCMAP_LOWERCASE":         "_winapi.LCMAP_LOWERCASE",
		"ntpath._LCMapStringEx":           "_winapi.LCMapStringEx",
		"ntpath._LOCALE_NAME_INVARIANT":   "_winapi.LOCALE_NAME_INVARIANT",
		"ntpath._nt_readlink":             "nt.readlink",
		"pprint._StringIO":                "io.StringIO",
		"random._index":                   "operator.index",
		"random._urandom":                 "os.urandom",
		"random._warn":                    "warnings.warn",
		// torch 2.6 (_osp and _util are `import X as _Y`, too common a name to read alone)
		"torch.utils._osp":                              "os.path",
		"torch.multiprocessing._atfork._util":           "multiprocessing.util",
		"torch.backends.mps._lru_cache":                 "functools.lru_cache",
		"torch.backends.opt_einsum._lru_cache":          "functools.lru_cache",
		"torch.backends.xeon.run_cpu._DefaultLogsSpecs": "torch.distributed.elastic.multiprocessing.DefaultLogsSpecs",
	}
})

// runnerNames are final names that run commands, open or delete files,
// or import modules in every module that defines them (os, posix,
// subprocess, shutil, pty, importlib, pkgutil, webbrowser, urllib, ...):
// on any module path, a global ending in one is unsafe, since a module's
// attribute may be another module's function it imported.
var runnerNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"system": true, "open": true, "fdopen": true, "remove": true, "removedirs": true, "unlink": true,
		"rmdir": true, "rmtree": true, "import_module": true, "__import__": true, "resolve_name": true,
		"import_string": true, "load_module": true, "load_source": true, "run_path": true, "run_module": true,
		"getoutput": true, "getstatusoutput": true, "check_output": true, "check_call": true, "eval": true,
		"urlopen": true, "urlretrieve": true, "startfile": true, "kill": true, "killpg": true, "putenv": true,
		"chmod": true, "chown": true,
	}
})

// runnerPrefixes are name prefixes of the same families: os.execv,
// os.spawnlp, os.posix_spawn, os.fork/forkpty, os.popen, subprocess.Popen,
// multiprocessing.util.spawnv_passfds, _posixsubprocess.fork_exec.
var runnerPrefixes = []string{"exec", "spawn", "posix_spawn", "fork", "popen", "Popen"}

// runnerName reports whether name (undotted) runs commands, opens files or
// imports modules wherever it is defined.
func runnerName(name string) bool {
	if runnerNames()[name] {
		return true
	}
	for _, p := range runnerPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// aliasTarget returns what the component part of a dotted name, reached
// through the module or object path within, is when it is a private
// alias: fromAliases, privateAliases, or an unsafe module's name with
// underscores in front (_os, _sys, _subprocess, _shutil, _warnings,
// __os). "" when it is none.
func aliasTarget(within, part string) string {
	if t, ok := fromAliases()[within+"."+part]; ok {
		return t
	}
	if t, ok := privateAliases[part]; ok {
		return t
	}
	if !strings.HasPrefix(part, "_") || strings.HasSuffix(part, "__") {
		return ""
	}
	if m := strings.TrimLeft(part, "_"); m != "" && unsafeModuleName(m) {
		return m
	}
	return ""
}

// unsafeModuleName reports whether m (one component) is a module that is
// unsafe as a whole: on unsafeModules, or a module-wide entry of scanUnsafe.
func unsafeModuleName(m string) bool {
	if isUnsafe(m, "") {
		return true
	}
	for _, p := range scanUnsafe {
		if p == m {
			return true
		}
	}
	return false
}
