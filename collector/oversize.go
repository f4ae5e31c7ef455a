package collector

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// An event over the stream's message size limit is published in a smaller form rather than left
// out: left out, the index would keep the object's older state (or, for a DELETED, the object
// itself) until the next list. The forms, tried in this order until one fits:
//
//   - truncated (ADDED, MODIFIED): apiVersion, kind and metadata, then the other top-level fields
//     smallest first while they fit, and of the first that does not fit whole, its own fields
//     smallest first (a ConfigMap keeps its small keys, a Pod its nodeName); TruncatedAnnotation
//     says so and TruncatedFieldsAnnotation names what was left out;
//   - metadata only: apiVersion, kind and metadata, annotated alike — all a DELETED needs beyond
//     its identity, and what a watch's label selector matches;
//   - a DELETED without object: the envelope's identity only. For an ADDED or MODIFIED the object
//     leaves the index (its older state must not stay searchable); it is counted, logged, named in
//     /status and dead-lettered like an event that cannot be published at all.
//
// Only an event nothing of which fits (not even a DELETED without object, which is a few hundred
// bytes) is dropped.

// TruncatedAnnotation marks an object published without some of its fields because its event was
// over the stream's message size limit; TruncatedFieldsAnnotation lists the paths left out
// (top-level fields, or "field.key" for a key of a top-level object), comma-separated, cut at
// maxTruncatedFields bytes with a trailing "…".
const (
	TruncatedAnnotation       = "kubesearch.io/truncated"
	TruncatedFieldsAnnotation = "kubesearch.io/truncated-fields"
)

// form is what of its object an event carries.
type form uint8

const (
	formFull form = iota
	formTruncated
	formMetadata
	formIdentity
)

func (f form) String() string {
	return [...]string{"full", "truncated", "metadata", "identity"}[f]
}

const (
	// maxTruncatedFields bounds TruncatedFieldsAnnotation's value: a ConfigMap of thousands of keys
	// must not spend its budget naming them.
	maxTruncatedFields = 1024
	// annotationRoom is what the two annotations (and an annotations object, when the object had
	// none) take at most.
	annotationRoom = maxTruncatedFields + 128
)

// errNoFit says no smaller form of an event fits the limit.
var errNoFit = errors.New("no smaller form fits")

// smaller returns the first form after from of the event in value whose message (under key) takes
// at most limit bytes, with that form. SYNC and PURGE carry no object, so they have none.
func smaller(key, value []byte, from form, limit int) ([]byte, form, envelope.Type, error) {
	ev, err := envelope.Unmarshal(value)
	if err != nil {
		return nil, from, "", fmt.Errorf("decode the event: %w", err)
	}
	switch ev.Type {
	case envelope.Added, envelope.Modified, envelope.Deleted:
	default:
		return nil, from, "", fmt.Errorf("a %s event: %w", ev.Type, errNoFit)
	}
	for f := from + 1; f <= formIdentity; f++ {
		if f == formTruncated && ev.Type == envelope.Deleted {
			continue // a deletion needs the identity only: no use keeping part of the body
		}
		if f != formIdentity && len(ev.Object) == 0 {
			continue
		}
		out := *ev
		if f == formIdentity {
			out.Type, out.Object = envelope.Deleted, nil
		} else {
			budget, err := objectBudget(key, &out, limit)
			if err != nil {
				return nil, from, "", err
			}
			// An object that is not a JSON object (the indexer would dead-letter it) goes on to the
			// DELETED without object, like one too large.
			if out.Object, err = shrinkObject(ev.Object, budget, f == formMetadata); err != nil {
				continue
			}
		}
		v, err := out.Marshal()
		if err != nil {
			return nil, from, "", fmt.Errorf("encode the %s form: %w", f, err)
		}
		m := stream.Message{Key: key, Value: v}
		if m.Size() <= limit {
			return v, f, out.Type, nil
		}
	}
	return nil, from, "", errNoFit
}

// objectBudget is how many bytes the object of ev may take for its message to fit limit.
func objectBudget(key []byte, ev *envelope.Event, limit int) (int, error) {
	head := *ev
	head.Object = nil
	v, err := head.Marshal()
	if err != nil {
		return 0, fmt.Errorf("encode the envelope: %w", err)
	}
	m := stream.Message{Key: key, Value: v}
	// Marshal appends the object as `,"object":<object>` before the closing brace.
	return limit - m.Size() - len(`,"object":`), nil
}

// jsonMember is one member of a JSON object, as its text has it.
type jsonMember struct {
	name string
	key  []byte          // the name as JSON
	raw  json.RawMessage // the value, verbatim
}

func (m jsonMember) size() int { return len(m.key) + 1 + len(m.raw) }

// jsonMembers reads the members of a JSON object in order, values verbatim.
func jsonMembers(raw []byte) ([]jsonMember, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []jsonMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		key, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		out = append(out, jsonMember{name: name, key: key, raw: v})
	}
	return out, nil
}

func jsonObjectSize(ms []jsonMember) int {
	n := 2 + max(len(ms)-1, 0)
	for _, m := range ms {
		n += m.size()
	}
	return n
}

func appendJSONObject(dst []byte, ms []jsonMember) []byte {
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.key...)
		dst = append(dst, ':')
		dst = append(dst, m.raw...)
	}
	return append(dst, '}')
}

