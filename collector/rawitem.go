package collector

import (
	"bytes"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
)

// rawItem is a list item read from its bytes, without decoding it into a map: what listing needs of
// it, and the object as prune and the decoding path would publish it (managedFields and kubectl's
// last-applied annotation dropped, apiVersion and kind set). Decoding every item into a map and
// encoding it again was most of the list path's time (a CPU profile of a 3,000-Pod list: 35% in
// the decode, 25% in the encode).
type rawItem struct {
	ns, name, uid, rv string
	changed           time.Time // as changedAt says
	object            []byte
}

// readRawItem reads item, a JSON object of a list page, for kind in apiVersion. ok is false when
// only the decoding path can publish it: a Secret whose values are blanked (redact), an item
// naming another apiVersion or kind, or one whose shape is unexpected.
func readRawItem(item []byte, apiVersion, kind string, redact bool) (rawItem, bool) {
	if redact {
		return rawItem{}, false
	}
	var meta, av, k gjson.Result
	gjson.ParseBytes(item).ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "metadata":
			meta = value
		case "apiVersion":
			av = value
		case "kind":
			k = value
		}
		return true
	})
	if !meta.IsObject() || av.Exists() != k.Exists() || (av.Exists() && (av.Str != apiVersion || k.Str != kind)) {
		return rawItem{}, false
	}
	m := gjson.GetMany(meta.Raw, "namespace", "name", "uid", "resourceVersion", "managedFields.#.time",
		"creationTimestamp", "deletionTimestamp", "annotations")
	// Cloned: gjson's strings point into the item, and the store keeps uid and resourceVersion of
	// every object; sharing would keep every whole item alive.
	it := rawItem{ns: strings.Clone(m[0].Str), name: strings.Clone(m[1].Str), uid: strings.Clone(m[2].Str), rv: strings.Clone(m[3].Str)}
	it.changed = latestChange(m[4], m[5], m[6])

	md := []byte(meta.Raw)
	md = removeMember(md, "managedFields")
	if ann := m[7]; ann.IsObject() && ann.Get(gjson.Escape(document.LastAppliedAnnotation)).Exists() {
		pruned := removeMember([]byte(ann.Raw), document.LastAppliedAnnotation)
		if isEmptyObject(pruned) {
			md = removeMember(md, "annotations")
		} else {
			md = replaceMember(md, "annotations", pruned)
		}
	}
	from, to := meta.Index, meta.Index+len(meta.Raw)
	if from <= 0 || to > len(item) || string(item[from:to]) != meta.Raw {
		return rawItem{}, false
	}
	out := make([]byte, 0, len(item)-len(meta.Raw)+len(md)+len(apiVersion)+len(kind)+32)
	head := item[:from]
	if !av.Exists() {
		// List items carry no apiVersion and kind; the objects published must. metadata is a
		// member, so the object is not empty: a comma follows.
		brace := bytes.IndexByte(head, '{')
		out = append(out, `{"apiVersion":`...)
		out = appendString(out, apiVersion)
		out = append(out, `,"kind":`...)
		out = appendString(out, kind)
		out = append(out, ',')
		head = head[brace+1:]
	}
	out = append(out, head...)
	out = append(out, md...)
	out = append(out, item[to:]...)
	it.object = out
	return it, true
}

// latestChange is changedAt over the item's managedFields times, creation and deletion.
func latestChange(times, created, deleted gjson.Result) time.Time {
	var latest time.Time
	for _, ts := range times.Array() {
		if t, err := time.Parse(time.RFC3339, ts.Str); err == nil && t.After(latest) {
			latest = t
		}
	}
	if latest.IsZero() {
		return time.Time{}
	}
	for _, r := range []gjson.Result{created, deleted} {
		if t, err := time.Parse(time.RFC3339, r.Str); err == nil && t.After(latest) {
			latest = t
		}
	}
	return latest.UTC()
}

// removeMember returns obj, a JSON object, without its member key (and the comma that joined it);
// obj itself when it has none.
func removeMember(obj []byte, key string) []byte {
	type span struct{ keyStart, valueEnd int }
	var members []span
	target := -1
	gjson.ParseBytes(obj).ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			target = len(members)
		}
		members = append(members, span{k.Index, v.Index + len(v.Raw)})
		return true
	})
	if target < 0 {
		return obj
	}
	from, to := members[target].keyStart, members[target].valueEnd
	switch {
	case target+1 < len(members):
		to = members[target+1].keyStart // this member, its comma and the space before the next
	case target > 0:
		from = members[target-1].valueEnd // the comma before the last member
	}
	out := make([]byte, 0, len(obj)-(to-from))
	return append(append(out, obj[:from]...), obj[to:]...)
}

// replaceMember returns obj with the value of its member key replaced by value.
func replaceMember(obj []byte, key string, value []byte) []byte {
	var from, to = -1, -1
	gjson.ParseBytes(obj).ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			from, to = v.Index, v.Index+len(v.Raw)
			return false
		}
		return true
	})
	if from < 0 {
		return obj
	}
	out := make([]byte, 0, len(obj)-(to-from)+len(value))
	return append(append(append(out, obj[:from]...), value...), obj[to:]...)
}

func isEmptyObject(obj []byte) bool {
	empty := true
	gjson.ParseBytes(obj).ForEach(func(_, _ gjson.Result) bool {
		empty = false
		return false
	})
	return empty
}

// appendString appends s as a JSON string; apiVersions and kinds need no escaping but quotes.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < ' ' {
			b = append(b, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return append(b, '"')
}
