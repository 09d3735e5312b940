package main

import "github.com/ckpt-dev/ckpt"

// requests returns the store's request count for --json, nil for a local
// source (no store).
func requests(st *ckpt.ObjectStore) *int64 {
	if st == nil {
		return nil
	}
	n := st.Requests()
	return &n
}
