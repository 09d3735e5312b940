// Command s3get is the benchmark's peer for reading from S3 (bench/objstore.sh):
// it downloads one object with minio-go, the client objstore uses, as a
// single stream to a file, as parallel ranged GETs to a file, or as
// parallel ranged GETs into memory. minio-go has no parallel downloader of
// its own, so "parallel" is the plain one: N workers, fixed-size ranges,
// WriteAt at their offsets. Endpoint and credentials come from the
// standard AWS environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
//
//	s3get [-n 8] [-chunk 8388608] single|parallel|memory s3://bucket/key [OUT]
//	s3get put s3://bucket/key FILE    (set-up: creates the bucket, uploads FILE)
//	s3get [-n 8] [-part 67108864] putpar s3://bucket/key FILE
//
// putpar is the plain parallel upload, the peer of ckpt convert to s3://:
// one multipart upload, N workers each sending fixed-size parts read from
// FILE at their offsets (io.SectionReader), then CompleteMultipartUpload.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func main() {
	n := flag.Int("n", 8, "parallel requests")
	chunk := flag.Int64("chunk", 8<<20, "range size")
	part := flag.Int64("part", 64<<20, "part size of putpar")
	flag.Parse()
	args := flag.Args()
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: s3get single|parallel|memory s3://bucket/key [OUT]")
		os.Exit(2)
	}
	u, err := url.Parse(args[1])
	if err != nil {
		fail(err)
	}
	ep, _ := url.Parse(os.Getenv("AWS_ENDPOINT_URL"))
	c, err := minio.New(ep.Host, &minio.Options{Creds: credentials.NewEnvAWS(), Secure: ep.Scheme == "https", Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		fail(err)
	}
	core := minio.Core{Client: c}
	bucket, key := u.Host, strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	if args[0] == "put" {
		// Set-up, not measured: create the bucket and upload args[2].
		if ok, _ := c.BucketExists(ctx, bucket); !ok {
			if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
				fail(err)
			}
		}
		if _, err := c.FPutObject(ctx, bucket, key, args[2], minio.PutObjectOptions{}); err != nil {
			fail(err)
		}
		return
	}
	if args[0] == "putpar" {
		putParallel(ctx, core, bucket, key, args[2], *n, *part)
		return
	}
	start := time.Now()
	st, err := c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		fail(err)
	}
	size := st.Size
	switch args[0] {
	case "single":
		o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			fail(err)
		}
		f, err := os.Create(args[2])
		if err != nil {
			fail(err)
		}
		if _, err := io.CopyBuffer(f, o, make([]byte, 1<<20)); err != nil {
			fail(err)
		}
		if err := f.Close(); err != nil {
			fail(err)
		}
	case "parallel", "memory":
		var w io.WriterAt
		var mem []byte
		if args[0] == "parallel" {
			f, err := os.Create(args[2])
			if err != nil {
				fail(err)
			}
			defer f.Close()
			w = f
		} else {
			mem = make([]byte, size)
		}
		jobs := make(chan int64)
		var wg sync.WaitGroup
		for i := 0; i < *n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, *chunk)
				for off := range jobs {
					m := min(*chunk, size-off)
					var opts minio.GetObjectOptions
					opts.SetRange(off, off+m-1)
					body, _, _, err := core.GetObject(ctx, bucket, key, opts)
					if err != nil {
						fail(err)
					}
					dst := buf[:m]
					if mem != nil {
						dst = mem[off : off+m]
					}
					if _, err := io.ReadFull(body, dst); err != nil {
						fail(err)
					}
					body.Close()
					if w != nil {
						if _, err := w.WriteAt(dst, off); err != nil {
							fail(err)
						}
					}
				}
			}()
		}
		for off := int64(0); off < size; off += *chunk {
			jobs <- off
		}
		close(jobs)
		wg.Wait()
	default:
		fail(fmt.Errorf("unknown mode %q", args[0]))
	}
	d := time.Since(start)
	fmt.Printf("%s: %d bytes in %.2f s, %.2f GB/s\n", args[0], size, d.Seconds(), float64(size)/d.Seconds()/1e9)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "s3get:", err)
	os.Exit(1)
}

// putParallel uploads file to bucket/key: n workers, parts of psize.
func putParallel(ctx context.Context, core minio.Core, bucket, key, file string, n int, psize int64) {
	start := time.Now()
	f, err := os.Open(file)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		fail(err)
	}
	size := fi.Size()
	id, err := core.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		fail(err)
	}
	nparts := int((size + psize - 1) / psize)
	parts := make([]minio.CompletePart, nparts)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				off := int64(i) * psize
				m := min(psize, size-off)
				p, err := core.PutObjectPart(ctx, bucket, key, id, i+1, io.NewSectionReader(f, off, m), m, minio.PutObjectPartOptions{})
				if err != nil {
					fail(err)
				}
				parts[i] = minio.CompletePart{PartNumber: i + 1, ETag: p.ETag}
			}
		}()
	}
	for i := 0; i < nparts; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if _, err := core.CompleteMultipartUpload(ctx, bucket, key, id, parts, minio.PutObjectOptions{}); err != nil {
		fail(err)
	}
	d := time.Since(start)
	fmt.Printf("putpar: %d bytes in %.2f s, %.2f GB/s\n", size, d.Seconds(), float64(size)/d.Seconds()/1e9)
}
