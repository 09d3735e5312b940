package pickle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// A flood of DUP after None (1 byte per stack item) used to grow the stack
// without bound: 100 MB of DUP took 3.7 GB. The default MaxStack stops it.
func TestStackFlood(t *testing.T) {
	in := cat(proto, op('N'), bytes.Repeat(op('2'), 2<<20), stop)
	err := unpickleErr(t, in)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxStack") {
		t.Fatalf("err = %v, want a MaxStack limit", err)
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "MaxStack" || le.Max != 1<<20 || le.Value != 1<<20+1 {
		t.Fatalf("LimitError = %+v", le)
	}
	// A tuple of many items sits on the stack whole: the option raises it.
	tup := cat(proto, op('('), bytes.Repeat(op('N'), 3000), op('t'), stop)
	if err := unpickleErr(t, tup, WithLimits(Limits{MaxStack: 2000})); !errors.Is(err, ErrLimit) {
		t.Fatalf("tuple over MaxStack: %v", err)
	}
	if _, err := Unpickle(tup, WithLimits(Limits{MaxStack: 4000})); err != nil {
		t.Fatalf("tuple under MaxStack: %v", err)
	}
}

func long4(n int) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{0x8b}, uint32(n))
	return append(b, bytes.Repeat([]byte{0x5a}, n)...)
}

// A LONG4 integer of a few MB used to be accepted; its decimal form then
// took seconds to quadratic time to print. It is bounded by MaxIntBytes.
func TestHugeInteger(t *testing.T) {
	err := unpickleErr(t, cat(proto, long4(1<<20), stop))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxIntBytes") {
		t.Fatalf("err = %v, want a MaxIntBytes limit", err)
	}
	if _, err := Unpickle(cat(proto, long4(4096), stop)); err != nil {
		t.Fatalf("4096-byte integer: %v", err)
	}
	if err := unpickleErr(t, cat(proto, op(0x8a, 200), bytes.Repeat([]byte{1}, 200), stop), WithLimits(Limits{MaxIntBytes: 100})); !errors.Is(err, ErrLimit) {
		t.Fatalf("LONG1 over MaxIntBytes: %v", err)
	}
}

func TestMaxBytes(t *testing.T) {
	s := cat(proto, L(S(strings.Repeat("a", 600)), S(strings.Repeat("b", 600))), stop)
	if err := unpickleErr(t, s, WithLimits(Limits{MaxBytes: 1000})); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("err = %v, want MaxBytes", err)
	}
	if _, err := Unpickle(s, WithLimits(Limits{MaxBytes: 1200})); err != nil {
		t.Fatal(err)
	}
}

// Both passes stop when the context ends: a canceled context fails a long
// stream with context.Canceled.
func TestContextCanceled(t *testing.T) {
	in := cat(proto, op('('), bytes.Repeat(op('N', '0'), 1<<16), op('1'), op('N'), stop)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Unpickle(in, WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The machine itself: a scan that ends before the deadline, a run that
	// would not. Checked directly on the reader gopickle reads through.
	r := &countingReader{r: bytes.NewReader(make([]byte, 1<<20)), ctx: ctx, next: ctxEvery}
	n := 0
	for {
		if _, err := r.ReadByte(); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("reader: %v", err)
			}
			break
		}
		n++
	}
	if n > ctxEvery {
		t.Fatalf("reader read %d bytes after cancellation", n)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	if _, err := Unpickle(in, WithContext(ctx2)); err != nil {
		t.Fatal(err)
	}
}
