// Package document builds the OpenSearch document of a Kubernetes object (DESIGN section 4): the
// pruned object under "object" with the cache-source annotation, plus the typed helper fields that
// filters, sorts, facets and free text use (mappings/README.md lists them). One builder serves the
// indexer's writes and the rebuild of stored documents when an index rolls; the per-kind fields live
// one file per kind family (kinds.go dispatches; pods.go, workloads.go; fields.go the fields every
// kind has), and writer.go appends JSON without an encoder. It leaves out where documents go and how
// they are written.
package document

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/table"
	"github.com/kubesearch/kubesearch/mappings"
)

// CachedFromClusterAnnotation is set on every stored object to the member cluster it came from, as
// karmada-search does, so a client reading objects through the facade can tell them apart.
const CachedFromClusterAnnotation = "resource.karmada.io/cached-from-cluster"

// LastAppliedAnnotation is kubectl's copy of the whole object: the collector prunes it (DESIGN
// section 3), and the builder drops it too, as it can be as large as the object itself.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ErrMalformed marks an event whose object can never become a document, however often it is
// retried: such events go to the dead-letter topic. Errors that match it also match
// envelope.ErrMalformed, so one check covers a bad envelope and a bad object.
var ErrMalformed = errors.New("document: malformed object")

type malformedError struct{ msg string }

func (e *malformedError) Error() string { return ErrMalformed.Error() + ": " + e.msg }

func (e *malformedError) Is(target error) bool {
	return target == ErrMalformed || target == envelope.ErrMalformed
}

func malformed(ev *envelope.Event, format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf("cluster %q resource %q object %q: ", ev.Cluster, ev.GroupResource(), ev.NamespacedName()) +
		fmt.Sprintf(format, args...)}
}

// Lucene refuses a whole document when one of its terms exceeds this many bytes. flat_object indexes
// every string leaf of the object as the term "object.<dotted path>=<value>", so a ConfigMap holding a
// 40 KB dashboard would be rejected, and with it every later version of that ConfigMap.
const (
	maxTermBytes = 32766
	// flatTermOverhead is what flat_object adds to a leaf's path and value: "object." and "=".
	flatTermOverhead = len(mappings.FieldObject) + 2
)

// objectView holds the parts of the object the builder reads, found in one pass over the top level and
// one over metadata. Every result points into the event's bytes; nothing is copied.
type objectView struct {
	root                                                  gjson.Result
	apiVersion, kind, metadata, spec, status, typ, reason gjson.Result

	name, namespace, uid, resourceVersion, creation, deletion gjson.Result
	labels, annotations, owners                               gjson.Result
}

func (v *objectView) read(src string) error {
	v.root = gjson.Parse(src)
	if !v.root.IsObject() {
		return errors.New("object: not a JSON object")
	}
	v.root.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "apiVersion":
			v.apiVersion = val
		case "kind":
			v.kind = val
		case "metadata":
			v.metadata = val
		case "spec":
			v.spec = val
		case "status":
			v.status = val
		case "type":
			v.typ = val
		case "reason":
			v.reason = val
		}
		return true
	})
	if !v.metadata.IsObject() {
		return errors.New("metadata: missing or not an object")
	}
	v.metadata.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "name":
			v.name = val
		case "namespace":
			v.namespace = val
		case "uid":
			v.uid = val
		case "resourceVersion":
			v.resourceVersion = val
		case "creationTimestamp":
			v.creation = val
		case "deletionTimestamp":
			v.deletion = val
		case "labels":
			v.labels = val
		case "annotations":
			v.annotations = val
		case "ownerReferences":
			v.owners = val
		}
		return true
	})
	// Annotations are rewritten, so anything but an object or null cannot be carried over faithfully.
	if v.annotations.Exists() && v.annotations.Type != gjson.Null && !v.annotations.IsObject() {
		return errors.New("metadata.annotations: not an object")
	}
	// Metadata is spliced by offset; make sure the offset gjson reports is where its text really is.
	if v.metadata.Index <= 0 || v.metadata.Index+len(v.metadata.Raw) > len(src) ||
		src[v.metadata.Index:v.metadata.Index+len(v.metadata.Raw)] != v.metadata.Raw {
		return errors.New("metadata: cannot locate it in the object")
	}
	return nil
}

