// Command emuput is the set-up of bench/objstore_emu.sh: it creates a
// bucket or container on a storage emulator and uploads one local file to
// it, byte for byte (not through ckpt, which is what is measured).
//
//	emuput gs://bucket/key FILE   fake-gcs-server at $STORAGE_EMULATOR_HOST
//	                              (one media upload, streamed from FILE)
//	emuput az://container/key FILE   Azurite via $AZURE_STORAGE_CONNECTION_STRING
//	                              (azblob's block upload of FILE)
//	emuput sas az://container     prints a read/list SAS URL of the container
//	                              (1 hour), for rclone's azureblob sas_url
//
// An existing bucket or container is fine; the object is replaced.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "sas" {
		u, err := containerSAS(os.Args[2])
		if err != nil {
			fmt.Fprintf(os.Stderr, "emuput sas %s: %v\n", os.Args[2], err)
			os.Exit(1)
		}
		fmt.Println(u)
		return
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: emuput gs://bucket/key|az://container/key FILE")
		os.Exit(2)
	}
	if err := put(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "emuput %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func put(dst, file string) error {
	u, err := url.Parse(dst)
	if err != nil {
		return err
	}
	bucket, key := u.Host, strings.TrimPrefix(u.Path, "/")
	if bucket == "" || key == "" {
		return errors.New("want SCHEME://bucket/key")
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	switch u.Scheme {
	case "gs":
		return putGCS(bucket, key, f)
	case "az":
		return putAzure(bucket, key, f)
	}
	return fmt.Errorf("scheme %q: want gs or az", u.Scheme)
}

// check closes resp and returns an error unless it succeeded or its
// status is also (when also is not 0).
func check(resp *http.Response, err error, also int) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if also != 0 && resp.StatusCode == also {
		return nil
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

func putGCS(bucket, key string, f *os.File) error {
	host := os.Getenv("STORAGE_EMULATOR_HOST")
	if host == "" {
		return errors.New("STORAGE_EMULATOR_HOST is not set")
	}
	base := "http://" + strings.TrimPrefix(host, "http://")
	body := strings.NewReader(fmt.Sprintf(`{"name":%q}`, bucket))
	// 409: the bucket exists already.
	resp, err := http.Post(base+"/storage/v1/b", "application/json", body)
	if err := check(resp, err, http.StatusConflict); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/upload/storage/v1/b/"+url.PathEscape(bucket)+
		"/o?uploadType=media&name="+url.QueryEscape(key), f)
	if err != nil {
		return err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	return check(resp, err, 0)
}

func putAzure(container, key string, f *os.File) error {
	if _, err := connString(); err != nil {
		return err
	}
	c, err := azblob.NewClientFromConnectionString(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"), nil)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := c.CreateContainer(ctx, container, nil); err != nil {
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusConflict {
			return fmt.Errorf("create container: %w", err)
		}
	}
	_, err = c.UploadFile(ctx, container, key, f, &azblob.UploadFileOptions{BlockSize: 8 << 20, Concurrency: 4})
	return err
}

// connString returns the fields of $AZURE_STORAGE_CONNECTION_STRING.
func connString() (map[string]string, error) {
	cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	if cs == "" {
		return nil, errors.New("AZURE_STORAGE_CONNECTION_STRING is not set")
	}
	m := map[string]string{}
	for _, f := range strings.Split(cs, ";") {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	if m["AccountName"] == "" || m["AccountKey"] == "" || m["BlobEndpoint"] == "" {
		return nil, errors.New("AZURE_STORAGE_CONNECTION_STRING lacks AccountName, AccountKey or BlobEndpoint")
	}
	return m, nil
}

func containerSAS(dst string) (string, error) {
	u, err := url.Parse(dst)
	if err != nil {
		return "", err
	}
	if u.Scheme != "az" || u.Host == "" {
		return "", errors.New("want az://container")
	}
	m, err := connString()
	if err != nil {
		return "", err
	}
	cred, err := azblob.NewSharedKeyCredential(m["AccountName"], m["AccountKey"])
	if err != nil {
		return "", err
	}
	q, err := sas.BlobSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour).UTC(),
		Permissions:   (&sas.ContainerPermissions{Read: true, List: true}).String(),
		ContainerName: u.Host,
	}.SignWithSharedKey(cred)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(m["BlobEndpoint"], "/") + "/" + u.Host + "?" + q.Encode(), nil
}
