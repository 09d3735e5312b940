package remap

import (
	"errors"
	"testing"
)

func TestParseRules(t *testing.T) {
	good := []struct {
		in, canon string
	}{
		{"cpu", "cpu"},
		{"cuda", "cuda"},
		{"cuda:1", "cuda:1"},
		{"mps", "mps"},
		{"meta", "meta"},
		{"  cuda:1\t", "cuda:1"},
		{"cuda:0=cuda:1,cuda:1=cuda:0", "cuda:0=cuda:1,cuda:1=cuda:0"},
		{"cuda:1=cuda:0, cuda:0 = cuda:1", "cuda:0=cuda:1,cuda:1=cuda:0"},
		{"cuda=cpu", "cuda=cpu"},
		{"cuda:1=cuda:0,cuda=cpu", "cuda=cpu,cuda:1=cuda:0"},
		{"cuda=cuda:0,cuda:3=cpu,mps=cpu", "cuda=cuda:0,mps=cpu,cuda:3=cpu"},
		{"xpu:1=xpu:0", "xpu:1=xpu:0"},
		{"cpu=cuda", "cpu=cuda"},
		{"cuda:0=cuda", "cuda:0=cuda"},
	}
	for _, c := range good {
		r, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if r.String() != c.canon {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, r.String(), c.canon)
		}
	}

	bad := []struct {
		in  string
		err error
		pos int
	}{
		{"", ErrSyntax, 0},
		{"   ", ErrSyntax, 3},
		{"gpu", ErrDevice, 0},
		{"cuda1", ErrDevice, 0},
		{"CUDA:0", ErrSyntax, 0},
		{"cuda:01", ErrSyntax, 5},
		{"cuda:-1", ErrSyntax, 5},
		{"cuda:x", ErrSyntax, 5},
		{"=cpu", ErrSyntax, 0},
		{"cuda:0=", ErrSyntax, 7},
		{"cuda:0=cuda:1,", ErrSyntax, 14},
		{",cuda:0=cpu", ErrSyntax, 0},
		{"cuda:0=cpu,,cuda:1=cpu", ErrSyntax, 11},
		{"cuda:0=cpu,cuda:1", ErrSyntax, 11},
		{"cpu,cuda", ErrSyntax, 0},
		{"cuda:0=cpu=cuda:1", ErrSyntax, 7},
		{"cuda:0=cpu,cuda:0=cuda:1", ErrSyntax, 11},
		{"cuda=cpu, cuda=mps", ErrSyntax, 10},
		{"cuda:0=gpu", ErrDevice, 7},
		{"cuda:0=cuda:1, gpu:1=cpu", ErrDevice, 15},
		{"cuda:0=cuda:128", ErrDevice, 12},
		{"cuda:0=cpu:1", ErrDevice, 7},
	}
	for _, c := range bad {
		r, err := Parse(c.in)
		if !errors.Is(err, c.err) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, r, err, c.err)
			continue
		}
		var re *RuleError
		if !errors.As(err, &re) {
			t.Errorf("Parse(%q): error %T is not a *RuleError", c.in, err)
			continue
		}
		if re.Input != c.in || re.Pos != c.pos {
			t.Errorf("Parse(%q): Input %q Pos %d (%s), want Pos %d", c.in, re.Input, re.Pos, re.Reason, c.pos)
		}
	}
}

