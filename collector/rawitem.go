package collector

import (
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
// only the decoding path can publish it: a Secret to redact (rebuilt from an allow-list), an item
// naming another apiVersion or kind, or one whose shape is unexpected. item is a string so that
// the page's items are read where they are, not copied first. The item is walked once and its
// metadata once (a CPU profile of a 9,000-Pod resync had a fifth of the collector in gjson: a
// lookup per metadata field scanned the whole metadata, managedFields included, eight times).
func readRawItem(item, apiVersion, kind string, redact bool) (rawItem, bool) {
	if redact {
		return rawItem{}, false
	}
	var meta, av, k gjson.Result
	gjson.Parse(item).ForEach(func(key, value gjson.Result) bool {
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
	var ns, name, uid, rv, managed, created, deleted, ann gjson.Result
	var members []memberSpan
	managedAt := -1
	gjson.Parse(meta.Raw).ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "namespace":
			ns = value
		case "name":
			name = value
		case "uid":
			uid = value
		case "resourceVersion":
			rv = value
		case "managedFields":
			managed, managedAt = value, len(members)
		case "creationTimestamp":
			created = value
		case "deletionTimestamp":
			deleted = value
		case "annotations":
			ann = value
		}
		members = append(members, memberSpan{key.Index, value.Index + len(value.Raw)})
		return true
	})
	// Cloned: gjson's strings point into the page, and the store keeps uid and resourceVersion of
	// every object; sharing would keep every whole page alive.
	it := rawItem{ns: strings.Clone(ns.Str), name: strings.Clone(name.Str), uid: strings.Clone(uid.Str), rv: strings.Clone(rv.Str)}
	var times []gjson.Result
	managed.ForEach(func(_, entry gjson.Result) bool {
		times = append(times, entry.Get("time")) // before fieldsV1 in every entry: found early
		return true
	})
	it.changed = latestChange(times, created, deleted)

	md := cutMember(meta.Raw, members, managedAt)
	if ann.IsObject() && ann.Get(gjson.Escape(document.LastAppliedAnnotation)).Exists() {
		pruned := removeMember([]byte(ann.Raw), document.LastAppliedAnnotation)
		if isEmptyObject(pruned) {
			md = string(removeMember([]byte(md), "annotations"))
		} else {
			md = string(replaceMember([]byte(md), "annotations", pruned))
		}
	}
	from, to := meta.Index, meta.Index+len(meta.Raw)
	if from <= 0 || to > len(item) || item[from:to] != meta.Raw {
		return rawItem{}, false
	}
	out := make([]byte, 0, len(item)-len(meta.Raw)+len(md)+len(apiVersion)+len(kind)+32)
	head := item[:from]
	if !av.Exists() {
		// List items carry no apiVersion and kind; the objects published must. metadata is a
		// member, so the object is not empty: a comma follows.
		brace := strings.IndexByte(head, '{')
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

// memberSpan is where one member of a JSON object lies in it: from its key to the end of its value.
type memberSpan struct{ keyStart, valueEnd int }

// cutMember returns obj without its member at index target of members (its spans, in order), and
// the comma that joined it; obj itself when target is -1.
func cutMember(obj string, members []memberSpan, target int) string {
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
	return obj[:from] + obj[to:]
}

// latestChange is changedAt over the item's managedFields times, creation and deletion.
func latestChange(times []gjson.Result, created, deleted gjson.Result) time.Time {
	var latest time.Time
	for _, ts := range times {
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
	var members []memberSpan
	target := -1
	gjson.ParseBytes(obj).ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			target = len(members)
		}
		members = append(members, memberSpan{k.Index, v.Index + len(v.Raw)})
		return true
	})
	if target < 0 {
		return obj
	}
	return []byte(cutMember(string(obj), members, target))
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
