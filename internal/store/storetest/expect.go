package storetest

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// What the corpus generator knows of each query, computed from the objects and their documents
// alone: the independent expectations of the cases.

// setDoc records the document the builder made of the object's last write.
func (o *Object) setDoc(doc []byte) {
	o.doc, o.leaves, o.text = doc, nil, nil
}

// Leaves are the string forms of the values at a dotted path of the indexed object (arrays
// flattened: any element), as a field selector matches them. Leaves the builder left out of the
// index (too long for one term) are absent.
func (o *Object) Leaves(path string) []string {
	if o.leaves == nil {
		o.leaves = map[string][]string{}
		flatten(gjson.GetBytes(o.doc, mappings.FieldObject), "", o.leaves)
	}
	return o.leaves[path]
}

func flatten(v gjson.Result, path string, out map[string][]string) {
	switch {
	case v.IsObject():
		v.ForEach(func(k, val gjson.Result) bool {
			p := k.Str
			if path != "" {
				p = path + "." + k.Str
			}
			flatten(val, p, out)
			return true
		})
	case v.IsArray():
		v.ForEach(func(_, val gjson.Result) bool {
			flatten(val, path, out)
			return true
		})
	case v.Type == gjson.String:
		out[path] = append(out[path], v.Str)
	case v.Type == gjson.Number, v.Type == gjson.True, v.Type == gjson.False:
		out[path] = append(out[path], v.Raw)
	}
}

// status is the STATUS the builder wrote into the object's document, absent for kinds without one.
func (o *Object) status() gjson.Result { return gjson.GetBytes(o.doc, document.FieldStatus) }

// column is the sort key of the column id the builder wrote into the object's document.
func (o *Object) column(id string) gjson.Result {
	return gjson.GetBytes(o.doc, document.FieldColumns).Get(gjson.Escape(id))
}

// textWords are the words of the document's free text field, lower-cased.
func (o *Object) textWords() []string {
	if o.text == nil {
		o.text = []string{}
		for _, s := range gjson.GetBytes(o.doc, document.FieldText).Array() {
			o.text = append(o.text, words(s.Str)...)
		}
	}
	return o.text
}

// words splits text as the standard analyzer does for the words the cases use: runs of letters and
// digits, lower-cased. (It cuts "1.27" and "a.b" where the analyzer keeps them whole; the cases
// ask for no word such a cut changes.)
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// matchesText: every word of q is a word of the object's text.
func (o *Object) matchesText(q string) bool {
	for _, w := range words(q) {
		if !slices.Contains(o.textWords(), w) {
			return false
		}
	}
	return true
}

// matchesFuzzyName is Query.FuzzyName: the name contains q ignoring case, or every word of q is
// within the automatic edit distance (0 up to 2 characters, 1 up to 5, else 2; a transposition is
// one edit) of a word of the name.
func (o *Object) matchesFuzzyName(q string) bool {
	if strings.Contains(strings.ToLower(o.Name), strings.ToLower(q)) {
		return true
	}
	nameWords := words(o.Name)
	for _, w := range words(q) {
		allowed := 2
		switch n := len([]rune(w)); {
		case n <= 2:
			allowed = 0
		case n <= 5:
			allowed = 1
		}
		if !slices.ContainsFunc(nameWords, func(nw string) bool { return editDistance(w, nw) <= allowed }) {
			return false
		}
	}
	return true
}

// editDistance is the optimal string alignment distance (Levenshtein with transpositions), as
// Lucene's fuzzy queries count.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// hasLabel reports whether the object has label key, and its value.
func (o *Object) label(key string) (string, bool) {
	v, ok := o.Labels[key]
	return v, ok
}

// Matches says whether the object is a match of q, by the query model's documented semantics.
func (o *Object) Matches(q *query.Query) bool {
	if !q.Scope.Allows(o.Cluster, o.Namespace, o.Group, o.Resource) {
		return false
	}
	if len(q.Resources) > 0 && !slices.ContainsFunc(q.Resources, func(r query.Resource) bool {
		return r.Resource == o.Resource && (r.AnyGroup || r.Group == o.Group)
	}) {
		return false
	}
	if len(q.Clusters) > 0 && !slices.Contains(q.Clusters, o.Cluster) ||
		len(q.Namespaces) > 0 && !slices.Contains(q.Namespaces, o.Namespace) ||
		len(q.Names) > 0 && !slices.Contains(q.Names, o.Name) ||
		!strings.HasPrefix(o.Name, q.NamePrefix) {
		return false
	}
	if q.FuzzyName != "" && !o.matchesFuzzyName(q.FuzzyName) {
		return false
	}
	for _, r := range q.Labels {
		v, ok := o.label(r.Key)
		switch r.Op {
		case query.Equals, query.In:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case query.NotEquals, query.NotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case query.Exists:
			if !ok {
				return false
			}
		case query.NotExists:
			if ok {
				return false
			}
		}
	}
	for _, r := range q.Fields {
		vals := o.Leaves(r.Key)
		switch r.Key { // typed: a cluster-scoped object has no namespace at all
		case "metadata.namespace":
			vals = nil
			if o.Namespace != "" {
				vals = []string{o.Namespace}
			}
		}
		v := r.Values[0]
		has := slices.Contains(vals, v)
		switch {
		case r.Op == query.Equals && v == "":
			if len(vals) > 0 && !has {
				return false
			}
		case r.Op == query.Equals:
			if !has {
				return false
			}
		case r.Op == query.NotEquals && v == "":
			if len(vals) == 0 || has {
				return false
			}
		case r.Op == query.NotEquals:
			if has {
				return false
			}
		}
	}
	if q.Text != "" && !o.matchesText(q.Text) {
		return false
	}
	if ow := q.Owner; ow != nil && !slices.ContainsFunc(o.Owners, func(r OwnerRef) bool {
		return ow.UID != "" && r.UID == ow.UID || ow.UID == "" && r.Kind == ow.Kind && r.Name == ow.Name
	}) {
		return false
	}
	if q.CreatedSince != nil && o.Created.Before(q.CreatedSince.Resolve(q.Now)) ||
		q.CreatedBefore != nil && !o.Created.Before(q.CreatedBefore.Resolve(q.Now)) ||
		q.ChangedSince != nil && o.Changed.Truncate(time.Millisecond).Before(q.ChangedSince.Resolve(q.Now)) {
		return false
	}
	return true
}

