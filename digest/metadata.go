package digest

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MetadataKey is the safetensors __metadata__ key under which ckpt
// records the digests of a file's tensors: a JSON object mapping each
// stored tensor's name to its digest over the bytes in the file, printed
// ("xxh64c:..."). ckpt convert writes it; ckpt load and ckpt verify check
// the bytes they read against it.
const MetadataKey = "ckpt.digests"

// ErrMetadata: a file's recorded digests (MetadataKey) cannot be read.
var ErrMetadata = errors.New("digest: malformed checksum metadata")

// ParseMetadata reads the MetadataKey entry of safetensors metadata: a
// JSON object of tensor name to printed digest. Missing metadata is an
// empty map; anything else malformed is ErrMetadata.
func ParseMetadata(md map[string]string) (map[string]Value, error) {
	out := map[string]Value{}
	s, ok := md[MetadataKey]
	if !ok {
		return out, nil
	}
	var raw map[string]string
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMetadata, MetadataKey, err)
	}
	for name, d := range raw {
		v, err := Parse(d)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: %v", ErrMetadata, MetadataKey, name, err)
		}
		out[name] = v
	}
	return out, nil
}