// Build returns the OpenSearch document for an ADDED or MODIFIED event: typed helper fields
// read from the envelope and the object, and the object itself (under "object") with the
// cached-from-cluster annotation set and managedFields and the last-applied annotation dropped. The
// fields are documented in mappings/README.md.
//
// An object whose string leaves are too long for Lucene is stored whole under "fullObject" and
// indexed without those leaves, which "trimmedPaths" lists; mappings.StoredObject reads either shape.
//
// Errors match ErrMalformed and envelope.ErrMalformed (never retry them): the event is not JSON, not an ADDED or MODIFIED event, or its
// object does not agree with the envelope (uid, name, namespace, kind, apiVersion, resourceVersion).
func Build(ev *envelope.Event) ([]byte, error) {
	return build(ev, false)
}

// BuildDecoded is Build for an event from envelope.Unmarshal, whose object is known to be valid
// JSON already (encoding/json checks the whole message before it decodes any of it): the check is
// a third of the builder's time.
func BuildDecoded(ev *envelope.Event) ([]byte, error) {
	return build(ev, true)
}

// Object is an event's object as the store keeps and a LIST returns it: the cache annotation set,
// managedFields and the last-applied annotation dropped, apiVersion and kind filled in from the
// envelope. A watch of the facade sends it, so a watched object is byte for byte a listed one. It
// takes the event of any type that carries an object (DELETED carries the last state), decoded by
// envelope.Unmarshal.
func Object(ev *envelope.Event) ([]byte, error) {
	if len(ev.Object) == 0 {
		return nil, malformed(ev, "object: missing")
	}
	src := string(ev.Object)
	var v objectView
	if err := v.read(src); err != nil {
		return nil, malformed(ev, "%v", err)
	}
	kind, err := v.check(ev)
	if err != nil {
		return nil, malformed(ev, "%v", err)
	}
	obj := appendObject(make([]byte, 0, len(src)+128), src, &v, ev, kind)
	if bytes.IndexByte(obj, '\n') >= 0 {
		obj = compact(obj)
	}
	return obj, nil
}

