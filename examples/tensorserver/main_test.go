package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServe runs the service against a fixture on a real listener on
// 127.0.0.1, asks for the metadata and a tensor's bytes, then shuts it down.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "../../testdata/fixtures/zip_basic.pt"}, &logs, ready)
	}()
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr.String()
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not listening after 30 s")
	}

	resp, err := http.Get(base + "/tensors")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Tensors []tensorInfo }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(list.Tensors) != 6 || list.Tensors[1].Name != "encoder.bias" || list.Tensors[1].DType != "float32" ||
		list.Tensors[1].Device != "cpu" || list.Tensors[1].NBytes != 12 {
		t.Fatalf("GET /tensors: %+v", list.Tensors)
	}

	resp, err = http.Get(base + "/tensors/encoder.bias")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Tensor-Dtype") != "float32" || resp.Header.Get("X-Tensor-Shape") != "3" {
		t.Fatalf("GET /tensors/encoder.bias: %s %v", resp.Status, resp.Header)
	}
	var got []float32
	for i := 0; i+4 <= len(body); i += 4 {
		got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(body[i:])))
	}
	if len(got) != 3 || got[0] != 0.5 || got[1] != -1.5 || got[2] != 2 { // torch.tensor([0.5, -1.5, 2.0])
		t.Errorf("bytes: %v", got)
	}

	resp, err = http.Get(base + "/tensors/ids")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Tensor-Shape") != "2,3" || resp.ContentLength != 24 {
		t.Errorf("ids: %v %d", resp.Header, resp.ContentLength)
	}
	resp, err = http.Get(base + "/tensors/no.such")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing tensor: %s", resp.Status)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no shutdown after 30 s")
	}
	if !strings.Contains(logs.String(), "shut down") {
		t.Errorf("logs: %s", logs.String())
	}
	if _, err := http.Get(base + "/tensors"); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestServeBadInput(t *testing.T) {
	var logs bytes.Buffer
	if err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "../../testdata/fixtures/bad/unsafe_os_system.pt"}, &logs, nil); err == nil {
		t.Error("an unsafe checkpoint was served")
	}
	if err := run(context.Background(), nil, &logs, nil); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("no argument: %v", err)
	}
}
