package remap

import (
	"strconv"
	"strings"
)

// MaxIndex is the largest device index accepted. torch stores a device
// index in an int8 (c10::DeviceIndex), so "cuda:128" cannot name a device.
const MaxIndex = 127

// Device is a device as torch.device spells it: a type and an optional index.
type Device struct {
	Type  string // "cpu", "cuda", "mps", "xpu", ...
	Index int    // -1 when the string has no ":N" part
}

// String returns torch's spelling: "cpu", "cuda", "cuda:1"; "" for the
// zero Device, which Map returns when no rule applies.
func (d Device) String() string {
	if d.Index < 0 || d.Type == "" {
		return d.Type
	}
	return d.Type + ":" + strconv.Itoa(d.Index)
}

// knownTypes are the device types torch.device accepts (torch 2.x
// c10::DeviceType names, which include every name torch 1.13 accepts).
var knownTypes = map[string]bool{
	"cpu": true, "cuda": true, "mps": true, "meta": true, "xpu": true, "hpu": true,
	"mtia": true, "privateuseone": true, "ipu": true, "xla": true, "lazy": true,
	"vulkan": true, "ve": true, "hip": true, "fpga": true, "maia": true, "ort": true,
	"mkldnn": true, "opengl": true, "opencl": true, "ideep": true,
}

// singleTypes have one device per process: an index on them adds nothing,
// and torch tags their storages without one.
var singleTypes = map[string]bool{"cpu": true, "mps": true, "meta": true}

// Option configures parsing (Parse, ParseDevice, Dict, Func) and planning
// (NewPlan). Each option says which functions honour it; others ignore it.
type Option func(*config)

type config struct {
	backends map[string]bool // private backend names accepted as device types
	current  map[string]int  // current index per type for bare devices in a plan
	values   []StorageValue  // storage values to place (WithStorageValues)
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithBackend accepts name as a device type in addition to torch's own, the
// way torch.utils.rename_privateuse1_backend makes torch.device accept it.
// The name must be a lowercase identifier; other names are ignored.
// Honoured by Parse, ParseDevice, Dict and Func.
func WithBackend(name string) Option {
	return func(c *config) {
		if !isIdent(name) {
			return
		}
		if c.backends == nil {
			c.backends = map[string]bool{}
		}
		c.backends[name] = true
	}
}

// WithCurrentDevice makes d the current device of its type: a bare target
// such as "cuda" then lands on d.Index instead of index 0, as torch sends
// map_location="cuda" to torch.cuda.current_device(). An index outside
// 0..MaxIndex is ignored. Honoured by NewPlan.
func WithCurrentDevice(d Device) Option {
	return func(c *config) {
		if d.Index < 0 || d.Index > MaxIndex || !isIdent(d.Type) {
			return
		}
		if c.current == nil {
			c.current = map[string]int{}
		}
		c.current[d.Type] = d.Index
	}
}

// ParseDevice parses a device string the way torch.device does: a lowercase
// type, optionally followed by ":N" with N a decimal index without sign or
// leading zeros (0..MaxIndex). The type must be one torch knows or one
// registered with WithBackend. Surrounding spaces are an error, as in torch.
// "cpu:0" is accepted and "cpu:1" refused, as in torch 2.x.
func ParseDevice(s string, opts ...Option) (Device, error) {
	return parseDevice(s, s, 0, newConfig(opts))
}

// parseDevice parses s, which starts at byte pos of input, strictly.
func parseDevice(input, s string, pos int, c *config) (Device, error) {
	d, err := parseTag(input, s, pos)
	if err != nil {
		return Device{}, err
	}
	if !knownTypes[d.Type] && !c.backends[d.Type] {
		return Device{}, &RuleError{Input: input, Pos: pos, Err: ErrDevice,
			Reason: "unknown device type " + strconv.Quote(d.Type)}
	}
	if d.Type == "cpu" && d.Index > 0 {
		return Device{}, &RuleError{Input: input, Pos: pos, Err: ErrDevice,
			Reason: "cpu has no device " + strconv.Itoa(d.Index) + " (only cpu or cpu:0)"}
	}
	return d, nil
}

// parseTag checks only the shape of a device string (type[:N]). Saved
// location tags are parsed with it: a file may name a private backend the
// caller never registered.
func parseTag(input, s string, pos int) (Device, error) {
	typ, idx, hasIdx := strings.Cut(s, ":")
	fail := func(at int, reason string) (Device, error) {
		return Device{}, &RuleError{Input: input, Pos: pos + at, Reason: reason, Err: ErrSyntax}
	}
	if s == "" {
		return fail(0, "empty device")
	}
	if !isIdent(typ) {
		return fail(0, "device type "+strconv.Quote(typ)+" is not a lowercase identifier [a-z][a-z0-9_]*")
	}
	if !hasIdx {
		return Device{Type: typ, Index: -1}, nil
	}
	at := len(typ) + 1
	switch {
	case idx == "":
		return fail(at, "missing device index after ':'")
	case strings.Trim(idx, "0123456789") != "":
		return fail(at, "device index "+strconv.Quote(idx)+" is not a decimal number")
	case len(idx) > 1 && idx[0] == '0':
		return fail(at, "device index "+strconv.Quote(idx)+" has a leading zero")
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n > MaxIndex {
		return Device{}, &RuleError{Input: input, Pos: pos + at, Err: ErrDevice,
			Reason: "device index " + strconv.Quote(idx) + " is above " + strconv.Itoa(MaxIndex)}
	}
	return Device{Type: typ, Index: n}, nil
}

// isIdent reports whether s matches [a-z][a-z0-9_]*.
func isIdent(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// validShape reports whether d could have come from parseTag.
func validShape(d Device) bool {
	got, err := parseTag("", d.String(), 0)
	return err == nil && got == d
}
