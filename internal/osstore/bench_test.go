package osstore

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/fixtures"
	"github.com/kubesearch/kubesearch/internal/query"
)

// benchQuery is the fixtures' tenant query, which both backends' benchmarks compile.
func benchQuery(b *testing.B) *query.Query {
	b.Helper()
	q, err := fixtures.Query()
	if err != nil {
		b.Fatal(err)
	}
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

// benchSearchResponse is a search answer of n hits as OpenSearch writes it for a page of Pods: each
// source an object of about 7 KB (a Pod with its containers and status) and its epoch, then the
// sort values.
func benchSearchResponse(n int) []byte {
	var env strings.Builder
	for i := range 40 {
		fmt.Fprintf(&env, `{"name":"FEATURE_FLAG_%02d","value":"enabled-for-some-tenants"},`, i)
	}
	container := `{"name":"app","image":"registry.example.com/shop/checkout:2.4.1","env":[` + env.String() +
		`{"name":"POD_IP","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"status.podIP"}}}],"resources":{"requests":{"cpu":"250m","memory":"256Mi"}}}`
	var b strings.Builder
	b.WriteString(`{"pit_id":"o463QQEYa3ViZXJuZXRlcy1wb2QtdjEWTjduQzFWZmNSMG1SZGQxVFJOQ2o1UQAWRlppR2ozZnpUaGFtY1JtVE5OU05oQQAAAAAAAAAAAxZ2OEhyNm11X1RzT0Q4Tm5DRVZETGRBAAEWTjduQzFWZmNSMG1SZGQxVFJOQ2o1UQAA",` +
		`"took":14,"timed_out":false,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0},"hits":{"total":{"value":1000,"relation":"eq"},"max_score":null,"hits":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"_index":"kubernetes-pod-v1","_id":"00000000-0000-4000-0000-%012d","_score":null,"_source":{"epoch":1,"object":`+
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"svc-001-%05d","namespace":"team-01","uid":"00000000-0000-4000-0000-%012d",`+
			`"labels":{"app.kubernetes.io/name":"svc-001","topology.kubernetes.io/zone":"zone-1"}},"spec":{"containers":[%s,%s,%s]},"status":{"phase":"Running"}}},`+
			`"sort":["bench-1","team-01","svc-001-%05d","00000000-0000-4000-0000-%012d"]}`, i, i, i, container, container, container, i, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// BenchmarkResult is reading a page of 100 Pods out of OpenSearch's answer (about 730 KB), which
// every first page and every later one pays after its search.
func BenchmarkResult(b *testing.B) {
	resp := benchSearchResponse(101)
	q, err := query.Parse(url.Values{query.ParamLimit: {"100"}}, now)
	if err != nil {
		b.Fatal(err)
	}
	s := &Store{}
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	for b.Loop() {
		res, page, err := s.result(q, resp)
		if err != nil || len(res.Items) != 101 || len(page.sorts) != 101 {
			b.Fatalf("%d items, %d sorts, %v", len(res.Items), len(page.sorts), err)
		}
	}
}
