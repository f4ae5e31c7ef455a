package queryapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/sync/singleflight"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
)

const (
	// namespacesTTL is how long a cluster's namespaces are kept: a namespace whose first objects
	// are indexed shows in a reviewed subject's lists across namespaces within it (a request naming
	// the namespace sees it at once).
	namespacesTTL = 30 * time.Second
	// maxNamespaces bounds the namespaces of one cluster asked about (of each source).
	maxNamespaces = 10_000
	// namespacesTimeout bounds one reading of a cluster's namespaces.
	namespacesTimeout = 30 * time.Second
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
	for _, r := range i.catalog.resources(cluster, nil) {
		cr := authz.CachedResource{Group: r.Group, Resource: r.Resource, Namespaced: r.Namespaced}
		if !slices.Contains(out, cr) {
			out = append(out, cr)
		}
	}
	return out
}

// Namespaces are the cluster's namespaces: the cached Namespace objects (when a registry selects
// namespaces), and those holding cached objects of any kind, at most maxNamespaces of each. A
// namespace where the subject has a RoleBinding exists, so with namespaces cached, whether a
// subject may see something across namespaces does not depend on objects it may not see. Read
// without any subject's scope: they only say what to ask the member about.
func (i *inventory) Namespaces(ctx context.Context, cluster string) ([]string, error) {
	i.mu.Lock()
	e, ok := i.ns[cluster]
	i.mu.Unlock()
	if ok && i.now().Before(e.expires) {
		return e.names, nil
	}
	v, err, _ := i.flight.Do(cluster, func() (any, error) {
		// The read outlives the request that started it: the others waiting for it must not fail
		// because the first one went away.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), namespacesTimeout)
		defer cancel()
		names, err := i.readNamespaces(ctx, cluster)
		if err != nil {
			return nil, fmt.Errorf("namespaces of cluster %s: %w", cluster, err)
		}
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

func (i *inventory) readNamespaces(ctx context.Context, cluster string) ([]string, error) {
	set := map[string]bool{}
	// A lookup of its own (Peek): only the facet is read, so no snapshot is opened to be released.
	res, err := i.store.Search(ctx, &query.Query{Clusters: []string{cluster}, Limit: 1, MetadataOnly: true, Peek: true,
		Facets: []query.Facet{{Dimension: query.FacetNamespace, Size: maxNamespaces}}})
	if err != nil {
		return nil, err
	}
	for _, f := range res.Facets {
		for _, b := range f.Buckets {
			set[b.Value] = true
		}
	}
	q := &query.Query{Clusters: []string{cluster}, Resources: []query.Resource{{Resource: "namespaces"}}, Limit: query.MaxLimit, MetadataOnly: true, Drain: true}
	for seen := 0; seen < maxNamespaces; {
		page, err := i.store.Search(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			set[gjson.GetBytes(it, "metadata.name").String()] = true
		}
		seen += len(page.Items)
		if page.Continue == "" {
			break
		}
		if seen >= maxNamespaces {
			i.store.Release(ctx, page.Continue)
			break
		}
		q.Continue = page.Continue
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set)), nil
}
