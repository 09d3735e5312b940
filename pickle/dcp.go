package pickle

import "github.com/ckpt-dev/ckpt/internal/dcpclass"

// The classes of torch.distributed.checkpoint's .metadata pickle (torch
// 2.x FileSystemWriter), named once in internal/dcpclass: plain
// dataclasses and an enum, recorded as *Object and never instantiated.
// torch.Size, dtypes and layouts (through torch.serialization._get_layout)
// are already known. objectClasses adds them to its table when it builds
// it (on first use).
func addDCPClasses(m map[string]bool) map[string]bool {
	for _, c := range dcpclass.All() {
		m[c] = true
	}
	return m
}
