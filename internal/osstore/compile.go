package osstore

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/mappings"
)

// object is the flat_object field holding the stored Kubernetes object.
const object = mappings.FieldObject

// typedPaths are field selector paths answered from typed top-level fields: the same values as the
// object's, cheaper to match, and with an exact "missing" for cluster-scoped objects' namespace.
var typedPaths = map[string]string{
	"metadata.name":      document.FieldName,
	"metadata.namespace": document.FieldNamespace,
	"metadata.uid":       document.FieldUID,
}

// Compile translates q into the body of an OpenSearch _search request for its first page: query,
// sort (ending with the uid tiebreaker), size, exact total, _source filter and facet aggregations.
// Paging fields (pit, search_after) are the store's. q must come from query.Parse.
func Compile(q *query.Query) map[string]any {
	body := map[string]any{
		"query":            compileQuery(q),
		"sort":             compileSort(q),
		"size":             q.Limit,
		"track_total_hits": true,
		"_source":          compileSource(q),
	}
	aggs := compileFacets(q.Facets)
	if q.Versions {
		aggs[versionsAgg] = compileVersions(q)
	}
	if len(aggs) > 0 {
		body["aggs"] = aggs
	}
	return body
}

// versionsAgg names the aggregation of Query.Versions.
const versionsAgg = "versions"

// compileVersions is the newest resourceVersion per cluster of the query's resources, clusters and
// scope: a global aggregation (it ignores the query's other filters, and still reads only the
// search's snapshot) filtered to them.
func compileVersions(q *query.Query) map[string]any {
	var b boolQuery
	if len(q.Resources) > 0 {
		b.filter = append(b.filter, compileResources(q.Resources))
	}
	if len(q.Clusters) > 0 {
		b.filter = append(b.filter, terms(document.FieldCluster, q.Clusters))
	}
	if q.Scope != nil {
		b.filter = append(b.filter, compileScope(q.Scope))
	}
	return map[string]any{
		"global": map[string]any{},
		"aggs": map[string]any{"pair": map[string]any{
			"filter": b.build(),
			"aggs": map[string]any{"cluster": map[string]any{
				"terms": map[string]any{"field": document.FieldCluster, "size": query.MaxListValues},
				"aggs":  map[string]any{"rv": map[string]any{"max": map[string]any{"field": document.FieldResourceVersion}}},
			}},
		}},
	}
}

// boolQuery collects the clauses of one bool query.
type boolQuery struct {
	filter, must, mustNot []any
}

func (b *boolQuery) build() map[string]any {
	if len(b.filter)+len(b.must)+len(b.mustNot) == 0 {
		return map[string]any{"match_all": map[string]any{}}
	}
	q := map[string]any{}
	if len(b.filter) > 0 {
		q["filter"] = b.filter
	}
	if len(b.must) > 0 {
		q["must"] = b.must
	}
	if len(b.mustNot) > 0 {
		q["must_not"] = b.mustNot
	}
	return map[string]any{"bool": q}
}

func term(field, value string) map[string]any {
	return map[string]any{"term": map[string]any{field: value}}
}

func terms(field string, values []string) map[string]any {
	if len(values) == 1 {
		return term(field, values[0])
	}
	return map[string]any{"terms": map[string]any{field: values}}
}

func anyOf(clauses ...any) map[string]any {
	return map[string]any{"bool": map[string]any{"should": clauses, "minimum_should_match": 1}}
}

func compileQuery(q *query.Query) map[string]any {
	var b boolQuery
	if q.Scope != nil {
		b.filter = append(b.filter, compileScope(q.Scope))
	}
	if len(q.Resources) > 0 {
		b.filter = append(b.filter, compileResources(q.Resources))
	}
	if len(q.Clusters) > 0 {
		b.filter = append(b.filter, terms(document.FieldCluster, q.Clusters))
	}
	if len(q.Namespaces) > 0 {
		b.filter = append(b.filter, terms(document.FieldNamespace, q.Namespaces))
	}
	if len(q.Names) > 0 {
		b.filter = append(b.filter, terms(document.FieldName, q.Names))
	}
	if q.NamePrefix != "" {
		b.filter = append(b.filter, map[string]any{"prefix": map[string]any{document.FieldName: q.NamePrefix}})
	}
	if q.FuzzyName != "" {
		b.filter = append(b.filter, anyOf(
			map[string]any{"wildcard": map[string]any{document.FieldName: map[string]any{
				"value": "*" + escapeWildcard(q.FuzzyName) + "*", "case_insensitive": true}}},
			map[string]any{"match": map[string]any{document.FieldNameText: map[string]any{
				"query": q.FuzzyName, "fuzziness": "AUTO", "operator": "and"}}},
		))
	}
	for _, r := range q.Labels {
		compileLabel(&b, r)
	}
	for _, r := range q.Fields {
		compileField(&b, r)
	}
	if q.Text != "" {
		// match, not query_string: user text is words, never syntax that can fail to parse.
		b.must = append(b.must, map[string]any{"match": map[string]any{document.FieldText: map[string]any{
			"query": q.Text, "operator": "and"}}})
	}
	if o := q.Owner; o != nil {
		if o.UID != "" {
			b.filter = append(b.filter, term(document.FieldOwnerUIDs, o.UID))
		} else {
			b.filter = append(b.filter, term(document.FieldOwnerRefs, o.Kind+"/"+o.Name))
		}
	}
	if r := timeRange(q.Now, q.CreatedSince, q.CreatedBefore); r != nil {
		b.filter = append(b.filter, map[string]any{"range": map[string]any{document.FieldCreationTimestamp: r}})
	}
	if r := timeRange(q.Now, q.ChangedSince, nil); r != nil {
		b.filter = append(b.filter, map[string]any{"range": map[string]any{document.FieldLastChangedAt: r}})
	}
	return b.build()
}

