package remap

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

type rulesKind uint8

const (
	kindNone rulesKind = iota // leave everything where it was saved
	kindAll                   // everything to one device
	kindDict                  // per source tag
	kindFunc                  // a caller's function
)

// Rules say where each saved location tag goes, like torch.load's
// map_location. The zero Rules leave every tensor where it was saved
// (map_location=None). Build them with Parse, To, Dict or Func.
type Rules struct {
	kind  rulesKind
	all   Device            // kindAll
	exact map[string]Device // kindDict: keys with an index, matched exactly
	wild  map[string]Device // kindDict: bare-type keys, matching every index
	fn    func(tag string) (string, bool)
	cfg   *config // kindFunc: how the function's answers are parsed
}

// To returns rules that send every storage to d, like map_location=d.
// d is used as given (it may name a private backend); Target and NewPlan
// refuse a d whose String would not parse back to d, and Map ignores it.
func To(d Device) Rules { return Rules{kind: kindAll, all: d} }

// Dict returns rules that send the storages saved with tag k to m[k]. Keys
// and values are parsed with ParseDevice. A key with an index matches that
// tag exactly, as torch's dict map_location does; a bare key ("cuda")
// matches the bare tag and every indexed tag of its type ("cuda:3"), which
// torch's dict does not. An exact key wins over a bare one. Tags no key
// matches stay where they were saved. Honours WithBackend.
func Dict(m map[string]string, opts ...Option) (Rules, error) {
	c := newConfig(opts)
	r := Rules{kind: kindDict, exact: map[string]Device{}, wild: map[string]Device{}}
	for k, v := range m {
		if err := r.add(k, k, 0, v, v, 0, c); err != nil {
			return Rules{}, err
		}
	}
	return r, nil
}

// Func returns rules that ask fn where the storages saved with tag go,
// like a map_location callable: fn answers a device string and true, or
// false for "leave it where it was saved" (torch's None). Answers are
// parsed with ParseDevice when the rules are applied; Target and NewPlan
// report an answer that does not parse. Honours WithBackend.
func Func(fn func(tag string) (target string, ok bool), opts ...Option) Rules {
	if fn == nil {
		return Rules{}
	}
	return Rules{kind: kindFunc, fn: fn, cfg: newConfig(opts)}
}

// Parse reads rules as typed on a command line: either one device
// ("cpu", "cuda:1"), sending everything there, or comma-separated SRC=DST
// pairs with Dict's meaning ("cuda:0=cuda:1,cuda:1=cuda:0", "cuda=cpu").
// Spaces and tabs around "," and "=" are allowed; devices themselves are
// parsed strictly by ParseDevice. An empty string, an empty pair, a pair
// without "=" next to other pairs, and a repeated SRC are errors. Honours
// WithBackend.
func Parse(rules string, opts ...Option) (Rules, error) {
	c := newConfig(opts)
	if !strings.Contains(rules, "=") && !strings.Contains(rules, ",") {
		s, at := trim(rules, 0)
		if s == "" {
			return Rules{}, &RuleError{Input: rules, Pos: at, Reason: "empty rules", Err: ErrSyntax}
		}
		d, err := parseDevice(rules, s, at, c)
		if err != nil {
			return Rules{}, err
		}
		return To(d), nil
	}
	r := Rules{kind: kindDict, exact: map[string]Device{}, wild: map[string]Device{}}
	start := 0
	for _, pair := range strings.Split(rules, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			p, at := trim(pair, start)
			reason := "pair " + strconv.Quote(p) + " has no '='"
			if p == "" {
				reason = "empty pair"
			}
			return Rules{}, &RuleError{Input: rules, Pos: at, Reason: reason, Err: ErrSyntax}
		}
		ks, kat := trim(k, start)
		vs, vat := trim(v, start+len(k)+1)
		if err := r.add(rules, ks, kat, rules, vs, vat, c); err != nil {
			return Rules{}, err
		}
		start += len(pair) + 1
	}
	return r, nil
}

