package blevestore

import (
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
