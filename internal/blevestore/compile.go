package blevestore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// The compiler from the query model to bleve queries: the counterpart of osstore's compile.go,
// clause for clause, over the fields index.go builds. Only conjunctions, disjunctions, terms, term
// ranges and notQuery are used: bleve's BooleanQuery drops a must clause that matches nothing and
// answers nothing for a must-not alone that matches nothing, which would widen or empty a filter.

const (
	fieldCluster   = document.FieldCluster
	fieldGroup     = document.FieldGroup
	fieldResource  = document.FieldResource
	fieldKind      = document.FieldKind
	fieldNamespace = document.FieldNamespace
	fieldName      = document.FieldName
	fieldStatus    = document.FieldStatus
	fieldUID       = document.FieldUID
	fieldEpoch     = document.FieldEpoch
	fieldRV        = document.FieldResourceVersion
	fieldLabels    = document.FieldLabels
	fieldCreated   = document.FieldCreationTimestamp
	fieldChanged   = document.FieldLastChangedAt
)

// typedPaths are field selector paths answered from typed top-level fields, as osstore answers
// them: the same values, and an exact "missing" for cluster-scoped objects' namespace.
var typedPaths = map[string]string{
	"metadata.name":      fieldName,
	"metadata.namespace": fieldNamespace,
	"metadata.uid":       fieldUID,
}

func termQ(field, value string) bq.Query {
	t := bq.NewTermQuery(value)
	t.SetField(field)
	return t
}

func termsQ(field string, values []string) bq.Query {
	qs := make([]bq.Query, len(values))
	for i, v := range values {
		qs[i] = termQ(field, v)
	}
	return or(qs...)
}

// rangeQ matches values of a long or date field ≥ gte and < lt (nil: unbounded).
func rangeQ(field string, gte, lt *int64) bq.Query {
	var lo, hi string
	if gte != nil {
		lo = enc(*gte)
	}
	if lt != nil {
		hi = enc(*lt)
	}
	if lo == "" && hi == "" {
		return all()
	}
	incl, excl := true, false
	r := bq.NewTermRangeInclusiveQuery(lo, hi, &incl, &excl)
	r.SetField(field)
	return r
}

func none() bq.Query { return bq.NewMatchNoneQuery() }
func all() bq.Query  { return bq.NewMatchAllQuery() }

func isNone(q bq.Query) bool { _, ok := q.(*bq.MatchNoneQuery); return ok }
func isAll(q bq.Query) bool  { _, ok := q.(*bq.MatchAllQuery); return ok }

// and matches documents matching every q.
func and(qs ...bq.Query) bq.Query {
	var out []bq.Query
	for _, q := range qs {
		switch {
		case isNone(q):
			return none()
		case isAll(q):
		default:
			out = append(out, q)
		}
	}
	switch len(out) {
	case 0:
		return all()
	case 1:
		return out[0]
	}
	return bq.NewConjunctionQuery(out)
}

// or matches documents matching any q.
func or(qs ...bq.Query) bq.Query {
	var out []bq.Query
	for _, q := range qs {
		switch {
		case isAll(q):
			return all()
		case isNone(q):
		default:
			out = append(out, q)
		}
	}
	switch len(out) {
	case 0:
		return none()
	case 1:
		return out[0]
	}
	return bq.NewDisjunctionQuery(out)
}

// not matches every document q does not.
func not(q bq.Query) bq.Query {
	switch {
	case isNone(q):
		return all()
	case isAll(q):
		return none()
	}
	return notQuery{q}
}

// notQuery is every document but those of its query, whatever that searcher turns out to be.
type notQuery struct{ q bq.Query }

func (n notQuery) Searcher(ctx context.Context, r index.IndexReader, m mapping.IndexMapping, o search.SearcherOptions) (search.Searcher, error) {
	o.Score = "none"
	every, err := searcher.NewMatchAllSearcher(ctx, r, 1, o)
	if err != nil {
		return nil, err
	}
	neg, err := n.q.Searcher(ctx, r, m, o)
	if err != nil {
		_ = every.Close()
		return nil, err
	}
	return searcher.NewBooleanSearcher(ctx, r, every, nil, neg, o)
}

// rejected is a query this store cannot answer as OpenSearch would.
func rejected(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrRejected, fmt.Sprintf(format, args...))
}

