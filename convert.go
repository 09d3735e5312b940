package ckpt

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Convert converts ck to out as convert.Convert does, where out may also be
// an s3://, gs:// or az:// URL (a key, or a prefix ending in "/" for
// directory and sharded outputs). To a URL the output is streamed to the
// bucket as it is converted, with no local copy (objstore.Writer: parts
// in parallel, memory bounded by the concurrency and the part size);
// only a zstd-compressed safetensors output is first written plain to
// the local temporary directory. Each object appears only when complete,
// shards first and the index last; on any failure the uploads are
// aborted and the objects this call already committed removed, so
// nothing is left behind. Existing objects are replaced only with
// ConvertWithForce(true) (ErrOutputExists otherwise); https:// outputs
// are refused.
//
// A DCP output (ConvertWithFormat(OutputDCP)) goes under the prefix out
// as objects __R_0.distcp, then .metadata. With ConvertWithPart each
// process writes its own objects and part 0 writes the index or .metadata
// once it has seen (HEAD requests, polling up to ConvertWithPartWait)
// every other part's objects with their planned sizes.
func Convert(ctx context.Context, ck *statedict.Checkpoint, out string, opts ...ConvertOption) (*ConvertSummary, error) {
	key, opts, err := destination(ctx, out, opts)
	if err != nil {
		return nil, err
	}
	sum, err := convert.Convert(ctx, ck, key, opts...)
	return sum, existsErr(err)
}

// ConvertTensorParallel writes one file per rank of a tensor-parallel
// group of world ranks under out, as convert.TensorParallel does, where
// out may also be an s3://, gs:// or az:// prefix (ending in "/"): the
// rank files are then streamed to the bucket as Convert streams its
// outputs, and on failure those already committed are removed. A URL of
// another scheme is refused (https://: read-only; others:
// convert.ErrDestination) before anything is written.
func ConvertTensorParallel(ctx context.Context, ck *statedict.Checkpoint, out string, world int, rules []SplitRule, opts ...ConvertOption) ([]*ConvertSummary, error) {
	key, opts, err := destination(ctx, out, opts)
	if err != nil {
		return nil, err
	}
	sums, err := convert.TensorParallel(ctx, ck, key, world, rules, opts...)
	return sums, existsErr(err)
}

// destination turns an output that is an object-store URL into its key
// in the store and opts with the store as convert's Destination; a local
// output is returned as it is.
func destination(ctx context.Context, out string, opts []convert.Option) (string, []convert.Option, error) {
	if !objstore.IsURL(out) {
		return out, opts, nil
	}
	st, key, err := objstore.NewStore(ctx, out, objstore.WithPartSize(writePartSize))
	if err != nil {
		return "", nil, err
	}
	if !st.Writable() {
		return "", nil, &objstore.Error{Op: "upload", URL: st.URL(key), Err: objstore.ErrReadOnly}
	}
	d := &storeDestination{st: st, force: convert.Forced(opts...)}
	return key, append(append([]convert.Option{}, opts...), convert.WithDestination(d)), nil
}

// existsErr makes an object that appeared at an output's key since the
// checks convert.ErrExists too.
func existsErr(err error) error {
	if errors.Is(err, objstore.ErrExists) && !errors.Is(err, convert.ErrExists) {
		return fmt.Errorf("%w: %w", convert.ErrExists, err)
	}
	return err
}

// writePartSize is the part size of a streamed output: the writer holds
// up to (concurrency + 2) parts, 80 MiB with 8 MiB parts (about 210 MB of
// RSS with the garbage collector's slack, under the 256 MB that reading
// keeps to), against 160 MiB (300 MB) with 16 MiB and 640 MiB (760 MB)
// with the Store's default 64 MiB; converting 1.6 GB to MinIO took the
// same time with 8 and 16 MiB parts (docs/benchmarks.md). 8 MiB is also
// the AWS CLI's default part size. Parts grow past 1000 of them.
const writePartSize = 8 << 20

// storeDestination is a bucket as convert's Destination.
type storeDestination struct {
	st    *objstore.Store
	force bool
}

func (d *storeDestination) Exists(ctx context.Context, name string) (bool, error) {
	return d.st.Exists(ctx, name)
}

func (d *storeDestination) Create(ctx context.Context, name string, head int64) (convert.Output, error) {
	w, err := d.st.Create(ctx, name, objstore.WithHead(head), objstore.WithReplace(d.force))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Size is a HEAD request (SizeDestination, for --part).
func (d *storeDestination) Size(ctx context.Context, name string) (int64, bool, error) {
	return d.st.Size(ctx, name)
}

func (d *storeDestination) Remove(ctx context.Context, name string) error {
	return d.st.Remove(ctx, name)
}

func (d *storeDestination) Name(name string) string { return d.st.URL(name) }
