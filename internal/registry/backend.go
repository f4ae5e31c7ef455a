package registry

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// OpenSearchBackend returns the OpenSearch backend the registries name, or nil when none names one.
// One indexer deployment writes to one OpenSearch (unlike Karmada, which may store each registry
// elsewhere): registries naming different backends — other addresses, in any order, or another
// secretRef — are an error naming them. Registries without a backendStore do not constrain the
// choice; their documents go to the same OpenSearch.
func OpenSearchBackend(registries []ResourceRegistry) (*OpenSearchConfig, error) {
	var (
		chosen *OpenSearchConfig
		by     string
	)
	for i := range registries {
		r := &registries[i]
		if r.Spec.BackendStore == nil || r.Spec.BackendStore.OpenSearch == nil {
			continue
		}
		cfg := r.Spec.BackendStore.OpenSearch
		if chosen == nil {
			chosen, by = cfg, r.Name
			continue
		}
		if !sameBackend(chosen, cfg) {
			return nil, fmt.Errorf("registries %q and %q name different OpenSearch backends (%s and %s); one indexer deployment writes to one OpenSearch",
				by, r.Name, describeBackend(chosen), describeBackend(cfg))
		}
	}
	if chosen == nil {
		return nil, nil
	}
	backend := *chosen
	backend.Addresses = slices.Clone(chosen.Addresses)
	return &backend, nil
}

func sameBackend(a, b *OpenSearchConfig) bool {
	return a.SecretRef == b.SecretRef && slices.Equal(sortedSet(a.Addresses), sortedSet(b.Addresses))
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func describeBackend(c *OpenSearchConfig) string {
	addrs := make([]string, len(c.Addresses))
	for i, a := range c.Addresses {
		// Validation forbids credentials in addresses, but this may run on unvalidated input.
		if u, err := url.Parse(a); err == nil {
			addrs[i] = u.Redacted()
		} else {
			addrs[i] = redactURL(a)
		}
	}
	d := "addresses " + strings.Join(addrs, ", ")
	if c.SecretRef.Name != "" {
		d += fmt.Sprintf(", secret %s/%s", c.SecretRef.Namespace, c.SecretRef.Name)
	} else {
		d += ", no secret"
	}
	return d
}
