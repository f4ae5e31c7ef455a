//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// scopeObject is one object of the scope corpus.
type scopeObject struct {
	cluster, namespace, group, resource, kind, name, uid string
}

// seedScopeCorpus indexes, under a new prefix, the same names in three clusters: Deployments and
// ConfigMaps in two namespaces, and cluster-scoped Namespaces and ClusterRoles.
func seedScopeCorpus(t *testing.T, env *testbed.Env) (string, []scopeObject) {
	t.Helper()
	prefix := templatePrefix(t, env, "scope")
	var objs []scopeObject
	for _, cluster := range []string{"member1", "member2", "member3"} {
		for _, ns := range []string{"shop", "payments"} {
			for i := range 4 {
				objs = append(objs,
					scopeObject{cluster, ns, "apps", "deployments", "Deployment", fmt.Sprintf("web-%d", i), ""},
					scopeObject{cluster, ns, "", "configmaps", "ConfigMap", fmt.Sprintf("web-config-%d", i), ""})
			}
		}
		objs = append(objs, scopeObject{cluster, "", "", "namespaces", "Namespace", "shop", ""},
			scopeObject{cluster, "", "rbac.authorization.k8s.io", "clusterroles", "ClusterRole", "view", ""})
	}
	var body bytes.Buffer
	for i := range objs {
		o := &objs[i]
		o.uid = fmt.Sprintf("00000000-0000-4000-5c0e-%012d", i)
		apiVersion := "v1"
		if o.group != "" {
			apiVersion = o.group + "/v1"
		}
		meta := map[string]any{"name": o.name, "uid": o.uid, "resourceVersion": strconv.Itoa(i + 1),
			"labels": map[string]string{"app.kubernetes.io/name": "web"}, "creationTimestamp": "2026-11-01T10:00:00Z"}
		if o.namespace != "" {
			meta["namespace"] = o.namespace
		}
		obj, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": o.kind, "metadata": meta})
		doc, err := document.Build(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: o.cluster,
			Group: o.group, Version: "v1", Resource: o.resource, Kind: o.kind, Namespace: o.namespace, Name: o.name, UID: o.uid,
			ResourceVersion: strconv.Itoa(i + 1), Epoch: 1, ObservedAt: time.Now().UTC(), Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&body, "{\"index\":{\"_index\":%q,\"_id\":%q}}\n%s\n", mappings.IndexName(prefix, o.kind), o.uid, doc)
	}
	if resp := mustHTTP(t, "POST", env.OpenSearchURL+"/_bulk?refresh=true", body.String()); gjson.GetBytes(resp, "errors").Bool() {
		t.Fatalf("bulk: %.500s", resp)
	}
	return prefix, objs
}

// The query model's Scope is applied inside the query by the OpenSearch compiler: with a hand-made
// scope, every page, the total, the facets and the per-pair counts hold exactly what the scope
// allows (checked against Scope.Allows over the corpus), and a continue token does not page for
// another scope. The subject's scope (internal/authz: a policy or the members' reviews) is built
// elsewhere; this holds the compiler to it.
func TestScopeIsAppliedInsideTheQuery(t *testing.T) {
	env := testbed.Get(t)
	prefix, objs := seedScopeCorpus(t, env)
	store, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: prefix},
		TokenKey: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	scopes := map[string]*query.Scope{
		"everything": nil,
		"nothing":    {},
		"one cluster, one namespace, deployments": {Grants: []query.Grant{{Clusters: []string{"member1"}, Namespaces: []string{"shop"},
			Resources: []query.Resource{{Resource: "deployments", Group: "apps"}}}}},
		"cluster-scoped only, two clusters": {Grants: []query.Grant{{Clusters: []string{"member2", "member3"}, Namespaces: []string{""}}}},
		"two grants, one of a plural in any group": {Grants: []query.Grant{
			{Namespaces: []string{"payments", ""}, Resources: []query.Resource{{Resource: "configmaps", AnyGroup: true}, {Resource: "namespaces"}}},
			{Clusters: []string{"member3"}, Resources: []query.Resource{{Resource: "clusterroles", Group: "rbac.authorization.k8s.io"}}},
		}},
	}
	for name, scope := range scopes {
		t.Run(name, func(t *testing.T) {
			var want []string
			perCluster := map[string]int64{}
			for _, o := range objs {
				if scope.Allows(o.cluster, o.namespace, o.group, o.resource) {
					want = append(want, o.uid)
					perCluster[o.cluster]++
				}
			}
			slices.Sort(want)
			q := &query.Query{Scope: scope, Limit: 5, Now: time.Now(), Facets: []query.Facet{{Dimension: query.FacetCluster, Size: 10}}}
			var got []string
			for page := 0; ; page++ {
				res, err := store.Search(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				if res.Total != int64(len(want)) {
					t.Fatalf("page %d: total %d, want %d", page, res.Total, len(want))
				}
				if page == 0 {
					facet := map[string]int64{}
					for _, b := range res.Facets[0].Buckets {
						facet[b.Value] = b.Count
					}
					if fmt.Sprint(facet) != fmt.Sprint(perCluster) {
						t.Errorf("cluster facet %v, want %v", facet, perCluster)
					}
				}
				for _, it := range res.Items {
					got = append(got, gjson.GetBytes(it, "metadata.uid").Str)
				}
				if res.Continue == "" {
					break
				}
				if page == 0 {
					// The token belongs to this scope: another subject cannot page with it.
					other := *q
					other.Continue, other.Scope = res.Continue, &query.Scope{Grants: []query.Grant{{}}}
					if _, err := store.Search(t.Context(), &other); err == nil {
						t.Error("a continue token paged for another scope")
					}
				}
				q.Continue = res.Continue
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("got %d objects, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
			counts, err := store.Counts(t.Context(), scope)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, c := range counts {
				n += c.Documents
			}
			if n != int64(len(want)) {
				t.Errorf("per-pair counts add up to %d, want %d", n, len(want))
			}
		})
	}
}