// compile translates q into the bleve query of its matches, read in r (fuzzy names expand to the
// names r holds, terms r holds nowhere are pruned); nil r reads nothing. Sort, page, facets and source filtering are the searcher's (search.go).
func compile(q *query.Query, r index.IndexReader) (bq.Query, error) {
	var must []bq.Query
	if q.Scope != nil {
		must = append(must, compileScope(q.Scope))
	}
	if len(q.Resources) > 0 {
		must = append(must, compileResources(q.Resources))
	}
	if len(q.Clusters) > 0 {
		must = append(must, termsQ(fieldCluster, q.Clusters))
	}
	if len(q.Namespaces) > 0 {
		must = append(must, termsQ(fieldNamespace, q.Namespaces))
	}
	if len(q.Names) > 0 {
		must = append(must, termsQ(fieldName, q.Names))
	}
	if q.NamePrefix != "" {
		p := bq.NewPrefixQuery(q.NamePrefix)
		p.SetField(fieldName)
		must = append(must, p)
	}
	if q.FuzzyName != "" {
		f, err := compileFuzzy(q.FuzzyName, r)
		if err != nil {
			return nil, err
		}
		must = append(must, f)
	}
	for _, req := range q.Labels {
		c, err := compileLabel(req)
		if err != nil {
			return nil, err
		}
		must = append(must, c)
	}
	for _, req := range q.Fields {
		c, err := compileField(req)
		if err != nil {
			return nil, err
		}
		must = append(must, c)
	}
	if q.Text != "" {
		must = append(must, compileText(q.Text))
	}
	if o := q.Owner; o != nil {
		if o.UID != "" {
			must = append(must, termQ(document.FieldOwnerUIDs, o.UID))
		} else {
			must = append(must, termQ(document.FieldOwnerRefs, o.Kind+"/"+o.Name))
		}
	}
	if q.CreatedSince != nil || q.CreatedBefore != nil {
		must = append(must, rangeQ(fieldCreated, millis(q, q.CreatedSince), millis(q, q.CreatedBefore)))
	}
	if q.ChangedSince != nil {
		must = append(must, rangeQ(fieldChanged, millis(q, q.ChangedSince), nil))
	}
	if r == nil {
		return and(must...), nil
	}
	return prune(and(must...), r)
}

// millis is an instant in epoch milliseconds, rounded down as OpenSearch parses a date bound for
// a field of millisecond resolution: ≥ and < then compare whole milliseconds.
func millis(q *query.Query, i *query.Instant) *int64 {
	if i == nil {
		return nil
	}
	ms := i.Resolve(q.Now).UnixMilli()
	return &ms
}

// compileText is OpenSearch's match query with operator and on the text field: every word of the
// text, as the standard analyzer finds them, must be there; no word matches nothing.
func compileText(text string) bq.Query {
	ws := words([]byte(text))
	if len(ws) == 0 {
		return none()
	}
	qs := make([]bq.Query, len(ws))
	for i, w := range ws {
		qs[i] = termQ(document.FieldText, w)
	}
	return and(qs...)
}

// compileVersions is the filter of Query.Versions: the query's resources, clusters and scope only.
func compileVersions(q *query.Query) bq.Query {
	var must []bq.Query
	if len(q.Resources) > 0 {
		must = append(must, compileResources(q.Resources))
	}
	if len(q.Clusters) > 0 {
		must = append(must, termsQ(fieldCluster, q.Clusters))
	}
	if q.Scope != nil {
		must = append(must, compileScope(q.Scope))
	}
	return and(must...)
}

// compileResources matches any of rs: a plural in any group, or in one group.
func compileResources(rs []query.Resource) bq.Query {
	qs := make([]bq.Query, len(rs))
	for i, r := range rs {
		if r.AnyGroup {
			qs[i] = termQ(fieldResource, r.Resource)
			continue
		}
		qs[i] = and(termQ(fieldResource, r.Resource), termQ(fieldGroup, r.Group))
	}
	return or(qs...)
}

