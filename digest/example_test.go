package digest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/digest"
)

func Example() {
	data := "hello, tensor"
	v, err := digest.Sum(context.Background(), strings.NewReader(data), int64(len(data)))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A streaming writer gets the same value.
	d, _ := digest.New(int64(len(data)))
	fmt.Fprint(d, data)
	w, _ := d.Sum()
	fmt.Println(v == w, len(v.String()))
	empty, _ := digest.Sum(context.Background(), strings.NewReader(""), 0)
	fmt.Println(empty)
	// Output:
	// true 23
	// xxh64c:ef46db3751d8e999
}
