package pickle

// argument encodings of opcodes, as pickletools names them.
type argKind uint8

const (
	argNone    argKind = iota
	argU1              // uint1
	argU2              // uint2
	argI4              // int4
	argU4              // uint4
	argF8              // float8
	argU8              // uint8 (FRAME)
	argLine            // one newline-terminated line
	argLine2           // two lines (GLOBAL, INST)
	argBytes1          // uint1 length + data
	argBytes4          // uint4 length + data
	argBytes4s         // int4 length + data (negative is an error)
	argBytes8          // uint8 length + data
)

type opInfo struct {
	name string
	arg  argKind
}

// opTable lists every opcode of pickle protocols 0 to 5.
var opTable = [256]opInfo{
	'(': {"MARK", argNone}, '.': {"STOP", argNone}, '0': {"POP", argNone},
	'1': {"POP_MARK", argNone}, '2': {"DUP", argNone}, 'F': {"FLOAT", argLine},
	'I': {"INT", argLine}, 'J': {"BININT", argI4}, 'K': {"BININT1", argU1},
	'L': {"LONG", argLine}, 'M': {"BININT2", argU2}, 'N': {"NONE", argNone},
	'P': {"PERSID", argLine}, 'Q': {"BINPERSID", argNone}, 'R': {"REDUCE", argNone},
	'S': {"STRING", argLine}, 'T': {"BINSTRING", argBytes4s}, 'U': {"SHORT_BINSTRING", argBytes1},
	'V': {"UNICODE", argLine}, 'X': {"BINUNICODE", argBytes4}, 'a': {"APPEND", argNone},
	'b': {"BUILD", argNone}, 'c': {"GLOBAL", argLine2}, 'd': {"DICT", argNone},
	'}': {"EMPTY_DICT", argNone}, 'e': {"APPENDS", argNone}, 'g': {"GET", argLine},
	'h': {"BINGET", argU1}, 'i': {"INST", argLine2}, 'j': {"LONG_BINGET", argU4},
	'l': {"LIST", argNone}, ']': {"EMPTY_LIST", argNone}, 'o': {"OBJ", argNone},
	'p': {"PUT", argLine}, 'q': {"BINPUT", argU1}, 'r': {"LONG_BINPUT", argU4},
	's': {"SETITEM", argNone}, 't': {"TUPLE", argNone}, ')': {"EMPTY_TUPLE", argNone},
	'u': {"SETITEMS", argNone}, 'G': {"BINFLOAT", argF8},
	0x80: {"PROTO", argU1}, 0x81: {"NEWOBJ", argNone}, 0x82: {"EXT1", argU1},
	0x83: {"EXT2", argU2}, 0x84: {"EXT4", argU4}, 0x85: {"TUPLE1", argNone},
	0x86: {"TUPLE2", argNone}, 0x87: {"TUPLE3", argNone}, 0x88: {"NEWTRUE", argNone},
	0x89: {"NEWFALSE", argNone}, 0x8a: {"LONG1", argBytes1}, 0x8b: {"LONG4", argBytes4s},
	'B': {"BINBYTES", argBytes4}, 'C': {"SHORT_BINBYTES", argBytes1},
	0x8c: {"SHORT_BINUNICODE", argBytes1}, 0x8d: {"BINUNICODE8", argBytes8},
	0x8e: {"BINBYTES8", argBytes8}, 0x8f: {"EMPTY_SET", argNone}, 0x90: {"ADDITEMS", argNone},
	0x91: {"FROZENSET", argNone}, 0x92: {"NEWOBJ_EX", argNone}, 0x93: {"STACK_GLOBAL", argNone},
	0x94: {"MEMOIZE", argNone}, 0x95: {"FRAME", argU8},
	0x96: {"BYTEARRAY8", argBytes8}, 0x97: {"NEXT_BUFFER", argNone}, 0x98: {"READONLY_BUFFER", argNone},
}

const (
	highestProtocol = 5
	// maxNameLen bounds module and attribute names of globals; real ones are
	// far shorter, and the bound keeps global resolution linear.
	maxNameLen = 1024
	// maxIntDigits mirrors Python's limit on int() of a decimal string,
	// which protocol-0 INT and LONG go through.
	maxIntDigits = 4300
)
