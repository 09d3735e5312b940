// Package objstore reads and writes checkpoints in object storage and on
// web servers: s3:// (AWS and any S3-compatible server such as MinIO),
// gs://bucket/key (Google Cloud Storage), az://container/key (Azure Blob
// Storage) and https:// (or http://) URLs of servers that honour Range
// requests. It is the only package of ckpt that imports cloud clients
// (minio-go, Azure's azblob, and golang.org/x/oauth2/google for Google's
// credentials). gs:// is a client of the package's own over net/http,
// speaking the JSON API (media downloads, listings, uploads in one request
// or resumable, compose, delete): Google's Go client pulled in grpc,
// protobuf registries and OpenTelemetry, whose package initialisation cost
// every command of ckpt ~17 ms before main.
//
// Reading: Open returns an Object, an io.ReaderAt over ranged GETs. Small
// random reads (a checkpoint's metadata) are served from windows of
// MetaWindow bytes, so that opening a safetensors file or a torch zip
// costs one to three requests; larger and sequential reads go in chunks
// of ChunkSize, at most Concurrency requests in flight per Store, with a
// bounded read-ahead for sequential consumers. Memory is capped by the
// options whatever the object size. Every GET after the first pins the
// object's version (If-Match on its ETag, or If-Unmodified-Since where a
// web server gives no ETag; on GCS the generation, ifGenerationMatch):
// an object replaced mid-read is ErrChanged, never a mix of two versions.
//
// Writing: Create returns a Writer that streams one object to s3://,
// gs:// or az:// with bounded memory, no local copy: parts go up in
// parallel as they fill (S3 multipart upload, Azure staged blocks; GCS
// one resumable upload), the first bytes may be held back and rewritten
// (a header patched at the end), and the object appears only at Commit,
// complete; Abort, a failed Commit or a cancelled context leave nothing
// behind, not even a pending upload. Upload copies a local file the same
// way. https:// is read-only.
//
// Credentials and endpoints come from the standard environment and files
// only: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_PROFILE and ~/.aws/credentials, instance roles; AWS_ENDPOINT_URL (or
// AWS_ENDPOINT_URL_S3) for S3-compatible servers, addressed path-style;
// AWS_REGION or AWS_DEFAULT_REGION. For gs://: GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's application default credentials or the metadata server on
// Google Cloud (none: anonymous, for public buckets); STORAGE_EMULATOR_HOST
// for an emulator (host:port, or a URL with its scheme; no credentials
// then). The credentials go only to the JSON API's own host, over https.
// For az://:
// AZURE_STORAGE_CONNECTION_STRING (which also names a custom endpoint,
// such as Azurite's), or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY
// (without a key: anonymous, for public containers). No secret appears in
// any error.
//
// Servers are not trusted (docs/limits.md lists the bounds). Redirects
// are followed by the https://, gs:// and az:// clients (minio-go, for
// s3://, follows none), at most 5 per request: to another origin (scheme,
// host and port) only over https, and never from a public address to a
// private, loopback or link-local one, nor from a private or loopback one
// to a link-local one (169.254.169.254, the clouds' metadata servers:
// judged by the addresses a name resolves to, and again when dialling), so
// that a local MinIO or emulator may still redirect within the machine. A
// redirect to another host goes without the headers that may carry
// credentials (Authorization, Cookie, x-amz-*, x-ms-*, x-goog-*) and
// without the first URL's query values (a SAS signature). A refusal is
// ErrRedirect. A response body that sends nothing for the idle timeout
// (WithIdleTimeout, $CKPT_NET_IDLE_TIMEOUT, default 30 s), or arrives
// slower than the low-speed rule allows (WithLowSpeed, default 1024 bytes
// a second over 30 s of waiting), is abandoned and retried; no retry
// starts later than the retry time after a request's first failure
// (WithRetryTime, default 30 s). Listings are bounded in pages, names,
// name length and bytes (ErrLimit), and the Store's context cancels them;
// a Store lists a directory once, a failed listing included. Object names are
// escaped segment by segment; a name whose segment is or decodes to "."
// or "..", or holds "/" or "\" once decoded, is refused (ErrBadURL).
//
// abfs:// and abfss:// are not supported (ErrUnsupportedScheme).
package objstore