func TestMap(t *testing.T) {
	swap, err := Parse("cuda:0=cuda:1,cuda:1=cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	wild, err := Parse("cuda=cpu,cuda:2=cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	all, err := Parse("cuda")
	if err != nil {
		t.Fatal(err)
	}
	dict, err := Dict(map[string]string{"cuda:1": "cpu", "xpu": "xpu:0"})
	if err != nil {
		t.Fatal(err)
	}
	fn := Func(func(tag string) (string, bool) {
		switch tag {
		case "cuda:0":
			return "cuda:3", true
		case "cuda:1":
			return "gpu", true // not a device: reported by Target
		}
		return "", false
	})
	none := "" // no rule applies: Map answers false
	cases := []struct {
		name  string
		rules Rules
		tag   string
		want  string
	}{
		{"swap exact 0", swap, "cuda:0", "cuda:1"},
		{"swap exact 1", swap, "cuda:1", "cuda:0"},
		{"swap unmatched index", swap, "cuda:2", none},
		{"swap unmatched bare", swap, "cuda", none},
		{"swap unmatched cpu", swap, "cpu", none},
		{"wildcard indexed", wild, "cuda:0", "cpu"},
		{"wildcard bare", wild, "cuda", "cpu"},
		{"wildcard high index", wild, "cuda:7", "cpu"},
		{"exact beats wildcard", wild, "cuda:2", "cuda:0"},
		{"wildcard leaves cpu", wild, "cpu", none},
		{"wildcard leaves other types", wild, "xpu:0", none},
		{"wildcard ignores malformed tag", wild, "cuda:01", none},
		{"all from cpu", all, "cpu", "cuda"},
		{"all from cuda:5", all, "cuda:5", "cuda"},
		{"all from odd tag", all, "whatever", "cuda"},
		{"dict exact", dict, "cuda:1", "cpu"},
		{"dict unmatched", dict, "cuda:0", none},
		{"dict bare xpu key", dict, "xpu:4", "xpu:0"},
		{"func mapped", fn, "cuda:0", "cuda:3"},
		{"func None", fn, "cpu", none},
		{"func bad answer", fn, "cuda:1", none},
		{"zero rules", Rules{}, "cuda:0", none},
		{"bad To literal", To(Device{"CUDA", 0}), "cpu", none},
	}
	for _, c := range cases {
		d, ok := c.rules.Map(c.tag)
		got := none
		if ok {
			got = d.String()
		}
		if got != c.want {
			t.Errorf("%s: Map(%q) = %q, %v; want %q", c.name, c.tag, got, ok, c.want)
		}
	}
}

func TestTarget(t *testing.T) {
	swap, err := Parse("cuda:0=cuda:1")
	if err != nil {
		t.Fatal(err)
	}
	fn := Func(func(tag string) (string, bool) {
		if tag == "cuda:1" {
			return "gpu", true
		}
		if tag == "cuda:2" {
			return "foo:0", true
		}
		return "", false
	}, WithBackend("foo"))
	cases := []struct {
		rules Rules
		tag   string
		want  string
		err   error
	}{
		{swap, "cuda:0", "cuda:1", nil},
		{swap, "cuda:3", "cuda:3", nil}, // unchanged
		{swap, "bar:2", "bar:2", nil},   // private backend as saved
		{swap, "", "cpu", nil},          // no tag: cpu
		{swap, "CUDA:0", "", ErrSyntax}, // unchanged but not a device
		{fn, "cuda:1", "", ErrDevice},   // function answered garbage
		{fn, "cuda:2", "foo:0", nil},    // registered backend
		{fn, "mps", "mps", nil},         // function said None
		{To(Device{"cuda", -2}), "cpu", "", ErrDevice},
	}
	for _, c := range cases {
		d, err := c.rules.Target(c.tag)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%v Target(%q) = %v, %v; want %v", c.rules, c.tag, d, err, c.err)
			}
			continue
		}
		if err != nil || d.String() != c.want {
			t.Errorf("%v Target(%q) = %v, %v; want %q", c.rules, c.tag, d, err, c.want)
		}
	}
}

func TestDictErrors(t *testing.T) {
	for _, m := range []map[string]string{
		{"cuda:01": "cpu"},
		{"cuda:0": "gpu"},
		{"": "cpu"},
		{"cuda:0": ""},
	} {
		if _, err := Dict(m); err == nil {
			t.Errorf("Dict(%v) accepted", m)
		}
	}
	r, err := Dict(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Map("cuda:0"); ok {
		t.Error("empty Dict mapped a tag")
	}
}

func TestFuncNil(t *testing.T) {
	if _, ok := Func(nil).Map("cuda:0"); ok {
		t.Error("Func(nil) mapped a tag")
	}
}