// compileResources matches any of rs: a plural in any group, or in one group.
func compileResources(rs []query.Resource) map[string]any {
	types := make([]any, len(rs))
	for i, r := range rs {
		if r.AnyGroup {
			types[i] = term(document.FieldResource, r.Resource)
			continue
		}
		types[i] = map[string]any{"bool": map[string]any{"filter": []any{term(document.FieldResource, r.Resource), term(document.FieldGroup, r.Group)}}}
	}
	if len(types) == 1 {
		return types[0].(map[string]any)
	}
	return anyOf(types...)
}

// compileScope is the filter of what a subject may see: any of its grants, each the conjunction of
// its clusters, namespaces ("" for cluster-scoped objects, which have no namespace field) and
// resources. No grant matches nothing.
func compileScope(s *query.Scope) map[string]any {
	if len(s.Grants) == 0 {
		return map[string]any{"bool": map[string]any{"must_not": map[string]any{"match_all": map[string]any{}}}}
	}
	grants := make([]any, len(s.Grants))
	for i, g := range s.Grants {
		var gb boolQuery
		if len(g.Clusters) > 0 {
			gb.filter = append(gb.filter, terms(document.FieldCluster, g.Clusters))
		}
		if len(g.Namespaces) > 0 {
			var named []string
			clusterScoped := false
			for _, ns := range g.Namespaces {
				if ns == "" {
					clusterScoped = true
				} else {
					named = append(named, ns)
				}
			}
			noNamespace := map[string]any{"bool": map[string]any{"must_not": map[string]any{"exists": map[string]any{"field": document.FieldNamespace}}}}
			switch {
			case clusterScoped && len(named) > 0:
				gb.filter = append(gb.filter, anyOf(terms(document.FieldNamespace, named), noNamespace))
			case clusterScoped:
				gb.filter = append(gb.filter, noNamespace)
			default:
				gb.filter = append(gb.filter, terms(document.FieldNamespace, named))
			}
		}
		if len(g.Resources) > 0 {
			gb.filter = append(gb.filter, compileResources(g.Resources))
		}
		grants[i] = gb.build()
	}
	if len(grants) == 1 {
		return grants[0].(map[string]any)
	}
	return anyOf(grants...)
}

// compileLabel maps a label requirement onto the labels ("key=value") and labelKeys fields, so
// "app" and "app.kubernetes.io/name" never mix. Negations match objects without the key, as in
// Kubernetes.
func compileLabel(b *boolQuery, r query.Requirement) {
	pairs := make([]string, len(r.Values))
	for i, v := range r.Values {
		pairs[i] = r.Key + "=" + v
	}
	switch r.Op {
	case query.Equals, query.In:
		b.filter = append(b.filter, terms(document.FieldLabels, pairs))
	case query.NotEquals, query.NotIn:
		b.mustNot = append(b.mustNot, terms(document.FieldLabels, pairs))
	case query.Exists:
		b.filter = append(b.filter, term(document.FieldLabelKeys, r.Key))
	case query.NotExists:
		b.mustNot = append(b.mustNot, term(document.FieldLabelKeys, r.Key))
	}
}

