package pickle_test

import (
	"archive/zip"
	"fmt"
	"io"
	"log"

	"github.com/ckpt-dev/ckpt/pickle"
)

// Read the pickle of a torch.save zip and list its tensors without Python.
func Example() {
	zr, err := zip.OpenReader("testdata/state_dict.pt")
	if err != nil {
		log.Fatal(err)
	}
	defer zr.Close()
	f, err := zr.Open("state_dict/data.pkl")
	if err != nil {
		log.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		log.Fatal(err)
	}

	v, err := pickle.Unpickle(data) // storages are parsed with ParseStoragePID
	if err != nil {
		log.Fatal(err)
	}
	sd := v.(*pickle.Dict)
	for _, e := range sd.Entries[:5] {
		t := e.Value.(*pickle.Tensor)
		fmt.Printf("%s %s %v stride %v offset %d storage %s on %s param=%v\n",
			e.Key, t.DType, t.Shape, t.Stride, t.Offset, t.Storage.Key, t.Storage.Location, t.Parameter)
	}
	// Output:
	// w float32 [3 4] stride [4 1] offset 0 storage 0 on cpu param=false
	// row float32 [4] stride [1] offset 4 storage 0 on cpu param=false
	// col float32 [3] stride [4] offset 2 storage 0 on cpu param=false
	// wt float32 [4 3] stride [1 4] offset 0 storage 0 on cpu param=false
	// bias bfloat16 [4] stride [1] offset 0 storage 1 on cpu param=true
}
