package par

import "sync"

// FreeList keeps up to Max buffers for reuse across goroutines. Unlike a
// sync.Pool it is not emptied by the garbage collector: a buffer once
// faulted in is reused for the life of the process (a fresh page costs a
// page fault, on some VMs ~10 us), and Max bounds what it holds.
type FreeList[T any] struct {
	Max  int             // buffers kept; 0 keeps none
	New  func(n int) []T // makes a new buffer of n elements; nil: make
	mu   sync.Mutex
	free []*[]T
}

// Get returns a buffer of n elements: the smallest free one that holds
// them, or a new one. Its contents are not cleared.
func (l *FreeList[T]) Get(n int) *[]T {
	l.mu.Lock()
	best := -1
	for i, b := range l.free {
		if cap(*b) >= n && (best < 0 || cap(*b) < cap(*l.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := l.free[best]
		l.free = append(l.free[:best], l.free[best+1:]...)
		l.mu.Unlock()
		*b = (*b)[:n]
		return b
	}
	l.mu.Unlock()
	if l.New != nil {
		b := l.New(n)[:n]
		return &b
	}
	b := make([]T, n)
	return &b
}

// Put gives b back (nil is ignored); with Max buffers kept already, the
// smallest of them and b is dropped.
func (l *FreeList[T]) Put(b *[]T) {
	if b == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.Max {
		l.free = append(l.free, b)
		return
	}
	small := -1
	for i, f := range l.free {
		if small < 0 || cap(*f) < cap(*l.free[small]) {
			small = i
		}
	}
	if small >= 0 && cap(*b) > cap(*l.free[small]) {
		l.free[small] = b
	}
}
