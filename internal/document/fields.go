package document

import (
	"net/netip"

	"github.com/tidwall/gjson"
)

// The helper fields every kind family shares: labels, annotation keys, owners, conditions, IPs.

// conditionTrue says whether the condition of type typ is "True".
func conditionTrue(conds gjson.Result, typ string) bool {
	found := false
	forEach(conds, func(_, c gjson.Result) bool {
		if c.Get("type").Str == typ {
			found = c.Get("status").Str == "True"
			return false
		}
		return true
	})
	return found
}

func (w *docWriter) labels(labels gjson.Result, text *stringSet) {
	if !labels.IsObject() {
		return
	}
	l := w.list(FieldLabels)
	labels.ForEach(func(k, val gjson.Result) bool {
		if val.Type != gjson.String {
			return true
		}
		l.addPair(k.Str, '=', val.Str)
		text.add(val.Str)
		return true
	})
	l.end()
	l = w.list(FieldLabelKeys)
	labels.ForEach(func(k, val gjson.Result) bool {
		if val.Type == gjson.String {
			l.add(k.Str)
		}
		return true
	})
	l.end()
}

// annotationKeys lists the keys of the annotations as stored, so with the cache-source annotation and
// without the last-applied one.
func (w *docWriter) annotationKeys(ann gjson.Result) {
	l := w.list(FieldAnnotationKeys)
	forEach(ann, func(k, _ gjson.Result) bool {
		if k.Str != CachedFromClusterAnnotation && k.Str != LastAppliedAnnotation {
			l.add(k.Str)
		}
		return true
	})
	l.add(CachedFromClusterAnnotation)
	l.end()
}

func (w *docWriter) owners(refs gjson.Result) {
	if !refs.IsArray() {
		return
	}
	var kindBuf [4]string
	kinds := stringSet{items: kindBuf[:0]}
	l := w.list(FieldOwnerUIDs)
	refs.ForEach(func(_, r gjson.Result) bool {
		l.add(r.Get("uid").Str)
		kinds.add(r.Get("kind").Str)
		return true
	})
	l.end()
	l = w.list(FieldOwnerKinds)
	for _, k := range kinds.items {
		l.add(k)
	}
	l.end()
	l = w.list(FieldOwnerRefs)
	refs.ForEach(func(_, r gjson.Result) bool {
		k, n := r.Get("kind").Str, r.Get("name").Str
		if k != "" && n != "" {
			l.addPair(k, '/', n)
		}
		return true
	})
	l.end()
}

// conditions writes "Type=Status" for every condition, whatever the kind: most controllers and CRDs
// report their state this way.
func (w *docWriter) conditions(conds gjson.Result) {
	if !conds.IsArray() {
		return
	}
	l := w.list(FieldConditions)
	conds.ForEach(func(_, c gjson.Result) bool {
		t, s := c.Get("type").Str, c.Get("status").Str
		if t != "" && s != "" {
			l.addPair(t, '=', s)
		}
		return true
	})
	l.end()
}

// ips writes the valid addresses of a list (of objects holding them under sub, or of strings when sub
// is empty), or of single when the list is absent. Dual-stack objects have two; "None" (a headless
// Service) and empty strings are left out, as an ip field would reject them.
func (w *docWriter) ips(name string, list gjson.Result, sub string, single gjson.Result) {
	l := w.list(name)
	add := func(s string) {
		if _, err := netip.ParseAddr(s); err == nil {
			l.add(s)
		}
	}
	if list.IsArray() {
		list.ForEach(func(_, e gjson.Result) bool {
			if sub != "" {
				e = e.Get(sub)
			}
			add(e.Str)
			return true
		})
	} else {
		add(single.Str)
	}
	l.end()
}
