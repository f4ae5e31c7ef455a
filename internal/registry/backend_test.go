package registry

import (
	"reflect"
	"strings"
	"testing"
)

func TestOpenSearchBackend(t *testing.T) {
	withBackend := func(name string, secret string, addresses ...string) ResourceRegistry {
		r := reg(name, nil, "v1 Pod")
		cfg := &OpenSearchConfig{Addresses: addresses}
		if secret != "" {
			cfg.SecretRef = LocalSecretReference{Namespace: "kubesearch", Name: secret}
		}
		r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: cfg}
		return r
	}
	tests := []struct {
		name       string
		registries []ResourceRegistry
		want       *OpenSearchConfig
		wantErr    string
	}{
		{name: "none", registries: []ResourceRegistry{reg("a", nil, "v1 Pod")}},
		{name: "empty backendStore", registries: func() []ResourceRegistry {
			r := reg("a", nil, "v1 Pod")
			r.Spec.BackendStore = &BackendStoreConfig{}
			return []ResourceRegistry{r}
		}()},
		{name: "one, beside registries without a backend",
			registries: []ResourceRegistry{reg("a", nil, "v1 Pod"), withBackend("b", "os", "https://os-0:9200", "https://os-1:9200")},
			want: &OpenSearchConfig{Addresses: []string{"https://os-0:9200", "https://os-1:9200"},
				SecretRef: LocalSecretReference{Namespace: "kubesearch", Name: "os"}}},
		{name: "the same named twice, addresses in another order",
			registries: []ResourceRegistry{withBackend("a", "os", "https://os-0:9200", "https://os-1:9200"), withBackend("b", "os", "https://os-1:9200", "https://os-0:9200")},
			want: &OpenSearchConfig{Addresses: []string{"https://os-0:9200", "https://os-1:9200"},
				SecretRef: LocalSecretReference{Namespace: "kubesearch", Name: "os"}}},
		{name: "other addresses",
			registries: []ResourceRegistry{withBackend("a", "os", "https://os-0:9200"), reg("b", nil), withBackend("c", "os", "https://other:9200")},
			wantErr:    `registries "a" and "c" name different OpenSearch backends (addresses https://os-0:9200, secret kubesearch/os and addresses https://other:9200, secret kubesearch/os)`},
		{name: "other secret",
			registries: []ResourceRegistry{withBackend("a", "os", "https://os-0:9200"), withBackend("b", "", "https://os-0:9200")},
			wantErr:    `registries "a" and "b" name different OpenSearch backends (addresses https://os-0:9200, secret kubesearch/os and addresses https://os-0:9200, no secret)`},
		{name: "credentials are not repeated",
			registries: []ResourceRegistry{withBackend("a", "", "https://os-0:9200"), withBackend("b", "", "https://u:pw@os-0:9200")},
			wantErr:    `addresses https://u:xxxxx@os-0:9200`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OpenSearchBackend(tt.registries)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "pw@") {
					t.Errorf("error leaks a password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOpenSearchBackendReturnsACopy(t *testing.T) {
	r := reg("a", nil)
	r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{Addresses: []string{"https://os:9200"}}}
	got, err := OpenSearchBackend([]ResourceRegistry{r})
	if err != nil {
		t.Fatal(err)
	}
	got.Addresses[0] = "changed"
	if r.Spec.BackendStore.OpenSearch.Addresses[0] != "https://os:9200" {
		t.Error("the result shares its addresses with the registry")
	}
}

func TestOpenSearchBackendFromKarmadaDocs(t *testing.T) {
	regs, err := Load("testdata/karmada-docs/backend-store.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenSearchBackend(regs)
	if err != nil {
		t.Fatal(err)
	}
	want := &OpenSearchConfig{Addresses: []string{"http://10.240.0.100:9200"},
		SecretRef: LocalSecretReference{Namespace: "default", Name: "opensearch-account"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