// trim removes spaces and tabs around s, which starts at byte pos of its
// input, and returns the new start.
func trim(s string, pos int) (string, int) {
	t := strings.TrimLeft(s, " \t")
	pos += len(s) - len(t)
	return strings.TrimRight(t, " \t"), pos
}

// add parses one SRC=DST pair into r. kin/vin are the inputs named in
// errors, kat/vat the offsets of k and v in them.
func (r *Rules) add(kin, k string, kat int, vin, v string, vat int, c *config) error {
	src, err := parseDevice(kin, k, kat, c)
	if err != nil {
		return err
	}
	dst, err := parseDevice(vin, v, vat, c)
	if err != nil {
		return err
	}
	m := r.exact
	if src.Index < 0 {
		m = r.wild
	}
	key := src.String()
	if src.Index < 0 {
		key = src.Type
	}
	if _, dup := m[key]; dup {
		return &RuleError{Input: kin, Pos: kat, Reason: "source " + strconv.Quote(key) + " given twice", Err: ErrSyntax}
	}
	m[key] = dst
	return nil
}

// Map returns the device a rule sends the storages saved with tag to, and
// true; or false when no rule applies and they stay where they were saved.
// A function rule whose answer does not parse counts as no rule here;
// Target reports it as an error.
func (r Rules) Map(tag string) (Device, bool) {
	d, ok, err := r.apply(tag)
	return d, ok && err == nil
}

// Target returns where the storages saved with tag end up: the rule's
// device, or the tag itself when no rule applies. It fails when a function
// rule answers something that is not a device, or when tag must stay and
// is not shaped like a device. An empty tag counts as "cpu" (safetensors
// files carry no tags and load on the CPU).
func (r Rules) Target(tag string) (Device, error) {
	if tag == "" {
		tag = "cpu"
	}
	d, ok, err := r.apply(tag)
	if err != nil || ok {
		return d, err
	}
	d, err = parseTag(tag, tag, 0)
	if re := (*RuleError)(nil); errors.As(err, &re) {
		re.Reason = "saved location tag: " + re.Reason
	}
	return d, err
}

func (r Rules) apply(tag string) (Device, bool, error) {
	switch r.kind {
	case kindAll:
		if !validShape(r.all) {
			return Device{}, false, fmt.Errorf("%w: To(%#v) is not a device", ErrDevice, r.all)
		}
		return r.all, true, nil
	case kindDict:
		if d, ok := r.exact[tag]; ok {
			return d, true, nil
		}
		if s, err := parseTag(tag, tag, 0); err == nil {
			if d, ok := r.wild[s.Type]; ok {
				return d, true, nil
			}
		}
	case kindFunc:
		ans, ok := r.fn(tag)
		if !ok {
			return Device{}, false, nil
		}
		d, err := parseDevice(ans, ans, 0, r.cfg)
		if err != nil {
			if re := (*RuleError)(nil); errors.As(err, &re) {
				re.Reason = "map function's answer for tag " + strconv.Quote(tag) + ": " + re.Reason
			}
			return Device{}, false, err
		}
		return d, true, nil
	}
	return Device{}, false, nil
}

// String returns the rules in Parse's syntax, bare sources first, each
// group sorted: "cpu", "cuda=cpu,cuda:1=cuda:0". Function rules read "func" and the
// zero Rules "".
func (r Rules) String() string {
	switch r.kind {
	case kindAll:
		return r.all.String()
	case kindFunc:
		return "func"
	case kindDict:
		return strings.Join(append(sortedPairs(r.wild), sortedPairs(r.exact)...), ",")
	}
	return ""
}

func sortedPairs(m map[string]Device) []string {
	pairs := make([]string, 0, len(m))
	for k, d := range m {
		pairs = append(pairs, k+"="+d.String())
	}
	sort.Strings(pairs)
	return pairs
}
