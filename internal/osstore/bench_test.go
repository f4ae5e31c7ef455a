package osstore

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/kubesearch/kubesearch/internal/query"
)

// benchQuery is a typical facade or search request of a tenant: one resource, a label selector
// with dotted and slashed keys, a field selector, and a scope of a few grants, as authorization
// sets it on every query. internal/blevestore's benchmark compiles the same one.
func benchQuery(b *testing.B) *query.Query {
	b.Helper()
	q, err := query.Parse(url.Values{
		query.ParamResources:     {"pods"},
		query.ParamLabelSelector: {"app.kubernetes.io/name=checkout,app.kubernetes.io/part-of in (shop,payments),!canary,tier!=cache"},
		query.ParamFieldSelector: {"status.phase=Running,spec.nodeName!="},
		query.ParamSort:          {"creationTimestamp:desc"},
		query.ParamLimit:         {"500"},
	}, now)
	if err != nil {
		b.Fatal(err)
	}
	q.Scope = &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"member-eu-1", "member-eu-2"}, Namespaces: []string{"shop", "payments"},
			Resources: []query.Resource{{Resource: "pods"}, {Resource: "deployments", Group: "apps"}}},
		{Clusters: []string{"member-us-1"}, Namespaces: []string{"shop"}},
		{Namespaces: []string{"", "monitoring"}, Resources: []query.Resource{{Resource: "pods"}}},
	}}
	return q
}

// BenchmarkCompile is what every search pays before its request: the query model compiled (map)
// and encoded as the _search body (body), as Store.search sends it.
func BenchmarkCompile(b *testing.B) {
	q := benchQuery(b)
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Compile(q)
		}
	})
	b.Run("body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(Compile(q)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
