// Package objstore reads and writes checkpoints in object storage and on
// web servers: s3:// (AWS and any S3-compatible server such as MinIO) and
// https:// (or http://) URLs of servers that honour Range requests. It is
// the only package of ckpt that imports a cloud client (minio-go).
//
// Reading: Open returns an Object, an io.ReaderAt over ranged GETs. Small
// random reads (a checkpoint's metadata) are served from windows of
// MetaWindow bytes, so that opening a safetensors file or a torch zip
// costs one to three requests; larger and sequential reads go in chunks
// of ChunkSize, at most Concurrency requests in flight per Store, with a
// bounded read-ahead for sequential consumers. Memory is capped by the
// options whatever the object size. Every GET after the first pins the
// object's version (If-Match on its ETag, or If-Unmodified-Since where a
// web server gives no ETag): an object replaced mid-read is ErrChanged,
// never a mix of two versions.
//
// Writing: Upload copies a local file to s3:// with a multipart upload
// that is completed only when every part is in, and aborted on any error
// or cancellation, so that nothing, not even a pending upload, is left
// behind.
//
// Credentials and endpoints come from the standard environment and files
// only: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_PROFILE and ~/.aws/credentials, instance roles; AWS_ENDPOINT_URL (or
// AWS_ENDPOINT_URL_S3) for S3-compatible servers, addressed path-style;
// AWS_REGION or AWS_DEFAULT_REGION. No secret appears in any error.
//
// gs:// and az:// are not supported (ErrUnsupportedScheme).
package objstore
