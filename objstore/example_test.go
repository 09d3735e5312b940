package objstore_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/objstore"
)

// Open an object by URL and read it through io.ReaderAt; s3:// URLs work
// the same way, with credentials and endpoint from the AWS environment.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "model.bin"), []byte("0123456789"), 0o644)
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()

	st, key, err := objstore.NewStore(context.Background(), hs.URL+"/model.bin", objstore.WithConcurrency(4))
	if err != nil {
		log.Fatal(err)
	}
	obj, err := st.Open(key)
	if err != nil {
		log.Fatal(err)
	}
	defer obj.Close()
	b, _ := io.ReadAll(io.NewSectionReader(obj, 2, 5))
	fmt.Println(obj.Size(), string(b), st.Requests())
	// Output: 10 23456 1
}