// compileField maps a field requirement onto a typed field or a flat_object leaf. An empty value
// means "missing or empty", as for Kubernetes' own field selectors (spec.nodeName= lists unscheduled
// Pods). flat_object answers exists only for inner objects, not for leaves, so a leaf's presence is
// an empty prefix.
func compileField(b *boolQuery, r query.Requirement) {
	field, typed := typedPaths[r.Key]
	if !typed {
		field = object + "." + r.Key
	}
	exists := map[string]any{"prefix": map[string]any{field: ""}}
	if typed {
		exists = map[string]any{"exists": map[string]any{"field": field}}
	}
	value := r.Values[0]
	switch {
	case r.Op == query.Equals && value == "":
		b.filter = append(b.filter, anyOf(map[string]any{"bool": map[string]any{"must_not": exists}}, term(field, "")))
	case r.Op == query.Equals:
		b.filter = append(b.filter, term(field, value))
	case r.Op == query.NotEquals && value == "":
		b.filter = append(b.filter, exists)
		b.mustNot = append(b.mustNot, term(field, ""))
	case r.Op == query.NotEquals:
		b.mustNot = append(b.mustNot, term(field, value))
	}
}

var wildcardSpecial = regexp.MustCompile(`[\\*?]`)

func escapeWildcard(s string) string { return wildcardSpecial.ReplaceAllString(s, `\$0`) }

func timeRange(now time.Time, from, to *query.Instant) map[string]any {
	if from == nil && to == nil {
		return nil
	}
	r := map[string]any{}
	if from != nil {
		r["gte"] = from.Resolve(now).UTC().Format(time.RFC3339Nano)
	}
	if to != nil {
		r["lt"] = to.Resolve(now).UTC().Format(time.RFC3339Nano)
	}
	return r
}

// compileSort ends every sort with uid and cluster, unique per document (a uid is unique within one
// member only: a member registered twice, or members cloned from one etcd snapshot, repeat them),
// so search_after never skips or repeats a document between pages.
func compileSort(q *query.Query) []any {
	var out []any
	sorts := q.Sort
	switch {
	case len(sorts) > 0:
	case q.Text != "":
		out = append(out, map[string]any{"_score": map[string]any{"order": "desc"}})
	default:
		sorts = []query.Sort{{Field: query.SortCluster}, {Field: query.SortNamespace}, {Field: query.SortName}}
	}
	for _, s := range sorts {
		order := "asc"
		if s.Desc {
			order = "desc"
		}
		// Cluster-scoped objects have no namespace: they come last either way, as "" would sort
		// them first ascending and last descending.
		key := map[string]any{"order": order, "missing": "_last"}
		if _, column := query.ColumnSort(s.Field); column || s.Field == query.SortStatus {
			// An index created before mapping version 3 has no status field until its roll (before
			// version 4 no columns), and OpenSearch fails a sort on a field an index does not map:
			// there, every document sorts as missing.
			key["unmapped_type"] = "keyword"
		}
		out = append(out, map[string]any{s.Field: key})
	}
	return append(out, map[string]any{document.FieldUID: map[string]any{"order": "asc"}},
		map[string]any{document.FieldCluster: map[string]any{"order": "asc"}})
}

func compileSource(q *query.Query) map[string]any {
	if q.MetadataOnly {
		var inc []string
		for _, f := range []string{object, mappings.FieldFullObject} {
			inc = append(inc, f+".apiVersion", f+".kind", f+".metadata")
		}
		return map[string]any{"includes": append(inc, document.FieldEpoch)}
	}
	// The epoch says which list or watch wrote the object (store.Result.Epochs).
	return map[string]any{"includes": []string{object, mappings.FieldFullObject, document.FieldEpoch}}
}

// facetShardSize makes each shard report many more buckets than asked for, so the merged top N are
// exact unless a dimension has more than this many values (then the response says how far off it
// may be: doc_count_error_upper_bound).
const facetShardSize = 1000

func compileFacets(facets []query.Facet) map[string]any {
	aggs := map[string]any{}
	for i, f := range facets {
		size := f.Size
		shard := max(facetShardSize, size*2)
		var agg map[string]any
		switch f.Dimension {
		case query.FacetCluster, query.FacetNamespace:
			agg = map[string]any{"terms": map[string]any{"field": f.Dimension, "size": size, "shard_size": shard}}
		case query.FacetResource:
			agg = map[string]any{"multi_terms": map[string]any{"terms": []any{
				map[string]any{"field": document.FieldResource}, map[string]any{"field": document.FieldGroup, "missing": ""}},
				"size": size, "shard_size": shard}}
		case query.FacetLabels:
			agg = map[string]any{"terms": map[string]any{"field": document.FieldLabels, "size": size, "shard_size": shard}}
		case query.FacetLabel:
			agg = map[string]any{"terms": map[string]any{"field": document.FieldLabels, "size": size, "shard_size": shard,
				"include": escapeRegexp(f.Key) + "=.*"}}
		}
		aggs[facetAggName(i)] = agg
	}
	return aggs
}

func facetAggName(i int) string { return "facet" + strconv.Itoa(i) }

// escapeRegexp escapes Lucene regular expression syntax (a label key has dots).
func escapeRegexp(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`.?+*|{}[]()"\#@&<>~`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
