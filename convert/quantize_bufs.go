package convert

import "github.com/ckpt-dev/ckpt/internal/par"

// quantBufs holds --quantize's byte buffers (quantize.go): each weight's
// chunk cache of codes, given back once the weight's last codes are
// read, and the source rows its quantizer reads. One list for every
// weight, so that a convert of many weights holds a few buffers, not a
// set per weight written.
var quantBufs = &par.FreeList[byte]{Max: 8}