// build is Build; objectValid says ev.Object is known to be valid JSON and need not be checked.
func build(ev *envelope.Event, objectValid bool) ([]byte, error) {
	if ev == nil {
		return nil, &malformedError{msg: "nil event"}
	}
	if ev.Type != envelope.Added && ev.Type != envelope.Modified {
		return nil, malformed(ev, "a %s event has no document to build", ev.Type)
	}
	// gjson reads invalid JSON without complaint but unpredictably, and a broken object may carry a
	// raw line break that splits its _bulk line and fails the request for every document in it.
	// Caught here, the event can be dead-lettered with its reason.
	if len(ev.Object) == 0 || (!objectValid && !gjson.ValidBytes(ev.Object)) {
		return nil, malformed(ev, "object: not valid JSON")
	}
	// A string view of the event's bytes, without copying them (objects reach 1.5 MiB): it lives only
	// during this call, and everything read through it is copied into the returned document.
	src := unsafe.String(unsafe.SliceData(ev.Object), len(ev.Object))

	var v objectView
	if err := v.read(src); err != nil {
		return nil, malformed(ev, "%v", err)
	}
	kind, err := v.check(ev)
	if err != nil {
		return nil, malformed(ev, "%v", err)
	}

	// One allocation in the common case: the object plus room for the helper fields.
	w := docWriter{b: make([]byte, 0, len(src)+2048)}
	w.b = append(w.b, '{')
	var textBuf [32]string
	text := stringSet{items: textBuf[:0]}

	w.str(FieldCluster, ev.Cluster)
	w.str(FieldGroup, ev.Group)
	w.str(FieldVersion, ev.Version)
	w.str(FieldResource, ev.Resource)
	w.str(FieldKind, kind)
	w.key(FieldAPIVersion)
	w.b = append(w.b, '"')
	if ev.Group != "" {
		w.b = appendEscaped(w.b, ev.Group)
		w.b = append(w.b, '/')
	}
	w.b = appendEscaped(w.b, ev.Version)
	w.b = append(w.b, '"')
	if v.namespace.Str != "" {
		w.str(FieldNamespace, v.namespace.Str)
	}
	w.str(FieldName, v.name.Str)
	w.str(FieldUID, v.uid.Str)
	w.int(FieldResourceVersion, parseResourceVersion(v.resourceVersion.Str))
	w.int(FieldEpoch, ev.Epoch)
	w.timestamp(FieldCreationTimestamp, v.creation)
	w.timestamp(FieldDeletionTimestamp, v.deletion)
	if changed := ev.LastChanged(); !changed.IsZero() {
		w.key(FieldLastChangedAt)
		w.b = append(w.b, '"')
		w.b = changed.UTC().AppendFormat(w.b, "2006-01-02T15:04:05.000Z07:00")
		w.b = append(w.b, '"')
	}
	text.add(ev.Cluster)
	text.add(kind)
	text.add(v.namespace.Str)
	text.add(v.name.Str)

	w.labels(v.labels, &text)
	w.annotationKeys(v.annotations)
	w.owners(v.owners)
	var st [stCount]gjson.Result
	pick(v.status, statusKeys[:], st[:])
	w.conditions(st[stConditions])
	if p := st[stPhase]; p.Type == gjson.String {
		w.str(FieldPhase, p.Str)
	}
	w.kindFields(ev.Group, kind, &v, &st, &text)
	w.printed(ev)

	l := w.list(FieldText)
	for _, s := range text.items {
		l.add(s)
	}
	l.end()

	w.key(mappings.FieldObject)
	objStart := len(w.b)
	w.b = appendObject(w.b, src, &v, ev, kind)
	// A _bulk body holds one document per line; the object's bytes are copied as they came, so a
	// pretty-printed object would end its line early. Collectors send compact JSON, so this is a
	// memchr in the common case.
	if bytes.IndexByte(w.b[objStart:], '\n') >= 0 {
		w.b = w.b[:objStart+len(compact(w.b[objStart:]))]
	}
	if len(w.b)-objStart+flatTermOverhead > maxTermBytes {
		w.b = trimObject(w.b, objStart)
	}
	w.b = append(w.b, '}')
	return w.b, nil
}

// printed writes what the object's Table prints that the search sorts by, computed by the Table's
// own functions (table.Printer.Index, one decode) so the page's columns sort as they show:
//
//   - status, the cell of the Status column (a Pod's Running or CrashLoopBackOff, a Node's
//     Ready,SchedulingDisabled), for sort=status; kinds without a Status column (most) and an
//     empty cell write none;
//   - columns, one sort key per other column of the kind's Table ({"ready": …, "restarts": …},
//     keyed by table.ColumnID), for sort=columns.<id>.
//
// Custom resources (their columns are their CRD's, which the builder does not have) write
// neither, nor does an object the printer cannot decode (its Table row fails too), whose document
// is still written. Documents without them sort last.
func (w *docWriter) printed(ev *envelope.Event) {
	p, ok := table.Lookup(ev.Group, ev.Resource)
	if !ok {
		return
	}
	ix, err := p.Index(ev.Object)
	if err != nil {
		return
	}
	if ix.HasStatus && ix.Status != "" {
		w.str(FieldStatus, ix.Status)
	}
	if len(ix.Keys) == 0 {
		return
	}
	w.key(FieldColumns)
	w.b = append(w.b, '{')
	for i, k := range ix.Keys {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = AppendString(w.b, k.Column)
		w.b = append(w.b, ':')
		w.b = AppendString(w.b, k.Value)
	}
	w.b = append(w.b, '}')
}

