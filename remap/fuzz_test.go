package remap

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// addSeeds adds every line of testdata/rules.txt to the fuzz corpus.
func addSeeds(f *testing.F) {
	file, err := os.Open("testdata/rules.txt")
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			f.Add(line)
		}
	}
	if err := sc.Err(); err != nil {
		f.Fatal(err)
	}
}

// checkErr fails unless err is a *RuleError wrapping ErrSyntax or ErrDevice
// that points inside in.
func checkErr(t *testing.T, in string, err error) {
	var re *RuleError
	if !errors.As(err, &re) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrDevice)) {
		t.Fatalf("%q: error %v (%T) is not a RuleError wrapping a sentinel", in, err, err)
	}
	if re.Pos < 0 || re.Pos > len(re.Input) {
		t.Fatalf("%q: position %d outside input %q", in, re.Pos, re.Input)
	}
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		r, err := Parse(in)
		if err != nil {
			checkErr(t, in, err)
			return
		}
		// The canonical form parses back to the same rules.
		canon := r.String()
		r2, err := Parse(canon)
		if err != nil || r2.String() != canon {
			t.Fatalf("%q: canonical %q reparses to %q, %v", in, canon, r2.String(), err)
		}
		// Applying the rules to the input's own pieces never fails on shape.
		for _, piece := range strings.FieldsFunc(in, func(c rune) bool { return c == ',' || c == '=' }) {
			if d, ok := r.Map(strings.TrimSpace(piece)); ok && !validShape(d) {
				t.Fatalf("%q: Map(%q) gave invalid %#v", in, piece, d)
			}
		}
	})
}

func FuzzParseDevice(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ParseDevice(in)
		if err != nil {
			checkErr(t, in, err)
			return
		}
		// Only canonical spellings are accepted: String gives the input back.
		if d.String() != in || !validShape(d) {
			t.Fatalf("ParseDevice(%q) = %#v, String %q", in, d, d.String())
		}
		if _, err := Parse(in); err != nil {
			t.Fatalf("device %q is not a rule: %v", in, err)
		}
	})
}

// FuzzPlan feeds hostile location tags and sizes (as a corrupt file could
// carry them) through NewPlan and DetectStrays.
func FuzzPlan(f *testing.F) {
	f.Add("cuda=cpu", "cuda:0,cpu,cuda:1,cuda:0", int64(4), uint8(3))
	f.Add("cuda:0=cuda:1,cuda:1=cuda:0", "cuda:1,,GPU,cuda:01", int64(-1), uint8(0))
	f.Add("cpu", "cuda:0,cuda:0", int64(1<<62), uint8(1))
	f.Fuzz(func(t *testing.T, rules, tagList string, size int64, shared uint8) {
		r, err := Parse(rules)
		if err != nil {
			r = Rules{}
		}
		var tensors []*statedict.Tensor
		var prev *statedict.Storage
		for i, tag := range strings.Split(tagList, ",") {
			s := st(tag, tag, size+int64(i))
			if prev != nil && shared&(1<<(i%8)) != 0 {
				s = prev // share the previous storage
			}
			prev = s
			tensors = append(tensors, tensor("state.0.step", s, size%7))
		}
		p, err := NewPlan(tensors, r)
		strays := DetectStrays(tensors)
		if len(strays) >= len(tensors) && len(tensors) > 0 {
			t.Fatalf("%d strays among %d tensors", len(strays), len(tensors))
		}
		if err != nil {
			var re *RuleError
			if !errors.Is(err, ErrTensor) && !errors.As(err, &re) {
				t.Fatalf("error %v is neither ErrTensor nor a RuleError", err)
			}
			return
		}
		n := 0
		for _, u := range p.Devices() {
			n += u.Tensors
			if u.Bytes < 0 || u.Storages > len(tensors) || !validShape(u.Device) {
				t.Fatalf("bad device use %+v", u)
			}
		}
		if n != len(tensors) || len(p.Entries) != len(tensors) {
			t.Fatalf("%d tensors counted, %d entries, want %d", n, len(p.Entries), len(tensors))
		}
	})
}
