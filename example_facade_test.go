package ckpt_test

import (
	"context"
	"fmt"

	"github.com/ckpt-dev/ckpt"
)

// Scan lists every global a checkpoint's pickles import, with a verdict,
// running nothing.
func ExampleScan() {
	rep, err := ckpt.Scan(context.Background(), []string{"testdata/fixtures/zip_basic.pt"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Files, "file,", rep.Pickles, "pickle, verdict", rep.Verdict)
	for _, f := range rep.Findings {
		if f.Verdict != ckpt.VerdictAllowed {
			fmt.Println(f.Verdict, f.Global)
		}
	}
	// Output:
	// 1 file, 1 pickle, verdict allowed
}

// Devices reports the driver and the GPUs, and a machine without either
// as a normal answer.
func ExampleDevices() {
	env := ckpt.CUDAEnvironment(func(string) (string, bool) { return "", false })
	rep, err := ckpt.Devices(context.Background(), ckpt.CUDASystem{}, env)
	if err != nil {
		fmt.Println(err)
		return
	}
	if !rep.Driver.Found || len(rep.Devices) == 0 {
		fmt.Println("no GPU: tensors stay on the CPU")
		return
	}
	for _, d := range rep.Devices {
		fmt.Printf("cuda:%d %s\n", d.Ordinal, d.Name)
	}
}
