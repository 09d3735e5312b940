package objstore

import (
	"context"
	"os"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func newServer(t *testing.T) *miniotest.Server { return miniotest.New(t) }

func assumeRole(endpoint, ak, sk, policy string) (credentials.Value, error) {
	c, err := credentials.NewSTSAssumeRole(endpoint, credentials.STSAssumeRoleOptions{AccessKey: ak, SecretKey: sk, Policy: policy, Location: "us-east-1"})
	if err != nil {
		return credentials.Value{}, err
	}
	return c.GetWithContext(nil)
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openObject opens the object rawURL names in a new Store (opts), closed
// at the end of the test.
func openObject(t *testing.T, rawURL string, opts ...Option) (*Store, *Object) {
	t.Helper()
	st, key, err := NewStore(context.Background(), rawURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obj.Close() })
	return st, obj
}