// shrinkObject returns obj reduced to at most budget bytes, annotated: apiVersion, kind and
// metadata always, then (unless metadataOnly) other members smallest first while they fit, and of
// those that do not fit whole, as many of their own members as fit. errNoFit when even apiVersion,
// kind and metadata do not.
func shrinkObject(obj []byte, budget int, metadataOnly bool) ([]byte, error) {
	ms, err := jsonMembers(obj)
	if err != nil {
		return nil, err
	}
	keep := map[string]jsonMember{}
	var rest []jsonMember
	for _, m := range ms {
		switch m.name {
		case "apiVersion", "kind", "metadata":
			keep[m.name] = m
		default:
			rest = append(rest, m)
		}
	}
	used := annotationRoom + 2 + max(len(keep)-1, 0)
	for _, m := range keep {
		used += m.size()
	}
	var omitted []string
	if metadataOnly {
		for _, m := range rest {
			omitted = append(omitted, m.name)
		}
	} else {
		bySize := slices.Clone(rest)
		slices.SortStableFunc(bySize, func(a, b jsonMember) int { return cmp.Compare(a.size(), b.size()) })
		for _, m := range bySize {
			if used+1+m.size() <= budget {
				keep[m.name], used = m, used+1+m.size()
				continue
			}
			part, left, ok := partial(m, budget-used-1)
			if !ok {
				omitted = append(omitted, m.name)
				continue
			}
			keep[m.name], used = part, used+1+part.size()
			omitted = append(omitted, left...)
		}
	}
	meta, err := annotated(keep["metadata"].raw, omitted)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	keep["metadata"] = jsonMember{name: "metadata", key: []byte(`"metadata"`), raw: meta}
	out := make([]jsonMember, 0, len(keep))
	for _, m := range ms { // the object's own order
		if k, ok := keep[m.name]; ok {
			out = append(out, k)
		}
	}
	if _, ok := keep["metadata"]; ok && !slices.ContainsFunc(ms, func(m jsonMember) bool { return m.name == "metadata" }) {
		out = append(out, keep["metadata"])
	}
	if jsonObjectSize(out) > budget {
		return nil, errNoFit
	}
	return appendJSONObject(nil, out), nil
}

// partial is m, an object, with as many of its members as fit avail bytes, smallest first, and the
// paths of those left out; false when m is not an object or none of its members fits.
func partial(m jsonMember, avail int) (jsonMember, []string, bool) {
	subs, err := jsonMembers(m.raw)
	if err != nil || len(subs) == 0 {
		return jsonMember{}, nil, false
	}
	bySize := slices.Clone(subs)
	slices.SortStableFunc(bySize, func(a, b jsonMember) int { return cmp.Compare(a.size(), b.size()) })
	used := len(m.key) + 1 + 2
	kept := map[string]bool{}
	var left []string
	for _, s := range bySize {
		sep := 0
		if len(kept) > 0 {
			sep = 1
		}
		if used+sep+s.size() <= avail {
			kept[s.name], used = true, used+sep+s.size()
			continue
		}
		left = append(left, m.name+"."+s.name)
	}
	if len(kept) == 0 {
		return jsonMember{}, nil, false
	}
	var in []jsonMember
	for _, s := range subs {
		if kept[s.name] {
			in = append(in, s)
		}
	}
	return jsonMember{name: m.name, key: m.key, raw: appendJSONObject(nil, in)}, left, true
}

// annotated returns metadata with TruncatedAnnotation set and TruncatedFieldsAnnotation listing
// omitted after what an earlier reduction listed.
func annotated(metadata []byte, omitted []string) ([]byte, error) {
	if len(metadata) == 0 {
		metadata = []byte(`{}`)
	}
	ms, err := jsonMembers(metadata)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ms, func(m jsonMember) bool { return m.name == "annotations" })
	var anns []jsonMember
	if i >= 0 && string(ms[i].raw) != "null" {
		if anns, err = jsonMembers(ms[i].raw); err != nil {
			return nil, fmt.Errorf("annotations: %w", err)
		}
	}
	var listed []string
	anns = slices.DeleteFunc(anns, func(m jsonMember) bool {
		if m.name == TruncatedFieldsAnnotation {
			var s string
			if json.Unmarshal(m.raw, &s) == nil {
				s = strings.TrimSuffix(strings.TrimSuffix(s, "…"), ",")
				if s != "" {
					listed = strings.Split(s, ",")
				}
			}
		}
		return m.name == TruncatedAnnotation || m.name == TruncatedFieldsAnnotation
	})
	for _, o := range omitted {
		if !slices.Contains(listed, o) {
			listed = append(listed, o)
		}
	}
	for _, kv := range [][2]string{{TruncatedAnnotation, "true"}, {TruncatedFieldsAnnotation, fieldList(listed)}} {
		k, _ := json.Marshal(kv[0])
		v, _ := json.Marshal(kv[1])
		anns = append(anns, jsonMember{name: kv[0], key: k, raw: v})
	}
	a := jsonMember{name: "annotations", key: []byte(`"annotations"`), raw: appendJSONObject(nil, anns)}
	if i >= 0 {
		ms[i] = a
	} else {
		ms = append(ms, a)
	}
	return appendJSONObject(nil, ms), nil
}

// fieldList joins paths with commas, as many as fit maxTruncatedFields bytes as JSON (names may
// need escapes), then "…" for the rest.
func fieldList(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		next := p
		if b.Len() > 0 {
			next = "," + p
		}
		if v, _ := json.Marshal(b.String() + next); len(v) > maxTruncatedFields-len(",…") {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString("…")
			break
		}
		b.WriteString(next)
	}
	return b.String()
}