// compileScope is what a subject may see: any of its grants, each the conjunction of its clusters,
// namespaces ("" for cluster-scoped objects, which have no namespace) and resources. No grant
// matches nothing.
func compileScope(s *query.Scope) bq.Query {
	grants := make([]bq.Query, len(s.Grants))
	for i, g := range s.Grants {
		var must []bq.Query
		if len(g.Clusters) > 0 {
			must = append(must, termsQ(fieldCluster, g.Clusters))
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
			var alts []bq.Query
			if len(named) > 0 {
				alts = append(alts, termsQ(fieldNamespace, named))
			}
			if clusterScoped {
				alts = append(alts, not(termQ(fieldPresent, fieldNamespace)))
			}
			must = append(must, or(alts...))
		}
		if len(g.Resources) > 0 {
			must = append(must, compileResources(g.Resources))
		}
		grants[i] = and(must...)
	}
	return or(grants...)
}

// compileLabel matches a label requirement on the labels ("key=value") and labelKeys fields, so
// "app" and "app.kubernetes.io/name" never mix. Negations match objects without the key, as in
// Kubernetes.
func compileLabel(r query.Requirement) (bq.Query, error) {
	pairs := make([]string, len(r.Values))
	for i, v := range r.Values {
		pairs[i] = r.Key + "=" + v
	}
	switch r.Op {
	case query.Equals, query.In:
		return termsQ(fieldLabels, pairs), nil
	case query.NotEquals, query.NotIn:
		return not(termsQ(fieldLabels, pairs)), nil
	case query.Exists:
		return termQ(document.FieldLabelKeys, r.Key), nil
	case query.NotExists:
		return not(termQ(document.FieldLabelKeys, r.Key)), nil
	}
	return nil, rejected("label selector %q: operator %q is not supported", r.Key, r.Op)
}

// compileField matches a field requirement on a typed field or on the object's leaves. An empty
// value means "missing or empty", as for Kubernetes' own field selectors (spec.nodeName= lists
// unscheduled Pods).
func compileField(r query.Requirement) (bq.Query, error) {
	if len(r.Values) != 1 {
		return nil, rejected("field selector %q: want one value, got %d", r.Key, len(r.Values))
	}
	value := r.Values[0]
	var match, exists bq.Query
	if field, typed := typedPaths[r.Key]; typed {
		match, exists = termQ(field, value), termQ(fieldPresent, field)
	} else {
		match, exists = termQ(fieldLeaf, r.Key+"="+value), termQ(fieldLeafPath, r.Key)
	}
	switch {
	case r.Op == query.Equals && value == "":
		return or(not(exists), match), nil
	case r.Op == query.Equals:
		return match, nil
	case r.Op == query.NotEquals && value == "":
		return and(exists, not(match)), nil
	case r.Op == query.NotEquals:
		return not(match), nil
	}
	return nil, rejected("field selector %q: operator %q is not supported", r.Key, r.Op)
}

// compileFuzzy is osstore's fuzzy name: the name contains the text, ignoring case (a
// case-insensitive wildcard *text*), or every word of the text is within OpenSearch's AUTO edit
// distance of a word of the name (a match query with fuzziness AUTO and operator and on name.text).
// Both are expanded here into the names and words r holds.
func compileFuzzy(text string, r index.IndexReader) (bq.Query, error) {
	contains, err := namesContaining(r, text)
	if err != nil {
		return nil, err
	}
	ws := words([]byte(text))
	if len(ws) == 0 {
		return termsQ(fieldName, contains), nil
	}
	dict, err := dictionary(r, document.FieldNameText)
	if err != nil {
		return nil, err
	}
	each := make([]bq.Query, len(ws))
	for i, w := range ws {
		each[i] = termsQ(document.FieldNameText, fuzzyTerms(w, dict))
	}
	return or(termsQ(fieldName, contains), and(each...)), nil
}

// namesContaining are the names of r containing text, ignoring case: every name is read, one at a
// time (a fuzzy name's cost, which store.Limits bounds per subject), and only the matches are kept.
func namesContaining(r index.IndexReader, text string) ([]string, error) {
	d, err := r.FieldDict(fieldName)
	if err != nil {
		return nil, fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, fieldName, err)
	}
	defer d.Close()
	want := foldCase(text)
	var out []string
	for {
		e, err := d.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, fieldName, err)
		}
		if e == nil {
			return out, nil
		}
		if strings.Contains(foldCase(e.Term), want) {
			out = append(out, e.Term)
		}
	}
}

func foldCase(s string) string { return strings.Map(unicode.ToLower, s) }

// dictionary is every term of a field in r, in order.
func dictionary(r index.IndexReader, field string) ([]string, error) {
	d, err := r.FieldDict(field)
	if err != nil {
		return nil, fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, field, err)
	}
	defer d.Close()
	var out []string
	for {
		e, err := d.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, field, err)
		}
		if e == nil {
			return out, nil
		}
		out = append(out, e.Term)
	}
}

