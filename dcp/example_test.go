package dcp_test

import (
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt/dcp"
)

// ExampleOpen lists where a 4-rank torch save put the chunks of one
// tensor, and reads the bytes of one chunk's item (a torch.save zip).
func ExampleOpen() {
	r, err := dcp.Open(dcp.DirFS("../testdata/dcp/basic"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	md := r.Metadata()
	fmt.Println(len(md.Entries), "entries")
	e := &md.Entries[0]
	chunks, err := r.Chunks(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.FQN, e.DType, e.Size, e.Path)
	for _, c := range chunks {
		fmt.Printf("  rows %d-%d: rank %d\n", c.Offsets[0], c.Offsets[0]+c.Sizes[0], dcp.RankOf(c.File))
	}
	item, err := r.Item(chunks[0].Location)
	if err != nil {
		fmt.Println(err)
		return
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(item, head); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", head)
	// Output:
	// 25 entries
	// model.embed.weight float32 [10 6] [model embed.weight]
	//   rows 0-3: rank 0
	//   rows 3-6: rank 1
	//   rows 6-9: rank 2
	//   rows 9-10: rank 3
	// "PK\x03\x04"
}
