package main

import "github.com/ckpt-dev/ckpt/objstore"

// requests returns the store's request count for --json, nil for a local
// source (no store).
func requests(st *objstore.Store) *int64 {
	if st == nil {
		return nil
	}
	n := st.Requests()
	return &n
}