// check compares the object with the envelope and returns the kind to index under.
func (v *objectView) check(ev *envelope.Event) (string, error) {
	var errs []error
	if v.uid.Str == "" {
		errs = append(errs, errors.New("metadata.uid: missing"))
	} else if v.uid.Str != ev.UID {
		errs = append(errs, fmt.Errorf("metadata.uid %q differs from the event's %q", v.uid.Str, ev.UID))
	}
	if v.name.Str == "" {
		errs = append(errs, errors.New("metadata.name: missing"))
	} else if v.name.Str != ev.Name {
		errs = append(errs, fmt.Errorf("metadata.name %q differs from the event's %q", v.name.Str, ev.Name))
	}
	if v.namespace.Str != ev.Namespace {
		errs = append(errs, fmt.Errorf("metadata.namespace %q differs from the event's %q", v.namespace.Str, ev.Namespace))
	}
	if rv := v.resourceVersion.Str; rv != "" && ev.ResourceVersion != "" && rv != ev.ResourceVersion {
		errs = append(errs, fmt.Errorf("metadata.resourceVersion %q differs from the event's %q", rv, ev.ResourceVersion))
	}
	kind := ev.Kind
	if v.kind.Exists() {
		switch {
		case v.kind.Type != gjson.String:
			errs = append(errs, errors.New("kind: not a string"))
		case kind == "":
			kind = v.kind.Str
		case v.kind.Str != kind:
			errs = append(errs, fmt.Errorf("kind %q differs from the event's %q", v.kind.Str, kind))
		}
	}
	if kind == "" {
		errs = append(errs, errors.New("kind: missing in both event and object"))
	}
	if v.apiVersion.Exists() && !isAPIVersion(v.apiVersion.Str, ev.Group, ev.Version) {
		errs = append(errs, fmt.Errorf("apiVersion %q differs from the event's group %q and version %q", v.apiVersion.Str, ev.Group, ev.Version))
	}
	return kind, errors.Join(errs...)
}

func isAPIVersion(s, group, version string) bool {
	if group == "" {
		return s == version
	}
	return len(s) == len(group)+1+len(version) && strings.HasPrefix(s, group) && s[len(group)] == '/' &&
		strings.HasSuffix(s, version)
}