// sortObjects orders objects as q's results: its sort keys (a cluster-scoped object's missing
// namespace, a missing status and a missing column key, last in either direction), else cluster, namespace, name; then uid. A query with text
// and no sort is ordered by relevance, which the corpus does not predict: those cases compare sets.
func sortObjects(objs []*Object, q *query.Query) {
	sorts := q.Sort
	if len(sorts) == 0 {
		sorts = []query.Sort{{Field: query.SortCluster}, {Field: query.SortNamespace}, {Field: query.SortName}}
	}
	slices.SortStableFunc(objs, func(a, b *Object) int {
		for _, s := range sorts {
			var c int
			switch s.Field {
			case query.SortCluster:
				c = cmp.Compare(a.Cluster, b.Cluster)
			case query.SortKind:
				c = cmp.Compare(a.Kind, b.Kind)
			case query.SortName:
				c = cmp.Compare(a.Name, b.Name)
			case query.SortStatus:
				// What the builder wrote, missing last in either direction.
				as, bs := a.status(), b.status()
				switch {
				case !as.Exists() && !bs.Exists():
				case !as.Exists():
					return 1
				case !bs.Exists():
					return -1
				default:
					c = cmp.Compare(as.Str, bs.Str)
				}
			default:
				// A column's key as the builder wrote it, missing last in either direction.
				id, _ := query.ColumnSort(s.Field)
				ak, bk := a.column(id), b.column(id)
				switch {
				case !ak.Exists() && !bk.Exists():
				case !ak.Exists():
					return 1
				case !bk.Exists():
					return -1
				default:
					c = cmp.Compare(ak.Str, bk.Str)
				}
			case query.SortCreationTimestamp:
				c = a.Created.Compare(b.Created)
			case query.SortLastChangedAt:
				c = a.Changed.Truncate(time.Millisecond).Compare(b.Changed.Truncate(time.Millisecond))
			case query.SortNamespace:
				switch {
				case a.Namespace == "" && b.Namespace == "":
				case a.Namespace == "":
					return 1
				case b.Namespace == "":
					return -1
				default:
					c = cmp.Compare(a.Namespace, b.Namespace)
				}
			}
			if s.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Compare(a.UID, b.UID)
	})
}

// expectedFacet is a facet over objs: the top f.Size values by count (ties by value), and the
// count of the rest.
func expectedFacet(objs []*Object, f query.Facet) store.FacetResult {
	counts := map[string]int64{}
	for _, o := range objs {
		switch f.Dimension {
		case query.FacetCluster:
			counts[o.Cluster]++
		case query.FacetNamespace:
			if o.Namespace != "" {
				counts[o.Namespace]++
			}
		case query.FacetResource:
			r := o.Resource
			if o.Group != "" {
				r += "." + o.Group
			}
			counts[r]++
		case query.FacetLabels:
			for k, v := range o.Labels {
				counts[k+"="+v]++
			}
		case query.FacetLabel:
			if v, ok := o.Labels[f.Key]; ok {
				counts[v]++
			}
		}
	}
	buckets := make([]store.Bucket, 0, len(counts))
	for v, n := range counts {
		buckets = append(buckets, store.Bucket{Value: v, Count: n})
	}
	slices.SortFunc(buckets, func(a, b store.Bucket) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if f.Dimension == query.FacetLabel { // ordered as the stored key=value pairs
			return cmp.Compare(f.Key+"="+a.Value, f.Key+"="+b.Value)
		}
		return cmp.Compare(a.Value, b.Value)
	})
	res := store.FacetResult{Name: f.Name(), Buckets: buckets}
	if len(buckets) > f.Size {
		for _, b := range buckets[f.Size:] {
			res.Other += b.Count
		}
		res.Buckets = buckets[:f.Size]
	}
	return res
}

// expectedVersions is Query.Versions over objs: the newest resourceVersion per cluster among the
// objects of q's resources, clusters and scope.
func expectedVersions(objs []*Object, q *query.Query) map[string]int64 {
	wide := &query.Query{Resources: q.Resources, Clusters: q.Clusters, Scope: q.Scope, Now: q.Now}
	out := map[string]int64{}
	for _, o := range objs {
		if o.Matches(wide) {
			out[o.Cluster] = max(out[o.Cluster], o.RV())
		}
	}
	return out
}

// expectedCounts is Counts over objs, in (cluster, group, resource) order.
func expectedCounts(objs []*Object, scope *query.Scope) []store.Count {
	n := map[store.Pair]int64{}
	for _, o := range objs {
		if scope.Allows(o.Cluster, o.Namespace, o.Group, o.Resource) {
			n[o.Pair()]++
		}
	}
	var out []store.Count
	for p, c := range n {
		out = append(out, store.Count{Cluster: p.Cluster, Group: p.Group, Resource: p.Resource, Documents: c})
	}
	sortCounts(out)
	return out
}

func sortCounts(cs []store.Count) {
	slices.SortFunc(cs, func(a, b store.Count) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
	})
}
