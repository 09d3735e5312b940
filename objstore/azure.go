package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// azureBackend reads a container of Azure Blob Storage (or Azurite's)
// through the Azure SDK's azblob.
type azureBackend struct {
	container string
	c         *container.Client
	anon      bool     // no credentials were found
	secrets   []string // never to appear in a message
}

// newAzure returns the backend of a container. Credentials and endpoint
// come from the environment: AZURE_STORAGE_CONNECTION_STRING, or
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (shared key) or without
// (anonymous: public containers).
func newAzure(name string, transport http.RoundTripper) (*azureBackend, error) {
	opts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: newClient(transport),
		// The Store retries, counting and backing off itself.
		Retry:   policy.RetryOptions{MaxRetries: -1},
		Logging: policy.LogOptions{IncludeBody: false},
	}}
	b := &azureBackend{container: name}
	var c *azblob.Client
	var err error
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		b.secrets = connSecrets(cs)
		c, err = azblob.NewClientFromConnectionString(cs, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: AZURE_STORAGE_CONNECTION_STRING is malformed", ErrBadURL)
		}
	} else {
		account := os.Getenv("AZURE_STORAGE_ACCOUNT")
		if account == "" {
			return nil, fmt.Errorf("%w: set AZURE_STORAGE_ACCOUNT (and AZURE_STORAGE_KEY) or AZURE_STORAGE_CONNECTION_STRING", ErrNoCredentials)
		}
		if strings.ContainsAny(account, "/:@?#") {
			return nil, fmt.Errorf("%w: AZURE_STORAGE_ACCOUNT is not an account name", ErrBadURL)
		}
		service := "https://" + account + ".blob.core.windows.net/"
		if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" {
			b.secrets = []string{key}
			cred, cerr := azblob.NewSharedKeyCredential(account, key)
			if cerr != nil {
				return nil, fmt.Errorf("%w: AZURE_STORAGE_KEY is not a valid key", ErrCredentials)
			}
			c, err = azblob.NewClientWithSharedKeyCredential(service, cred, opts)
		} else {
			b.anon = true
			c, err = azblob.NewClientWithNoCredential(service, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrBadURL, b.scrub(oneLine(err)))
		}
	}
	b.c = c.ServiceClient().NewContainerClient(name)
	return b, nil
}

// connSecrets returns the secret values of a connection string.
func connSecrets(cs string) []string {
	var s []string
	for _, kv := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "accountkey", "sharedaccesssignature":
			s = append(s, v)
		}
	}
	return s
}

var sigRE = regexp.MustCompile(`(?i)(sig|signature|accountkey)=[^&;\s"]*`)

// scrub removes any secret from a message.
func (b *azureBackend) scrub(msg string) string {
	for _, s := range b.secrets {
		msg = strings.ReplaceAll(msg, s, "REDACTED")
	}
	return sigRE.ReplaceAllString(msg, "$1=REDACTED")
}

func (b *azureBackend) url(key string) string { return "az://" + b.container + "/" + key }

// get reads a range pinned to the ETag: the server refuses a replaced
// blob (If-Match, HTTP 412), and the ETag of the answer is checked too.
func (b *azureBackend) get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error) {
	bc := b.c.NewBlobClient(key)
	o := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off, Count: dst.n}}
	if ver.etag != "" {
		etag := azcore.ETag(ver.etag)
		o.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}
	}
	resp, err := bc.DownloadStream(ctx, o)
	if err != nil {
		if off == 0 && bloberror.HasCode(err, bloberror.InvalidRange) {
			// An empty blob has no byte 0.
			p, perr := bc.GetProperties(ctx, nil)
			if perr == nil && p.ContentLength != nil && *p.ContentLength == 0 && p.ETag != nil {
				return 0, 0, version{etag: string(*p.ETag)}, nil
			}
		}
		return 0, 0, ver, err
	}
	defer resp.Body.Close()
	var got version
	if resp.ETag != nil {
		got.etag = string(*resp.ETag)
	}
	if ver.etag != "" && got.etag != ver.etag {
		return 0, 0, ver, ErrChanged
	}
	cr := ""
	if resp.ContentRange != nil {
		cr = *resp.ContentRange
	}
	start, end, size, ok := parseContentRange(cr)
	if !ok || start != off {
		return 0, 0, ver, fmt.Errorf("%w: bad Content-Range %q", ErrNoRange, cr)
	}
	n, err := readBody(ctx, resp.Body, dst, end-start+1)
	return n, size, got, err
}

func (b *azureBackend) list(ctx context.Context, dir string) ([]string, error) {
	o := &container.ListBlobsHierarchyOptions{}
	if dir != "" {
		o.Prefix = &dir
	}
	pager := b.c.NewListBlobsHierarchyPager("/", o)
	budget := listBudgetOf(ctx)
	var names []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		if page.Segment == nil {
			continue
		}
		for _, it := range page.Segment.BlobItems {
			if it.Name == nil {
				continue
			}
			if n := strings.TrimPrefix(*it.Name, dir); n != "" {
				if names, err = budget.addName(names, n); err != nil {
					return nil, err
				}
			}
		}
	}
	return names, nil
}

// classify maps an Azure error; nil when err is not one. The SDK's own
// messages (which dump the request) never reach the user.
func (b *azureBackend) classify(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil
	}
	code := bloberror.Code(re.ErrorCode)
	switch code {
	case bloberror.BlobNotFound:
		return ErrNotFound
	case bloberror.ContainerNotFound:
		return fmt.Errorf("%w %s", ErrNoBucket, b.container)
	case bloberror.ConditionNotMet:
		return ErrChanged
	case bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo:
		return fmt.Errorf("%w (%s)", ErrCredentials, code)
	case bloberror.ServerBusy, bloberror.OperationTimedOut, bloberror.InternalError:
		return &transientError{msg: fmt.Sprintf("server busy: %s (HTTP %d)", code, re.StatusCode)}
	}
	switch {
	case re.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		if b.anon {
			return fmt.Errorf("%w (%w: set AZURE_STORAGE_KEY or AZURE_STORAGE_CONNECTION_STRING)", ErrAccessDenied, ErrNoCredentials)
		}
		return fmt.Errorf("%w (HTTP %d)", ErrAccessDenied, re.StatusCode)
	case re.StatusCode == http.StatusPreconditionFailed:
		return ErrChanged
	case re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500:
		return &transientError{msg: fmt.Sprintf("server busy or failing (HTTP %d)", re.StatusCode)}
	}
	if code != "" {
		return fmt.Errorf("server error: %s (HTTP %d)", b.scrub(string(code)), re.StatusCode)
	}
	return fmt.Errorf("unexpected HTTP status %d", re.StatusCode)
}