// maxExpansions is the match query's max_expansions: a fuzzy word matches at most the 50 terms
// nearest to it.
const maxExpansions = 50

// fuzzyTerms are the terms of dict a fuzzy query for w matches, as Lucene's FuzzyQuery with
// OpenSearch's AUTO fuzziness picks them: within 0 edits for words of 1–2 code points, 1 for 3–5,
// 2 beyond, adjacent transpositions counting as one edit; the best maxExpansions by similarity,
// ties by term.
func fuzzyTerms(w string, dict []string) []string {
	wr := []rune(w)
	maxEdits := 2
	switch {
	case len(wr) < 3:
		maxEdits = 0
	case len(wr) < 6:
		maxEdits = 1
	}
	type cand struct {
		term  string
		boost float64
	}
	var cands []cand
	for _, t := range dict {
		tr := []rune(t)
		if d := abs(len(tr) - len(wr)); d > maxEdits {
			continue
		}
		ed := osaDistance(wr, tr, maxEdits)
		if ed > maxEdits {
			continue
		}
		boost := 1.0
		if ed > 0 {
			boost = 1 - float64(ed)/float64(min(len(tr), len(wr)))
		}
		cands = append(cands, cand{t, boost})
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		switch {
		case a.boost > b.boost:
			return -1
		case a.boost < b.boost:
			return 1
		}
		return strings.Compare(a.term, b.term)
	})
	out := make([]string, 0, min(len(cands), maxExpansions))
	for i := 0; i < len(cands) && i < maxExpansions; i++ {
		out = append(out, cands[i].term)
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// osaDistance is the optimal string alignment distance of a and b (Levenshtein plus adjacent
// transpositions), or more than limit when it exceeds limit.
func osaDistance(a, b []rune, limit int) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// prune replaces the term queries of q whose term no segment of r holds by "nothing", and
// simplifies what holds them (and, or, not): the same matches. A scope is compiled from a policy,
// not from the index: a subject allowed 5,000 namespaces in 50 clusters, of which the index holds a
// few, would otherwise open a searcher per term per grant and merge the postings of the few that
// exist once per grant (most of such a search's time, measured). A dictionary lookup per term is
// what opening its searcher would cost anyway, and a grant of a cluster the index never saw is
// dropped before its namespaces are looked up.
func prune(q bq.Query, r index.IndexReader) (bq.Query, error) {
	p := &pruner{r: r, dicts: map[string]index.FieldDictContains{}}
	out := p.prune(q)
	return out, p.err
}

type pruner struct {
	r     index.IndexReader
	dicts map[string]index.FieldDictContains
	err   error
}

func (p *pruner) prune(q bq.Query) bq.Query {
	switch q := q.(type) {
	case *bq.TermQuery:
		if !p.holds(q.FieldVal, q.Term) {
			return none()
		}
	case *bq.ConjunctionQuery:
		out := make([]bq.Query, 0, len(q.Conjuncts))
		for _, c := range q.Conjuncts {
			c = p.prune(c)
			if isNone(c) {
				return c // what follows need not be looked up
			}
			out = append(out, c)
		}
		return and(out...)
	case *bq.DisjunctionQuery:
		out := make([]bq.Query, 0, len(q.Disjuncts))
		for _, c := range q.Disjuncts {
			out = append(out, p.prune(c))
		}
		return or(out...)
	case notQuery:
		return not(p.prune(q.q))
	}
	return q
}

// holds says whether a segment of the reader holds term in field; after an error, every term is
// kept (the error is the answer).
func (p *pruner) holds(field, term string) bool {
	if p.err != nil {
		return true
	}
	d, ok := p.dicts[field]
	if !ok {
		rc, ok := p.r.(index.IndexReaderContains)
		if !ok {
			return true // a reader without random lookups: nothing pruned
		}
		var err error
		if d, err = rc.FieldDictContains(field); err != nil {
			p.err = fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, field, err)
			return true
		}
		p.dicts[field] = d
	}
	found, err := d.Contains([]byte(term))
	if err != nil {
		p.err = fmt.Errorf("%w: read the terms of %s: %v", store.ErrUnavailable, field, err)
		return true
	}
	return found
}
