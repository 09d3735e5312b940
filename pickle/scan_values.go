package pickle

// aval is what the validating pass knows about a stack slot: for a
// string (so that STACK_GLOBAL can be resolved statically), the offset of
// the opcode that pushed it (scanner.strAt reads it again), or past
// 2 GiB an index into scanner.strs; for the object a global resolved to,
// the global's index; for what calling a global on torch's weights_only
// allowlist built (a tensor, a storage, a torch.Size, ...), that global's
// index; and whether a value is a dict, known not to be one (notStr), or
// of unknown type (opaqueVal), for SETITEM's check (see checkSetItem).
// Nothing is kept per string pushed.
type aval int32

const (
	// notStr: neither a string nor a dict (a number, list, tuple, set,
	// storage, None, ...). Without Globals' audit, every value that is no
	// string or global.
	notStr aval = -1
	// dictVal: a dict (EMPTY_DICT, DICT, or what dictClasses build).
	dictVal aval = -2
	// opaqueVal: of unknown type: what a global not on torch's
	// weights_only allowlist, or a computed callable, built.
	opaqueVal aval = -3
	// strFloor and below: strings of scanner.strs (strFloor - v); from
	// strFloor+1 to -4: globals (even distance from -4) and what calling
	// them built (odd).
	strFloor aval = -1 << 30
)

// maxGlobals bounds the distinct globals of one pickle, so that their
// slots stay above strFloor.
const maxGlobals = 1 << 28

// globalAval marks a slot holding the object the idx-th global resolved
// to (a module, class or function, as imported), for BUILD's check.
func globalAval(idx int) aval { return aval(-4 - 2*idx) }

// builtAval marks a slot holding what calling the idx-th global built,
// when that global is on torch's allowlist and builds no dict.
func builtAval(idx int) aval { return aval(-5 - 2*idx) }

// global returns the index of the global a slot holds, if it holds one.
func (v aval) global() (int, bool) {
	if v <= -4 && v > strFloor && (-4-v)%2 == 0 {
		return int((-4 - v) / 2), true
	}
	return 0, false
}

// built returns the index of the global whose call built the slot's
// value, if builtAval marks it.
func (v aval) built() (int, bool) {
	if v <= -5 && v > strFloor && (-5-v)%2 == 0 {
		return int((-5 - v) / 2), true
	}
	return 0, false
}

// isStr reports whether a slot holds a string.
func (v aval) isStr() bool { return v >= 0 || v <= strFloor }

// kept is the slot of a container after APPEND(S), SETITEM(S) or
// ADDITEMS changed it in place: the same, but for a string (which has no
// such method: the loader fails there).
func (v aval) kept() aval {
	if v.isStr() {
		return notStr
	}
	return v
}

// dictClasses are the globals whose call builds a dict: the targets of
// SETITEM(S) that Python's pickler writes for dict subclasses it knows.
var dictClasses = map[string]bool{
	"collections.OrderedDict": true, "collections.Counter": true, "collections.defaultdict": true, "builtins.dict": true,
}

// madeBy is what calling the idx-th global, module.name, builds: a dict
// for dictClasses; for any other global torch's weights_only unpickler
// allows (tensor rebuilds, storage classes, torch.Size, set, ...), a value
// that is no dict; for the rest a value of unknown type, which their own
// findings already rate (a model's dict subclass is one).
func madeBy(module, name string, idx int) aval {
	if dictClasses[normalizeModule(module)+"."+name] {
		return dictVal
	}
	if v, _ := Classify(module, name); v == VerdictAllowed {
		return builtAval(idx)
	}
	return opaqueVal
}

// resultOf is the slot of what calling the value in slot c builds
// (REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST).
func (s *scanner) resultOf(c aval) aval {
	if g, ok := c.global(); ok && s.audit != nil {
		return s.made[g]
	}
	if s.audit == nil {
		return notStr
	}
	return opaqueVal
}

// checkSetItem records, in Globals' audit, a SETITEM or SETITEMS applied
// to slot t when t is not known to be a dict or of unknown type. Python's
// pickler writes them to dicts only; torch < 2.10's weights_only
// unpickler applies them to whatever is on the stack, a tensor or storage
// included, which writes into its memory (CVE-2026-24747; torch 2.10
// accepts dict, OrderedDict and Counter only).
func (s *scanner) checkSetItem(t aval) {
	if s.audit == nil || t == dictVal || t == opaqueVal {
		return
	}
	const cve = "torch < 2.10's weights_only unpickler applies it anyway, writing into a tensor's or storage's memory (CVE-2026-24747); no pickler writes it"
	g := GlobalUse{Offset: int64(s.start), Op: opTable[s.data[s.start]].name, Verdict: VerdictUnsafe}
	if i, ok := t.global(); ok {
		c := s.prog.globals[i]
		g.Module, g.Name = c.module, c.name
		g.Reason = g.Op + " applied to the imported object itself (a module, class, function or module-level value), which changes what the module holds; " + cve
	} else if i, ok := t.built(); ok {
		c := s.prog.globals[i]
		g.Module, g.Name = c.module, c.name
		g.Reason = g.Op + " applied to what " + c.String() + " built, which is no dict: " + cve
	} else {
		g.Dynamic = true
		g.Reason = g.Op + " applied to a value that is no dict (a list, tuple, number, string, storage or None): " + cve
	}
	*s.audit = append(*s.audit, g)
}
