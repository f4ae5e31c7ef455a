package blevestore

import (
	"net/url"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
)

// benchQuery is internal/osstore's benchmark query: one resource, a label selector with dotted and
// slashed keys, a field selector and a scope of a few grants, so the two compilers compare.
func benchQuery(b *testing.B) *query.Query {
	b.Helper()
	q, err := query.Parse(url.Values{
		query.ParamResources:     {"pods"},
		query.ParamLabelSelector: {"app.kubernetes.io/name=checkout,app.kubernetes.io/part-of in (shop,payments),!canary,tier!=cache"},
		query.ParamFieldSelector: {"status.phase=Running,spec.nodeName!="},
		query.ParamSort:          {"creationTimestamp:desc"},
		query.ParamLimit:         {"500"},
	}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
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

// BenchmarkCompile is the query model compiled into the bleve query every search runs. Without a
// fuzzy name the compiler reads nothing of the index, so no reader is needed.
func BenchmarkCompile(b *testing.B) {
	q := benchQuery(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compile(q, nil); err != nil {
			b.Fatal(err)
		}
	}
}
