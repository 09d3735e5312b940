package torchzip

import (
	"fmt"
	"math/big"
	"unicode/utf8"

	"github.com/ckpt-dev/ckpt/pickle"
)

// ScalarWhy judges a scalar leaf of an object tree for EncodeTree (nil,
// bool, int, string, float, bytes, complex, device): ok is false for
// anything else. why says why it cannot be written so that torch.load
// with weights_only=True reads it back, "" when it can; with dropFloats
// the leaves torch 1.13's weights_only loader cannot read (floats, bytes,
// complex, devices) are refused too. Both the .pth trees and the DCP
// values package convert writes are judged by it.
func ScalarWhy(v any, dropFloats bool) (why string, ok bool) {
	switch x := v.(type) {
	case nil, bool, int64:
		return "", true
	case *big.Int:
		if (x.BitLen()+8)/8 > 255 {
			return fmt.Sprintf("integer of %d bits: longer than LONG1 can write", x.BitLen()), true
		}
		return "", true
	case string:
		if !utf8.ValidString(x) {
			return "string is not valid UTF-8", true
		}
		return "", true
	case float64:
		if dropFloats {
			return "float: dropped for torch 1.13's weights_only loader (--drop-floats)", true
		}
		return "", true
	case []byte, complex128, pickle.Device:
		if dropFloats {
			return pickle.TypeName(v) + ": torch 1.13's weights_only loader cannot read it (--drop-floats)", true
		}
		return "", true
	}
	return "", false
}
