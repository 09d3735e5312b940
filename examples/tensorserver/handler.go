package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt"
)

// tensorInfo is one tensor in GET /tensors.
type tensorInfo struct {
	Name    string  `json:"name"`
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Strides []int64 `json:"strides"`
	Device  string  `json:"device"`
	Saved   string  `json:"saved_device"`
	NBytes  int64   `json:"nbytes"`
}

// newHandler serves the tensors of m.
func newHandler(m *ckpt.Model) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tensors", func(w http.ResponseWriter, r *http.Request) {
		list := make([]tensorInfo, 0, len(m.Tensors))
		for _, t := range m.Tensors {
			list = append(list, tensorInfo{Name: t.Name, DType: t.DType.String(), Shape: nonNil(t.Shape),
				Strides: nonNil(t.Strides), Device: t.Device.String(), Saved: t.Saved, NBytes: t.NBytes})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"tensors": list})
	})
	// {name...} takes the rest of the path: names hold dots and may hold
	// slashes.
	mux.HandleFunc("GET /tensors/{name...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		t, ok := m.Tensor(name)
		if !ok {
			http.Error(w, "no tensor named "+strconv.Quote(name), http.StatusNotFound)
			return
		}
		b, err := t.Bytes()
		switch {
		case errors.Is(err, ckpt.ErrNotOnHost):
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		h.Set("X-Tensor-Dtype", t.DType.String())
		h.Set("X-Tensor-Shape", shapeHeader(t.Shape))
		// Written a piece at a time, each with its own deadline: the
		// server's WriteTimeout would cut a large tensor to a slow
		// reader short.
		rc := http.NewResponseController(w)
		for len(b) > 0 {
			rc.SetWriteDeadline(time.Now().Add(writePieceTimeout))
			n := min(len(b), writePiece)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	})
	return mux
}

// shapeHeader writes a shape as comma-separated sizes ("2,3"; "" for a
// scalar).
func shapeHeader(shape []int64) string {
	parts := make([]string, len(shape))
	for i, s := range shape {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, ",")
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}
