package remap

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	good := []struct {
		in   string
		want Device
	}{
		{"cpu", Device{"cpu", -1}},
		{"cpu:0", Device{"cpu", 0}},
		{"cuda", Device{"cuda", -1}},
		{"cuda:0", Device{"cuda", 0}},
		{"cuda:1", Device{"cuda", 1}},
		{"cuda:10", Device{"cuda", 10}},
		{"cuda:127", Device{"cuda", 127}},
		{"mps", Device{"mps", -1}},
		{"meta", Device{"meta", -1}},
		{"xpu:3", Device{"xpu", 3}},
		{"hpu:0", Device{"hpu", 0}},
		{"mtia:2", Device{"mtia", 2}},
		{"privateuseone", Device{"privateuseone", -1}},
		{"privateuseone:1", Device{"privateuseone", 1}},
		{"xla:0", Device{"xla", 0}},
	}
	for _, c := range good {
		d, err := ParseDevice(c.in)
		if err != nil || d != c.want {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v", c.in, d, err, c.want)
			continue
		}
		if d.String() != c.in {
			t.Errorf("ParseDevice(%q).String() = %q", c.in, d.String())
		}
	}

	bad := []struct {
		in  string
		err error
		pos int
	}{
		{"", ErrSyntax, 0},
		{"cuda1", ErrDevice, 0}, // a lowercase identifier, but no such type
		{"gpu", ErrDevice, 0},
		{"gpu:0", ErrDevice, 0},
		{"CUDA:0", ErrSyntax, 0},
		{"Cuda", ErrSyntax, 0},
		{"cuda:-1", ErrSyntax, 5},
		{"cuda:+1", ErrSyntax, 5},
		{"cuda:x", ErrSyntax, 5},
		{"cuda:01", ErrSyntax, 5},
		{"cuda:00", ErrSyntax, 5},
		{"cuda:", ErrSyntax, 5},
		{"cuda:0:1", ErrSyntax, 5},
		{"cuda: 1", ErrSyntax, 5},
		{"cuda:1 ", ErrSyntax, 5},
		{" cuda", ErrSyntax, 0},
		{":0", ErrSyntax, 0},
		{"1cuda", ErrSyntax, 0},
		{"cu-da", ErrSyntax, 0},
		{"cuda:128", ErrDevice, 5},
		{"cuda:99999999999999999999999", ErrDevice, 5},
		{"cpu:1", ErrDevice, 0},
		{"foo", ErrDevice, 0},
		{"foo:1", ErrDevice, 0},
	}
	for _, c := range bad {
		d, err := ParseDevice(c.in)
		if !errors.Is(err, c.err) {
			t.Errorf("ParseDevice(%q) = %v, %v; want %v", c.in, d, err, c.err)
			continue
		}
		var re *RuleError
		if !errors.As(err, &re) {
			t.Errorf("ParseDevice(%q) error %T is not a *RuleError", c.in, err)
			continue
		}
		if re.Input != c.in || re.Pos != c.pos {
			t.Errorf("ParseDevice(%q): Input %q Pos %d, want Pos %d", c.in, re.Input, re.Pos, c.pos)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "remap: ") || !strings.Contains(msg, "accepted: ") ||
			!strings.Contains(msg, "cuda:N") {
			t.Errorf("ParseDevice(%q) message lacks prefix or accepted forms: %s", c.in, msg)
		}
	}
}

func TestWithBackend(t *testing.T) {
	if _, err := ParseDevice("foo:1"); !errors.Is(err, ErrDevice) {
		t.Fatalf("unregistered backend accepted: %v", err)
	}
	d, err := ParseDevice("foo:1", WithBackend("foo"))
	if err != nil || d != (Device{"foo", 1}) {
		t.Fatalf("ParseDevice with backend = %v, %v", d, err)
	}
	// A name that is not a lowercase identifier cannot be registered.
	if _, err := ParseDevice("Foo", WithBackend("Foo")); err == nil {
		t.Fatal("WithBackend(\"Foo\") made \"Foo\" parse")
	}
}

func TestValidShape(t *testing.T) {
	for d, want := range map[Device]bool{
		{"cuda", -1}: true, {"cuda", 0}: true, {"foo_1", 3}: true,
		{"cuda", -2}: false, {"cuda", 128}: false, {"CUDA", 0}: false, {"", -1}: false,
		{"cuda:0", -1}: false,
	} {
		if got := validShape(d); got != want {
			t.Errorf("validShape(%#v) = %v, want %v", d, got, want)
		}
	}
}
