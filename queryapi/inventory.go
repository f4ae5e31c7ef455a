package queryapi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
)

const (
	// namespacesTTL is how long a cluster's namespaces are kept: a namespace whose first objects
	// are indexed shows in a reviewed subject's lists across namespaces within it (a request naming
	// the namespace sees it at once).
	namespacesTTL = 30 * time.Second
	// maxNamespaces bounds the namespaces of one cluster asked about.
	maxNamespaces = 10_000
)

// inventory is what the SubjectAccessReview mode asks the members about: the catalog's
// resources, and the namespaces the index holds objects in, per cluster, from a facet.
type inventory struct {
	catalog *catalog
	store   searcher
	now     func() time.Time

	flight singleflight.Group
	mu     sync.Mutex
	ns     map[string]namespacesEntry
}

type namespacesEntry struct {
	names   []string
	expires time.Time
}

func newInventory(c *catalog, s searcher) *inventory {
	return &inventory{catalog: c, store: s, now: time.Now, ns: map[string]namespacesEntry{}}
}

func (i *inventory) Clusters() []string { return i.catalog.clusters() }

// Resources are a cluster's cached resources, once each whatever the versions collected.
func (i *inventory) Resources(cluster string) []authz.CachedResource {
	var out []authz.CachedResource
	for _, r := range i.catalog.resources(cluster) {
		cr := authz.CachedResource{Group: r.Group, Resource: r.Resource, Namespaced: r.Namespaced}
		if !slices.Contains(out, cr) {
			out = append(out, cr)
		}
	}
	return out
}

// Namespaces are those holding cached objects of the cluster, at most maxNamespaces (the most
// populated), read without any subject's scope: they only say what to ask the member about.
func (i *inventory) Namespaces(ctx context.Context, cluster string) ([]string, error) {
	i.mu.Lock()
	e, ok := i.ns[cluster]
	i.mu.Unlock()
	if ok && i.now().Before(e.expires) {
		return e.names, nil
	}
	v, err, _ := i.flight.Do(cluster, func() (any, error) {
		q := &query.Query{Clusters: []string{cluster}, Limit: 1, MetadataOnly: true,
			Facets: []query.Facet{{Dimension: query.FacetNamespace, Size: maxNamespaces}}}
		res, err := i.store.Search(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("namespaces of cluster %s: %w", cluster, err)
		}
		if res.Continue != "" {
			i.store.Release(ctx, res.Continue)
		}
		var names []string
		for _, f := range res.Facets {
			for _, b := range f.Buckets {
				if b.Value != "" {
					names = append(names, b.Value)
				}
			}
		}
		slices.Sort(names)
		i.mu.Lock()
		i.ns[cluster] = namespacesEntry{names: names, expires: i.now().Add(namespacesTTL)}
		i.mu.Unlock()
		return names, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
