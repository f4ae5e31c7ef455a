package queryapi

import (
	"cmp"
	"maps"
	"slices"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// apiResource is one resource kubesearch caches of one member, as the member's discovery describes
// it: the version collected (documents hold objects of that version only), whether it is
// namespaced, its short names and categories.
type apiResource struct {
	Group, Version, Resource, Kind, Singular string
	Namespaced                               bool
	ShortNames, Categories                   []string
	// from is where the objects are stored when the facade serves them converted from another
	// API group (events.go); nil when they are stored as served.
	from *storedForm
}

func (r apiResource) groupVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// catalog knows what each member cluster has cached, from the collectors' selection records: the
// facade's discovery, the clusters of the one-cluster views and of kubeconfig contexts. Only what is
// collected is served: a resource the member serves but no registry selects is not discovered.
type catalog struct {
	mu sync.Mutex
	// records are the live selection records by their key; several selections (one per namespace)
	// may resolve to the same resource.
	records map[string]registry.SelectionRecord
	// changed is closed and replaced when what the fleet caches changes (a member, a resource of a
	// member, its version), so open fleet watches end and their clients re-list.
	changed chan struct{}
	synced  bool

	// openapi are the members' OpenAPI v3 documents the collectors relay (see openapi.go): by
	// cluster and path, the hash of the member's document. docs holds each document once, by
	// hash, however many members serve it: members of one Kubernetes version serve the same.
	openapi map[string]map[string]string
	docs    map[string]*openAPIDoc
}

// openAPIDoc is one OpenAPI document and how many (cluster, path) serve it.
type openAPIDoc struct {
	body []byte
	refs int
	// fields are the document's kinds as field selectors check them, built at the first check.
	fieldsOnce sync.Once
	fields     *schemaIndex
}

// schemaOf is the schema of a kind in the document a view serves for its group-version (the one
// openAPIServed picks), nil when no member of the view relayed one or it does not describe the
// kind.
func (c *catalog) schemaOf(cluster string, vis visibleFunc, gvk schema.GroupVersionKind) *schemaNode {
	hash, ok := c.openAPIServed(cluster, vis)[registry.OpenAPIPath(gvk.Group, gvk.Version)]
	if !ok {
		return nil
	}
	c.mu.Lock()
	d := c.docs[hash]
	c.mu.Unlock()
	if d == nil {
		return nil
	}
	// Built outside the catalog's lock: the ledger's reader must not wait for a parse.
	d.fieldsOnce.Do(func() { d.fields = newSchemaIndex(d.body) })
	return d.fields.kind(gvk)
}

func newCatalog() *catalog {
	return &catalog{records: map[string]registry.SelectionRecord{}, changed: make(chan struct{}),
		openapi: map[string]map[string]string{}, docs: map[string]*openAPIDoc{}}
}

// applyOpenAPI records a cluster's OpenAPI document of a path, or its removal (body nil).
func (c *catalog) applyOpenAPI(cluster, path, hash string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.openapi[cluster][path]; ok {
		if d := c.docs[old]; d != nil {
			if d.refs--; d.refs <= 0 {
				delete(c.docs, old)
			}
		}
		delete(c.openapi[cluster], path)
		if len(c.openapi[cluster]) == 0 {
			delete(c.openapi, cluster)
		}
	}
	if body == nil {
		return
	}
	d := c.docs[hash]
	if d == nil {
		d = &openAPIDoc{body: body}
		c.docs[hash] = d
	}
	d.refs++
	if c.openapi[cluster] == nil {
		c.openapi[cluster] = map[string]string{}
	}
	c.openapi[cluster][path] = hash
}

// apply records one selection record, or its removal (rec nil).
func (c *catalog) apply(key string, rec *registry.SelectionRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.records[key]
	if rec == nil {
		delete(c.records, key)
	} else {
		c.records[key] = *rec
	}
	moved := had != (rec != nil) || (had && rec != nil &&
		(old.Cluster != rec.Cluster || old.Group != rec.Group || old.Version != rec.Version || old.Resource != rec.Resource))
	if moved {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// markSynced says the records read so far are every record that existed at start.
func (c *catalog) markSynced() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced = true
}

func (c *catalog) isSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// clusters are the member clusters with something cached, sorted.
func (c *catalog) clusters() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clustersLocked()
}

func (c *catalog) clustersLocked() []string {
	set := map[string]bool{}
	for _, r := range c.records {
		set[r.Cluster] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// visibleFunc says whether a subject may read something of a resource of a cluster. The catalog
// answers a subject from the records it may see only, so that nothing it serves (a version, a
// short name, a column, an OpenAPI document, a cluster of a resourceVersion) comes from a member
// the subject cannot see. nil sees every record.
type visibleFunc func(cluster, group, resource string) bool

// servedRecord is a resource a member caches as the facade serves it: a selection record, or the
// record's Events as the other API group serves them (from says where they are stored).
type servedRecord struct {
	registry.SelectionRecord
	from *storedForm
}

// seen copies, under the lock, the served records match selects, then keeps those vis sees: vis
// may ask the members (SubjectAccessReview), which must not hold up the catalog. It is asked once
// per (cluster, group, resource), however many selections (one per namespace) share it. The
// served records are the selection records and their Events' siblings in the other group, unless
// some member collects that group itself (events.go).
func (c *catalog) seen(match func(*registry.SelectionRecord) bool, vis visibleFunc) []servedRecord {
	type gvr struct{ group, version, resource string }
	c.mu.Lock()
	native := map[gvr]bool{}
	for _, r := range c.records {
		native[gvr{r.Group, r.Version, r.Resource}] = true
	}
	var out []servedRecord
	for _, r := range c.records {
		if match(&r) {
			out = append(out, servedRecord{SelectionRecord: r})
		}
		if sib, ok := eventSibling(r.Group, r.Version, r.Resource); ok && !native[gvr{sib.group, sib.version, r.Resource}] {
			s := r
			s.Group, s.Version = sib.group, sib.version
			if match(&s) {
				out = append(out, servedRecord{SelectionRecord: s, from: &storedForm{group: r.Group, version: r.Version}})
			}
		}
	}
	c.mu.Unlock()
	if vis == nil {
		return out
	}
	type key struct{ cluster, group, resource string }
	sees := map[key]bool{}
	return slices.DeleteFunc(out, func(r servedRecord) bool {
		k := key{r.Cluster, r.Group, r.Resource}
		v, ok := sees[k]
		if !ok {
			v = vis(k.cluster, k.group, k.resource)
			sees[k] = v
		}
		return !v
	})
}

// clustersOf are the clusters caching a resource in a version that vis sees, sorted: the objects
// of a version are those of the members that collect it (the index holds each member's objects in
// the version it collected; nothing converts them).
func (c *catalog) clustersOf(group, version, resource string, vis visibleFunc) []string {
	set := map[string]bool{}
	for _, r := range c.seen(func(r *registry.SelectionRecord) bool {
		return r.Group == group && r.Version == version && r.Resource == resource
	}, vis) {
		set[r.Cluster] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// resourceOf is the resource a cluster caches a kind of a group as, "" if none.
func (c *catalog) resourceOf(cluster, group, kind string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.records {
		if r.Cluster == cluster && r.Group == group && r.Kind == kind {
			return r.Resource
		}
	}
	return ""
}

// changes is closed when what the fleet caches changes after the call.
func (c *catalog) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// resources lists what a view serves of the records vis sees: one cluster's resources, or the
// union over the fleet (cluster ""): a resource served by some members only, or in a version some
// members only serve, is listed once; short names and categories are the union of what members
// publish. Sorted by group, version, resource.
func (c *catalog) resources(cluster string, vis visibleFunc) []apiResource {
	type key struct{ group, version, resource string }
	merged := map[key]*apiResource{}
	for _, r := range c.seen(func(r *registry.SelectionRecord) bool {
		return r.Resource != "" && (cluster == "" || r.Cluster == cluster)
	}, vis) {
		k := key{r.Group, r.Version, r.Resource}
		m, ok := merged[k]
		if !ok {
			m = &apiResource{Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind,
				Singular: r.Singular, Namespaced: r.Namespaced, from: r.from}
			merged[k] = m
		}
		m.ShortNames = union(m.ShortNames, r.ShortNames)
		m.Categories = union(m.Categories, r.Categories)
	}
	out := make([]apiResource, 0, len(merged))
	for _, m := range merged {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b apiResource) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), compareVersions(a.Version, b.Version), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}

// lookup finds a resource of a view by group, version and plural name, among what vis sees.
func (c *catalog) lookup(cluster, group, version, resource string, vis visibleFunc) (apiResource, bool) {
	for _, r := range c.resources(cluster, vis) {
		if r.Group == group && r.Version == version && r.Resource == resource {
			return r, true
		}
	}
	return apiResource{}, false
}

func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// compareVersions orders Kubernetes API versions by preference, as kube-apiserver does: GA before
// beta before alpha, higher numbers first, anything else last alphabetically.
func compareVersions(a, b string) int {
	return -version.CompareKubeAwareVersionStrings(a, b)
}

// groups are a view's API groups with their versions, preferred first; the core group "" first.
type apiGroup struct {
	name     string
	versions []string
}

func groupsOf(rs []apiResource) []apiGroup {
	var out []apiGroup
	for _, r := range rs {
		i := slices.IndexFunc(out, func(g apiGroup) bool { return g.name == r.Group })
		if i < 0 {
			out = append(out, apiGroup{name: r.Group})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].versions, r.Version) {
			out[i].versions = append(out[i].versions, r.Version)
		}
	}
	for i := range out {
		slices.SortFunc(out[i].versions, compareVersions)
	}
	slices.SortFunc(out, func(a, b apiGroup) int {
		switch {
		case a.name == "":
			return -1
		case b.name == "":
			return 1
		}
		return cmp.Compare(a.name, b.name)
	})
	return out
}

// verbs are what the facade serves of every resource.
var verbs = metav1.Verbs{"get", "list", "watch"}

// resourceList is the legacy discovery of one group/version.
func resourceList(rs []apiResource, gv string) *metav1.APIResourceList {
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv,
		APIResources: []metav1.APIResource{}}
	for _, r := range rs {
		if r.groupVersion() != gv {
			continue
		}
		out.APIResources = append(out.APIResources, metav1.APIResource{Name: r.Resource, SingularName: r.Singular,
			Namespaced: r.Namespaced, Kind: r.Kind, Verbs: verbs, ShortNames: r.ShortNames, Categories: r.Categories})
	}
	return out
}

// aggregated is the aggregated discovery (apidiscovery.k8s.io/v2) of the core group (legacy true)
// or of every other group: what kubectl asks for first, one request for everything.
func aggregated(rs []apiResource, legacy bool) *apidiscoveryv2.APIGroupDiscoveryList {
	out := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range groupsOf(rs) {
		if (g.name == "") != legacy {
			continue
		}
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, r := range rs {
				if r.Group != g.name || r.Version != v {
					continue
				}
				scope := apidiscoveryv2.ScopeCluster
				if r.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
					Resource: r.Resource, SingularResource: r.Singular, Scope: scope, Verbs: verbs,
					ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
					ShortNames:   r.ShortNames, Categories: r.Categories,
				})
			}
			gd.Versions = append(gd.Versions, vd)
		}
		out.Items = append(out.Items, gd)
	}
	return out
}

// groupList is the legacy discovery of /apis.
func groupList(rs []apiResource) *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range groupsOf(rs) {
		if g.name != "" {
			out.Groups = append(out.Groups, apiGroupOf(g))
		}
	}
	return out
}

func apiGroupOf(g apiGroup) metav1.APIGroup {
	ag := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	ag.PreferredVersion = ag.Versions[0]
	return ag
}
