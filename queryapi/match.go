package queryapi

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
)

// matches says whether an object (its JSON) passes a facade request's selectors: what a watch
// applies to each event, with the semantics the store's compiler gives a LIST — labels as
// Kubernetes matches them; fields on any path, through lists by any element, "" matching a
// missing or empty value, values compared as strings, leaves too long to index never matching.
func matches(q *query.Query, obj []byte) bool {
	if len(q.Labels) == 0 && len(q.Fields) == 0 {
		return true // most watches, informers': nothing to read of the object
	}
	labels := gjson.GetBytes(obj, "metadata.labels")
	for _, r := range q.Labels {
		v := labels.Get(gjson.Escape(r.Key))
		has := v.Exists()
		switch r.Op {
		case query.Exists:
			if !has {
				return false
			}
		case query.NotExists:
			if has {
				return false
			}
		case query.Equals, query.In:
			if !has || !slices.Contains(r.Values, v.String()) {
				return false
			}
		case query.NotEquals, query.NotIn:
			if has && slices.Contains(r.Values, v.String()) {
				return false
			}
		default:
			return false
		}
	}
	if len(q.Fields) == 0 {
		return true
	}
	root := gjson.ParseBytes(obj)
	for _, r := range q.Fields {
		vals := leaves(root, r.Key, strings.Split(r.Key, "."))
		want := ""
		if len(r.Values) > 0 {
			want = r.Values[0]
		}
		has := slices.Contains(vals, want) || (want == "" && len(vals) == 0)
		if (r.Op == query.NotEquals) == has {
			return false
		}
	}
	return true
}

// leaves are the string forms of the searchable values at a dotted path. A key may hold dots
// (annotation keys do), so the rest of the path is also tried as one key.
func leaves(v gjson.Result, full string, path []string) []string {
	if len(path) == 0 {
		switch {
		case v.IsArray():
			var out []string
			for _, e := range v.Array() {
				out = append(out, leaves(e, full, nil)...)
			}
			return out
		case v.Type == gjson.String:
			if !document.LeafSearchable(full, v.Str) {
				return nil
			}
			return []string{v.Str}
		case v.Type == gjson.Number, v.Type == gjson.True, v.Type == gjson.False:
			return []string{v.Raw}
		}
		return nil
	}
	switch {
	case v.IsObject():
		var out []string
		for n := 1; n <= len(path); n++ {
			if child := v.Get(gjson.Escape(strings.Join(path[:n], "."))); child.Exists() {
				out = append(out, leaves(child, full, path[n:])...)
			}
		}
		return out
	case v.IsArray():
		var out []string
		for _, e := range v.Array() {
			out = append(out, leaves(e, full, path)...)
		}
		return out
	}
	return nil
}
