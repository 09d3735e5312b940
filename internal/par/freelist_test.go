package par

import "testing"

// TestFreeList: Get reuses the smallest free buffer that holds n (its
// length set to n), allocates when none does, and Put keeps at most Max
// buffers, dropping the smallest.
func TestFreeList(t *testing.T) {
	l := &FreeList[byte]{Max: 2}
	a, b := l.Get(10), l.Get(100)
	if len(*a) != 10 || len(*b) != 100 {
		t.Fatalf("lengths %d, %d", len(*a), len(*b))
	}
	l.Put(a)
	l.Put(b)
	if g := l.Get(50); g != b || len(*g) != 50 {
		t.Fatalf("Get(50) did not reuse the 100-byte buffer")
	}
	if g := l.Get(5); g != a {
		t.Fatalf("Get(5) did not reuse the 10-byte buffer")
	}
	if g := l.Get(5); g == a || g == b || cap(*g) != 5 {
		t.Fatalf("Get(5) on an empty list returned a kept buffer")
	}
	c := l.Get(1000)
	l.Put(a)
	l.Put(b)
	l.Put(c) // full: the smallest (a) goes
	l.Put(nil)
	if g := l.Get(1); g != b {
		t.Fatalf("Get(1) = cap %d, want the 100-byte buffer (the 10-byte one dropped)", cap(*g))
	}
	if g := l.Get(1); g != c {
		t.Fatalf("Get(1) = cap %d, want the 1000-byte buffer", cap(*g))
	}
}

// TestFreeListNew: a list with New makes its new buffers with it (a maker
// of larger, aligned buffers keeps its capacity), and reuses them.
func TestFreeListNew(t *testing.T) {
	made := 0
	l := &FreeList[byte]{Max: 1, New: func(n int) []byte { made++; return make([]byte, n, 2*n) }}
	b := l.Get(8)
	if len(*b) != 8 || cap(*b) != 16 || made != 1 {
		t.Fatalf("len %d cap %d made %d, want 8 16 1", len(*b), cap(*b), made)
	}
	l.Put(b)
	if c := l.Get(12); c != b || len(*c) != 12 || made != 1 {
		t.Fatalf("not reused: same %v len %d made %d", c == b, len(*c), made)
	}
}
