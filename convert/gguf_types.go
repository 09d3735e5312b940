package convert

import (
	"cmp"
	"slices"

	"github.com/ckpt-dev/ckpt/ggml"
)

// GGUFTypes says which ggml types a GGUF output's tensors were written
// as. With WithGGUFType, the tensors that did not get that type are
// grouped by the type they got and why (llama.cpp's rules: 1-D tensors
// and norms stay F32, rows that are not a multiple of the type's block
// fall back to F16, integer tensors keep their type; MXFP4 blocks are
// kept as stored under a quantized type).
type GGUFTypes struct {
	// Requested is WithGGUFType's type as ggml names it ("" without one).
	Requested string `json:"requested"`
	// Written counts the tensors written by ggml type name.
	Written map[string]int `json:"written"`
	// Fallbacks are the tensors not written as Requested, grouped by
	// type and reason, largest group first (empty without WithGGUFType).
	Fallbacks []GGUFFallback `json:"fallbacks"`
	// MXFP4Copied counts the MXFP4 weights (gpt-oss experts) whose
	// stored blocks were rearranged into ggml's MXFP4 blocks, without a
	// float round trip.
	MXFP4Copied int `json:"mxfp4_copied"`
}

// GGUFFallback is a group of tensors that WithGGUFType's type could not
// apply to.
type GGUFFallback struct {
	Tensors int    `json:"tensors"` // how many
	Type    string `json:"type"`    // the ggml type they were written as
	Reason  string `json:"reason"`  // "rows of 64 not a multiple of q4_K's 256"
	First   string `json:"first"`   // the first such tensor, as written
}

// newGGUFTypes starts the report of one GGUF output.
func newGGUFTypes(requested string) *GGUFTypes {
	r := &GGUFTypes{Written: map[string]int{}, Fallbacks: []GGUFFallback{}}
	if requested != "" {
		if t, err := ggml.ParseType(requested); err == nil {
			r.Requested = t.String()
		}
	}
	return r
}

// add counts one tensor written as planned.
func (r *GGUFTypes) add(name string, p ggufPlan) {
	r.Written[p.typ.String()]++
	if p.mx != nil && p.typ == ggml.MXFP4 {
		r.MXFP4Copied++
	}
	if p.reason == "" {
		return
	}
	for i := range r.Fallbacks {
		if f := &r.Fallbacks[i]; f.Type == p.typ.String() && f.Reason == p.reason {
			f.Tensors++
			return
		}
	}
	r.Fallbacks = append(r.Fallbacks, GGUFFallback{Tensors: 1, Type: p.typ.String(), Reason: p.reason, First: name})
}

// finish orders the fallbacks, largest group first (stable: in the
// order met among equals).
func (r *GGUFTypes) finish() {
	slices.SortStableFunc(r.Fallbacks, func(a, b GGUFFallback) int { return cmp.Compare(b.Tensors, a.Tensors) })
}