// parseResourceVersion gives 0 for a resourceVersion that is not an integer (some aggregated APIs),
// so the field stays numeric and sortable.
func parseResourceVersion(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// appendObject appends the object as stored: metadata rewritten (cache annotation set, managedFields
// and the last-applied annotation dropped), apiVersion and kind filled in from the envelope when the
// object lacks them, and every other byte copied as it came.
func appendObject(dst []byte, src string, v *objectView, ev *envelope.Event, kind string) []byte {
	start := v.root.Index // the opening brace
	end := len(src)
	for end > start && src[end-1] <= ' ' {
		end--
	}
	dst = append(dst, '{')
	if !v.apiVersion.Exists() {
		dst = append(dst, `"apiVersion":"`...)
		if ev.Group != "" {
			dst = appendEscaped(dst, ev.Group)
			dst = append(dst, '/')
		}
		dst = appendEscaped(dst, ev.Version)
		dst = append(dst, `",`...)
	}
	if !v.kind.Exists() {
		dst = append(dst, `"kind":`...)
		dst = AppendString(dst, kind)
		dst = append(dst, ',')
	}
	dst = append(dst, src[start+1:v.metadata.Index]...)
	dst = appendMetadata(dst, v.metadata, ev.Cluster)
	dst = append(dst, src[v.metadata.Index+len(v.metadata.Raw):end]...)
	return dst
}

func appendMetadata(dst []byte, meta gjson.Result, cluster string) []byte {
	dst = append(dst, '{')
	n := 0
	sawAnnotations := false
	meta.ForEach(func(k, val gjson.Result) bool {
		if k.Str == "managedFields" {
			return true
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, k.Raw...)
		dst = append(dst, ':')
		if k.Str == "annotations" {
			sawAnnotations = true
			dst = appendAnnotations(dst, val, cluster)
		} else {
			dst = append(dst, val.Raw...)
		}
		return true
	})
	if !sawAnnotations {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"annotations":`...)
		dst = appendAnnotations(dst, gjson.Result{}, cluster)
	}
	return append(dst, '}')
}

// appendAnnotations writes the annotations (an object, or null or absent meaning none) with the
// cache-source annotation set, replacing any value it had.
func appendAnnotations(dst []byte, ann gjson.Result, cluster string) []byte {
	dst = append(dst, '{')
	forEach(ann, func(k, val gjson.Result) bool {
		if k.Str == CachedFromClusterAnnotation || k.Str == LastAppliedAnnotation {
			return true
		}
		dst = append(dst, k.Raw...)
		dst = append(dst, ':')
		dst = append(dst, val.Raw...)
		dst = append(dst, ',')
		return true
	})
	dst = append(dst, `"`+CachedFromClusterAnnotation+`":`...)
	dst = AppendString(dst, cluster)
	return append(dst, '}')
}

// trimObject rewrites the object that starts at doc[objStart:] when one of its string leaves is too
// long for Lucene: "object" keeps everything else, "trimmedPaths" names what was left out, and
// "fullObject" (not indexed) keeps the whole object for readers. It is the rare path, taken only for
// objects over 32 KB.
func trimObject(doc []byte, objStart int) []byte {
	full := doc[objStart:]
	// doc is not touched until the walk is done, so the view stays valid while it is read.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(full), len(full)))
	if !hasLongLeaf(root, 0) {
		return doc // a big object of short leaves, the usual kind: nothing to copy
	}
	t := trimmer{dst: make([]byte, 0, 4096)}
	t.value(root)
	t.dst = append(t.dst, `,"`+mappings.FieldTrimmedPaths+`":[`...)
	for i, p := range t.trimmed {
		if i > 0 {
			t.dst = append(t.dst, ',')
		}
		t.dst = AppendString(t.dst, p)
	}
	t.dst = append(t.dst, `],"`+mappings.FieldFullObject+`":`...)
	// Slide the full object right and put the trimmed one and the list before it, rather than
	// copying a 1.5 MiB object once more.
	fullLen := len(full)
	doc = append(doc, make([]byte, len(t.dst))...)
	copy(doc[objStart+len(t.dst):], doc[objStart:objStart+fullLen])
	copy(doc[objStart:], t.dst)
	return doc
}

// LeafSearchable says whether a string leaf at a dotted path is indexed, so that field selectors
// can match it: a leaf too long for one term is kept in the stored object but never matched.
// Whatever filters objects outside the store (a watch's selectors) applies the same rule.
func LeafSearchable(path, value string) bool {
	return len(path)+len(value)+flatTermOverhead <= maxTermBytes
}

// hasLongLeaf reports whether v, at a path of pathLen bytes, holds a string leaf that would make an
// immense term. The bound is the one trimmer.value uses.
func hasLongLeaf(v gjson.Result, pathLen int) bool {
	if pathLen+len(v.Raw)+flatTermOverhead <= maxTermBytes {
		return false
	}
	found := false
	switch {
	case v.IsObject():
		v.ForEach(func(k, val gjson.Result) bool {
			p := pathLen + len(k.Str)
			if pathLen > 0 {
				p++ // the dot
			}
			found = hasLongLeaf(val, p)
			return !found
		})
	case v.IsArray():
		v.ForEach(func(_, val gjson.Result) bool {
			found = hasLongLeaf(val, pathLen)
			return !found
		})
	case v.Type == gjson.String:
		found = pathLen+len(v.Str)+flatTermOverhead > maxTermBytes
	}
	return found
}

type trimmer struct {
	dst     []byte
	path    []byte // dotted, without array indices, as flat_object names leaves
	trimmed []string
}

// value copies v to t.dst without the string leaves that would make an immense term, and reports
// whether anything of v was kept.
func (t *trimmer) value(v gjson.Result) bool {
	// A subtree's leaves are never longer, with their paths, than its text plus the path leading to
	// it: every key in the subtree costs more characters in the text ("key":) than in a path (key.).
	if len(t.path)+len(v.Raw)+flatTermOverhead <= maxTermBytes {
		t.dst = append(t.dst, v.Raw...)
		return true
	}
	switch {
	case v.IsObject():
		t.dst = append(t.dst, '{')
		n := 0
		v.ForEach(func(k, val gjson.Result) bool {
			mark, plen := len(t.dst), len(t.path)
			if n > 0 {
				t.dst = append(t.dst, ',')
			}
			t.dst = append(t.dst, k.Raw...)
			t.dst = append(t.dst, ':')
			if plen > 0 {
				t.path = append(t.path, '.')
			}
			t.path = append(t.path, k.Str...)
			if t.value(val) {
				n++
			} else {
				t.dst = t.dst[:mark]
			}
			t.path = t.path[:plen]
			return true
		})
		t.dst = append(t.dst, '}')
		return true
	case v.IsArray():
		t.dst = append(t.dst, '[')
		n := 0
		v.ForEach(func(_, val gjson.Result) bool {
			mark := len(t.dst)
			if n > 0 {
				t.dst = append(t.dst, ',')
			}
			if t.value(val) {
				n++
			} else {
				t.dst = t.dst[:mark]
			}
			return true
		})
		t.dst = append(t.dst, ']')
		return true
	case v.Type == gjson.String && len(t.path)+len(v.Str)+flatTermOverhead > maxTermBytes:
		p := string(t.path)
		for _, q := range t.trimmed {
			if q == p {
				return false
			}
		}
		t.trimmed = append(t.trimmed, p)
		return false
	default:
		t.dst = append(t.dst, v.Raw...)
		return true
	}
}

// Rebuild builds this version's document for a document stored by any version, for a roll to a new
// index (internal/osstore/roll.go). It reads only what every version stores: the envelope's fields at the top
// (cluster, group, version, resource, kind, epoch, lastChangedAt) and the stored object, which holds
// the rest. The result equals what Build made of the event that stored the original.
func Rebuild(source []byte) ([]byte, error) {
	obj, err := mappings.StoredObject(source)
	if err != nil {
		return nil, err
	}
	top := gjson.GetManyBytes(source, FieldCluster, FieldGroup, FieldVersion, FieldResource, FieldKind, FieldEpoch, FieldLastChangedAt)
	meta := gjson.GetManyBytes(obj, "metadata.namespace", "metadata.name", "metadata.uid", "metadata.resourceVersion")
	ev := &envelope.Event{
		V: envelope.Version, Type: envelope.Modified,
		Cluster: top[0].Str, Group: top[1].Str, Version: top[2].Str, Resource: top[3].Str, Kind: top[4].Str,
		Namespace: meta[0].Str, Name: meta[1].Str, UID: meta[2].Str, ResourceVersion: meta[3].Str,
		Epoch: top[5].Int(), Object: obj,
	}
	if t := top[6]; t.Exists() {
		if ev.ChangedAt, err = time.Parse(time.RFC3339Nano, t.Str); err != nil {
			return nil, fmt.Errorf("lastChangedAt: %w", err)
		}
	}
	return build(ev, true)
}

// identityPaths are what Identity keeps of an object's metadata.
var identityPaths = []string{"name", "namespace", "uid", "resourceVersion", "labels", "creationTimestamp"}

// Identity is an object's apiVersion, kind and the metadata that names it (name, namespace, uid,
// resourceVersion, labels, creation time), in that order: what a watcher is told of an object
// that went away without a last state (garbage collection after a SYNC or PURGE), the same from
// every store backend.
func Identity(obj []byte) []byte {
	root := gjson.ParseBytes(obj)
	b := make([]byte, 0, 256)
	b = append(b, `{"apiVersion":`...)
	b = AppendString(b, root.Get("apiVersion").Str)
	b = append(b, `,"kind":`...)
	b = AppendString(b, root.Get("kind").Str)
	b = append(b, `,"metadata":{`...)
	meta := root.Get("metadata")
	n := 0
	for _, k := range identityPaths {
		v := meta.Get(k)
		if !v.Exists() {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = AppendString(b, k)
		b = append(b, ':')
		if k == "labels" && v.IsObject() {
			b = appendSortedLabels(b, v)
			continue
		}
		b = append(b, v.Raw...)
	}
	return append(b, "}}"...)
}

// appendSortedLabels writes labels with their keys in order: OpenSearch's filtered _source does
// not keep a map's order, and a label set has none.
func appendSortedLabels(b []byte, labels gjson.Result) []byte {
	type kv struct{ k, raw string }
	var all []kv
	labels.ForEach(func(k, v gjson.Result) bool {
		all = append(all, kv{k.Str, v.Raw})
		return true
	})
	slices.SortFunc(all, func(x, y kv) int { return strings.Compare(x.k, y.k) })
	b = append(b, '{')
	for i, l := range all {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, l.k)
		b = append(b, ':')
		b = append(b, l.raw...)
	}
	return append(b, '}')
}
