package blevestore

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// benchPods is the corpus of BenchmarkSearch: BLEVESTORE_BENCH_PODS (20,000) Pods of three
// clusters and 20 namespaces, 200 apps, labelled as the page and store benchmarks' Pods are
// (tests/e2e), so the searches there can be profiled here without services.
func benchPods(b *testing.B) *Store {
	b.Helper()
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("BLEVESTORE_BENCH_PODS")); err == nil && v > 0 {
		n = v
	}
	s, err := New(Options{Dir: b.TempDir(), TokenKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	clusters := []string{"bench-1", "bench-2", "bench-3"}
	for from := 0; from < n; from += 1000 {
		var ops []store.Op
		for i := from; i < min(from+1000, n); i++ {
			local := i / len(clusters)
			app := fmt.Sprintf("svc-%03d", local%200)
			labels := map[string]string{"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d9f8c6b5", "security.istio.io/tlsMode": "istio",
				"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", local%3)}
			o := pod(clusters[i%len(clusters)], fmt.Sprintf("team-%02d", local%20), fmt.Sprintf("%s-%05d", app, local), int64(1000+local),
				labels, fmt.Sprintf("kwok-node-%d", local%3+1), "Running", "registry.example.com/shop/"+app+":1.27.3", "docker.io/istio/proxyv2:1.24.1")
			o.created = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(local) * time.Second).Format(time.RFC3339)
			ops = append(ops, o.op(b))
		}
		if fails, err := s.Write(b.Context(), ops); err != nil || len(fails) > 0 {
			b.Fatalf("write: %v %v", err, fails)
		}
	}
	return s
}

// wideScope is bench-stores' subject allowed 5,000 namespaces across 50 clusters (the corpus's 20
// namespaces and 3 clusters among them), one grant per cluster.
func wideScope() *query.Scope {
	sc := &query.Scope{}
	for c := 1; c <= 50; c++ {
		g := query.Grant{Clusters: []string{fmt.Sprintf("bench-%d", c)}, Resources: []query.Resource{{Resource: "pods"}}}
		for n := range 100 {
			if n < 20 {
				g.Namespaces = append(g.Namespaces, fmt.Sprintf("team-%02d", n))
			} else {
				g.Namespaces = append(g.Namespaces, fmt.Sprintf("c%02d-ns-%02d", c, n))
			}
		}
		sc.Grants = append(sc.Grants, g)
	}
	return sc
}

// BenchmarkSearch is one search of each kind the search page and bench-stores time, on the first
// page (and, for "every page", a walk through all of them as the facade's full LIST reads them).
func BenchmarkSearch(b *testing.B) {
	s := benchPods(b)
	for _, c := range []struct {
		name   string
		params string
		scope  *query.Scope
		walk   bool
	}{
		{name: "kind:pods", params: "resources=pods&limit=100"},
		{name: "kind:pods facets", params: "resources=pods&limit=1&metadataOnly=true&facets=resource,cluster,namespace&facetSize=100"},
		{name: "one app", params: "resources=pods&limit=100&labelSelector=app.kubernetes.io/name=svc-007"},
		{name: "one app facets", params: "resources=pods&limit=1&metadataOnly=true&facets=resource,cluster,namespace&facetSize=100&labelSelector=app.kubernetes.io/name=svc-007"},
		{name: "field selector facets", params: "resources=pods&limit=10&facets=cluster,namespace&fieldSelector=spec.nodeName=kwok-node-2"},
		{name: "scoped selector", params: "resources=pods&limit=50&labelSelector=app.kubernetes.io/name=svc-007", scope: wideScope()},
		{name: "sorted by creation", params: "resources=pods&limit=100&sort=creationTimestamp:desc"},
		{name: "every page", params: "resources=pods&limit=500", walk: true},
	} {
		v, err := url.ParseQuery(c.params)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q, err := query.Parse(v, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				q.Scope = c.scope
				res, err := s.Search(b.Context(), q)
				if err != nil || res.Total == 0 {
					b.Fatalf("%v, total %v", err, res)
				}
				for c.walk && res.Continue != "" {
					q.Continue = res.Continue
					if res, err = s.Search(b.Context(), q); err != nil {
						b.Fatal(err)
					}
				}
				s.Release(b.Context(), res.Continue)
			}
		})
	}
}
