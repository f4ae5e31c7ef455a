package osstore

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/kubesearch/kubesearch/internal/query"
)

// maxClauseCount is OpenSearch's default indices.query.bool.max_clause_count: past it, a query is
// refused (too_many_clauses, too_many_nested_clauses).
const maxClauseCount = 1024

// fuzzyExpansions is the match query's default max_expansions: a fuzzy word rewrites to up to this
// many terms, each a clause.
const fuzzyExpansions = 50

// clauses counts, at worst, the leaf clauses OpenSearch 2.19 (Lucene 9.12) counts against
// max_clause_count in the rewritten form of a compiled query: Lucene counts every leaf of the whole
// tree, bool queries themselves not. On a keyword field with doc values, terms, prefix and
// wildcard become an IndexOrDocValuesQuery of two leaves, whatever the number of values; a date
// range is counted three (the index, doc values and approximate forms). A construct the compiler
// starts writing must be added here, or the test fails.
func clauses(t *testing.T, q any) int {
	t.Helper()
	m, ok := q.(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("not a query: %#v", q)
	}
	for kind, v := range m {
		switch kind {
		case "bool":
			n := 0
			for occur, c := range v.(map[string]any) {
				switch c := c.(type) {
				case []any:
					for _, sub := range c {
						n += clauses(t, sub)
					}
				case map[string]any:
					n += clauses(t, c)
				default:
					if occur != "minimum_should_match" {
						t.Fatalf("bool %s: %#v", occur, c)
					}
				}
			}
			return n
		case "term", "exists", "match_all":
			return 1
		case "terms", "prefix", "wildcard":
			return 2
		case "range":
			return 3
		case "match":
			for _, opts := range v.(map[string]any) {
				opts := opts.(map[string]any)
				// Words as the standard tokenizer finds at least as many of (query.Parse bounds
				// them with a count that is never lower).
				n := len(strings.FieldsFunc(opts["query"].(string), func(r rune) bool {
					return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
				}))
				if _, fuzzy := opts["fuzziness"]; fuzzy {
					n *= fuzzyExpansions
				}
				return n
			}
		}
		t.Fatalf("clauses: unknown query %q", kind)
	}
	return 0
}

// TestLargestQueryFitsClauseLimit: a query at every size limit of query.Parse at once, each part in
// its most expensive form, compiles to well under OpenSearch's clause limit, so no accepted input
// is refused as too large. The e2e test TestQueryCapsOnOpenSearch runs it on OpenSearch.
func TestLargestQueryFitsClauseLimit(t *testing.T) {
	v := largestQuery()
	q, err := query.Parse(v, now)
	if err != nil {
		t.Fatalf("the largest query is refused: %v", err)
	}
	n := clauses(t, Compile(q)["query"])
	// A fifth of the limit is left for what this count cannot see.
	if n > maxClauseCount*4/5 {
		t.Fatalf("the largest accepted query has %d clauses; OpenSearch refuses more than %d", n, maxClauseCount)
	}
	t.Logf("the largest accepted query has at most %d clauses of %d", n, maxClauseCount)
}

// largestQuery is a search at every size limit of query.Parse, each part in its most expensive
// form for OpenSearch: resources of a named group, in requirements of two values, field requirements
// for a missing value, distinct words.
func largestQuery() url.Values {
	list := func(n int, sep, format string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i)
		}
		return strings.Join(parts, sep)
	}
	return url.Values{
		query.ParamResources:     {list(query.MaxResources, ",", "r%d.example.com")},
		query.ParamClusters:      {"member1,member2"},
		query.ParamNamespaces:    {"a,b"},
		query.ParamNames:         {"a,b"},
		query.ParamNamePrefix:    {"web-"},
		query.ParamFuzzyName:     {list(query.MaxFuzzyNameWords, "-", "word%d")},
		query.ParamLabelSelector: {list(query.MaxRequirements, ",", "k%d in (a,b)")},
		query.ParamFieldSelector: {list(query.MaxRequirements, ",", "data.k%d=")},
		query.ParamText:          {list(query.MaxTextWords, " ", "w%d")},
		query.ParamOwner:         {"ReplicaSet/web"},
		query.ParamCreatedSince:  {"7d"},
		query.ParamCreatedBefore: {"1h"},
		query.ParamChangedSince:  {"1d"},
	}
}
