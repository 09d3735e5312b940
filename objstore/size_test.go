package objstore

import (
	"context"
	"testing"
)

// TestSize: Size reports an object's size as the server stores it (the
// empty object, a small one, one past a multipart part written through a
// Writer) and a missing object as absent, not as an error, on MinIO and
// the GCS and Azure emulators.
func TestSize(t *testing.T) {
	check := func(t *testing.T, url func(string) string, put func(key string, data []byte)) {
		ctx := context.Background()
		st, _, err := NewStore(ctx, url(""), WithPartSize(5<<20))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 12345} {
			key := "sz/" + string(rune('a'+n%26))
			put(key, randomBytes(n, int64(n)))
			size, ok, err := st.Size(ctx, key)
			if err != nil || !ok || size != int64(n) {
				t.Fatalf("Size(%s) = %d, %v, %v; want %d", key, size, ok, err, n)
			}
		}
		// Through a Writer, in several parts.
		data := randomBytes(11<<20+7, 9)
		w, err := st.Create(ctx, "sz/written")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if size, ok, err := st.Size(ctx, "sz/written"); ok || err != nil {
			t.Fatalf("before Commit: Size = %d, %v, %v; want absent", size, ok, err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if size, ok, err := st.Size(ctx, "sz/written"); err != nil || !ok || size != int64(len(data)) {
			t.Fatalf("Size = %d, %v, %v; want %d", size, ok, err, len(data))
		}
		if size, ok, err := st.Size(ctx, "sz/missing"); ok || err != nil || size != 0 {
			t.Fatalf("missing: Size = %d, %v, %v", size, ok, err)
		}
		if ok, err := st.Exists(ctx, "sz/missing"); ok || err != nil {
			t.Fatalf("missing: Exists = %v, %v", ok, err)
		}
	}
	t.Run("s3", func(t *testing.T) {
		s, bucket := server(t)
		check(t, func(k string) string { return "s3://" + bucket + "/" + k },
			func(k string, d []byte) { put(t, s, bucket, k, d) })
	})
	eachCloud(t, func(t *testing.T, c cloud) {
		check(t, c.url, func(k string, d []byte) {
			if err := c.put(k, d); err != nil {
				t.Fatal(err)
			}
		})
	})
}
