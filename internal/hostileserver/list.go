package hostileserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// ListPage returns page n (counted from 1 over the server's life) of the
// listing r asks for (its query's "prefix" in every API): the full names
// of the objects on it, and whether the server says that more follow.
type ListPage func(n int64, r *http.Request) (keys []string, more bool)

// Endless is a ListPage that always says "more to come", with names
// distinct objects under the prefix on each page.
func Endless(names int) ListPage {
	return func(n int64, r *http.Request) ([]string, bool) {
		prefix := r.URL.Query().Get("prefix")
		keys := make([]string, names)
		for i := range keys {
			keys[i] = fmt.Sprintf("%sk%d-%d", prefix, n, i)
		}
		return keys, true
	}
}

// IsListing reports whether r asks for a directory listing in the API of
// S3 (ListObjectsV2), GCS (the JSON API's objects.list) or Azure (List
// Blobs).
func IsListing(r *http.Request) bool {
	q := r.URL.Query()
	switch {
	case q.Get("list-type") == "2":
		return true
	case q.Get("comp") == "list" && q.Get("restype") == "container":
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/storage/v1/b/") && strings.HasSuffix(r.URL.Path, "/o")
}

// S3List answers ListObjectsV2 requests with the pages page gives, and
// any other request with S3's 404 (NoSuchKey).
func S3List(page ListPage) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list-type") != "2" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>`)
			return
		}
		i := n.Add(1)
		prefix := r.URL.Query().Get("prefix")
		keys, more := page(i, r)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><Prefix>%s</Prefix><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>%v</IsTruncated>`,
			html.EscapeString(prefix), more)
		if more {
			fmt.Fprintf(w, "<NextContinuationToken>t%d</NextContinuationToken>", i)
		}
		for _, k := range keys {
			fmt.Fprintf(w, "<Contents><Key>%s</Key><Size>1</Size></Contents>", html.EscapeString(k))
		}
		io.WriteString(w, "</ListBucketResult>")
	}
}

// GCSList answers the JSON API's objects.list requests (GET
// /storage/v1/b/BUCKET/o, as the Go client sends them to an emulator) with
// the pages page gives, and any other request with a 404.
func GCSList(page ListPage) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/storage/v1/b/") || !strings.HasSuffix(r.URL.Path, "/o") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":404,"message":"No such object"}}`)
			return
		}
		i := n.Add(1)
		keys, more := page(i, r)
		type item struct {
			Kind   string `json:"kind"`
			Name   string `json:"name"`
			Bucket string `json:"bucket"`
		}
		resp := struct {
			Kind  string `json:"kind"`
			Next  string `json:"nextPageToken,omitempty"`
			Items []item `json:"items"`
		}{Kind: "storage#objects", Items: make([]item, len(keys))}
		for j, k := range keys {
			resp.Items[j] = item{"storage#object", k, "bucket"}
		}
		if more {
			resp.Next = fmt.Sprintf("t%d", i)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	}
}

// AzureList answers List Blobs requests (restype=container&comp=list)
// with the pages page gives, and any other request with Azure's 404
// (BlobNotFound).
func AzureList(page ListPage) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("comp") != "list" || q.Get("restype") != "container" {
			w.Header().Set("x-ms-error-code", "BlobNotFound")
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code><Message>no</Message></Error>`)
			return
		}
		i := n.Add(1)
		prefix := q.Get("prefix")
		keys, more := page(i, r)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><EnumerationResults ContainerName="container"><Prefix>%s</Prefix><Delimiter>/</Delimiter><Blobs>`, html.EscapeString(prefix))
		for _, k := range keys {
			fmt.Fprintf(w, "<Blob><Name>%s</Name><Properties><Content-Length>1</Content-Length></Properties></Blob>", html.EscapeString(k))
		}
		io.WriteString(w, "</Blobs>")
		if more {
			fmt.Fprintf(w, "<NextMarker>t%d</NextMarker>", i)
		}
		io.WriteString(w, "</EnumerationResults>")
	}
}

// S3Env is the environment that points the S3 client at the server at
// url: anonymous, path-style, with no credentials from elsewhere (the
// file named by AWS_SHARED_CREDENTIALS_FILE is none).
func S3Env(url, noFile string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": "", "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_SHARED_CREDENTIALS_FILE": noFile, "AWS_EC2_METADATA_DISABLED": "true",
	}
}

// GCSEnv is the environment that points the GCS client at the server at
// url, as at an emulator (no credentials).
func GCSEnv(url string) map[string]string {
	return map[string]string{"STORAGE_EMULATOR_HOST": strings.TrimPrefix(url, "http://")}
}

// AzureEnv is the environment that points the Azure client at the server
// at url, as account "acct" with a key that is no secret.
func AzureEnv(url string) map[string]string {
	key := base64.StdEncoding.EncodeToString([]byte("not-a-secret-key-for-tests-only!"))
	return map[string]string{"AZURE_STORAGE_CONNECTION_STRING": fmt.Sprintf(
		"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=%s;BlobEndpoint=%s/acct;", key, url)}
}
