package statedict

// QuantSource returns the stored tensors a weight of a quantized release
// (one whose QuantStored is set) is read from: the codes, and the
// companions in QuantStored.Companions' order. ok is false for any other
// tensor. Writers that keep a scheme's native layout (convert's GGUF
// output copying MXFP4 blocks) read these instead of the dequantized
// values.
func (t *Tensor) QuantSource() (codes *Tensor, companions []*Tensor, ok bool) {
	if t == nil || t.QuantStored == nil || t.Storage == nil {
		return nil, nil, false
	}
	s, ok := t.Storage.src.(*quantSource)
	if !ok {
		return nil, nil, false
	}
	return s.codes, s.comps, true
}
