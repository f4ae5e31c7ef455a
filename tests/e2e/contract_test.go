//go:build e2e

package e2e

import (
	"testing"

	"github.com/kubesearch/kubesearch/internal/blevestore"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/store/storetest"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestStoreContract runs the storage contract suite (internal/store/storetest) on the test bed's
// OpenSearch, under an index prefix of its own that is deleted afterwards, and on the embedded
// store in a temporary folder: the same corpus, the same queries, the same answers.
func TestStoreContract(t *testing.T) {
	env := testbed.Get(t)
	tokenKey := []byte("contract-suite-token-key")

	prefix := templatePrefix(t, env, "contract")
	search, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: prefix},
		TokenKey: tokenKey, KeepAlive: storetest.KeepAlive, Limits: storetest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { search.Close() })
	if err := search.Setup(t.Context(), store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}

	embedded, err := blevestore.New(blevestore.Options{Dir: t.TempDir(), TokenKey: tokenKey, KeepAlive: storetest.KeepAlive, Limits: storetest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := embedded.Close(); err != nil {
			t.Errorf("close the embedded store: %v", err)
		}
	})
	if err := embedded.Setup(t.Context(), store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}

	storetest.Compare(t, map[string]storetest.Backend{"opensearch": search, "blevestore": embedded})
}
