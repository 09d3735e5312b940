package objstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// safetensorsBytes returns a safetensors file of n uint8 tensors of size
// random bytes each.
func safetensorsBytes(t *testing.T, n int, size int64) []byte {
	t.Helper()
	header := map[string]any{}
	for i := range n {
		header[fmt.Sprintf("t%02d", i)] = map[string]any{"dtype": "U8", "shape": []int64{size}, "data_offsets": []int64{int64(i) * size, int64(i+1) * size}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, randomBytes(n*int(size), 11)...)
}

// TestLoadHostLargeRangedReads loads a 64 MiB checkpoint from S3 into host
// memory the way `ckpt load s3://...` does and checks that its storages
// are fetched with large ranged GETs straight into the destination
// buffers: one GET per chunk at most, and nothing left in the chunk cache
// (reading them in small pieces through the cache copied every byte once
// more and fetched one chunk at a time per storage).
func TestLoadHostLargeRangedReads(t *testing.T) {
	s, bucket := server(t)
	const n, size = 4, 16 << 20
	data := safetensorsBytes(t, n, size)
	put(t, s, bucket, "model.safetensors", data)
	st, obj := openObject(t, "s3://"+bucket+"/model.safetensors")
	ck, err := statedict.NewReader(obj, obj.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
	if err != nil {
		t.Fatal(err)
	}
	before := st.Requests()
	res, err := devicecopy.LoadHost(context.Background(), ck, plan)
	if err != nil {
		t.Fatal(err)
	}
	body := data[len(data)-n*size:]
	for i, hs := range res.Storages {
		if !bytes.Equal(hs.Data, body[i*size:(i+1)*size]) {
			t.Fatalf("storage %d: wrong bytes", i)
		}
		// Hashed piece by piece as the GETs arrived (ReadAtPieces).
		if want := digest.SumBytes(hs.Data); hs.Digest != want {
			t.Fatalf("storage %d: digest %v, want %v", i, hs.Digest, want)
		}
	}
	// 64 MiB in 8 MiB chunks: 8 GETs (a storage split at a chunk
	// boundary may take one more each).
	chunks := int64(n * size / DefaultChunkSize)
	if got := st.Requests() - before; got > chunks+n {
		t.Errorf("loading %d MiB made %d requests, want at most %d", n*size>>20, got, chunks+n)
	}
	if c := obj.cachedBytes(); c > 2*DefaultMetaWindow {
		t.Errorf("after the load the chunk cache holds %d bytes: the storages were read through it, not straight into their buffers", c)
	}
}
