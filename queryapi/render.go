package queryapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/table"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// shape is what a facade answer holds per object.
type shape uint8

const (
	shapeObject   shape = iota // the object
	shapeMetadata              // PartialObjectMetadata
	shapeTable                 // a Table row
)

// renderer writes a resource's objects for one request: the object as the view shows it (the
// qualified view renames it, the fleet views give it a vector resourceVersion), in the shape the
// Accept header asks for.
type renderer struct {
	res   apiResource
	view  view
	shape shape
	// tableVersion is the meta.k8s.io version of the Table asked for; includeObject what its rows
	// carry.
	tableVersion  string
	includeObject metav1.IncludeObjectPolicy
	table         printer
	// refs are the references the qualified view renames in the resource's objects.
	refs []reference
}

// newRenderer picks the first shape of the Accept header the facade serves, as kube-apiserver
// negotiates: Table, PartialObjectMetadata(List), or the objects as JSON.
func newRenderer(accept, includeObject string, res apiResource, v view) (*renderer, *metav1.Status) {
	o := &renderer{res: res, view: v, includeObject: metav1.IncludeMetadata}
	if v.qualified {
		o.refs = referencesOf(res.Group, res.Resource)
	}
	switch metav1.IncludeObjectPolicy(includeObject) {
	case "":
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
		o.includeObject = metav1.IncludeObjectPolicy(includeObject)
	default:
		return nil, newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("includeObject: %q is not one of None, Metadata, Object", includeObject))
	}
	if strings.TrimSpace(accept) == "" {
		return o, nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt := mediaParams(part)
		switch {
		case mt.typ != "application/json" && mt.typ != "*/*" && mt.typ != "application/*":
			continue
		case mt.params["as"] == "":
			return o, nil
		case mt.params["g"] != "meta.k8s.io" || (mt.params["v"] != "v1" && mt.params["v"] != "v1beta1"):
			continue
		case mt.params["as"] == "Table":
			o.shape, o.tableVersion = shapeTable, mt.params["v"]
			return o, nil
		case mt.params["as"] == "PartialObjectMetadata" || mt.params["as"] == "PartialObjectMetadataList":
			o.shape = shapeMetadata
			return o, nil
		}
	}
	return nil, newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		fmt.Sprintf("none of the media types of Accept %q is served: kubesearch answers application/json, as a Table (as=Table;g=meta.k8s.io;v=v1) or as PartialObjectMetadata", accept))
}

// object is a stored object as the view shows it in a list: in the fleet views its resourceVersion
// is the vector of its own cluster's.
func (o *renderer) object(stored []byte) ([]byte, error) {
	if !o.view.vector() {
		return o.res.served(stored)
	}
	n, _ := strconv.ParseInt(gjson.GetBytes(stored, "metadata.resourceVersion").Str, 10, 64)
	return o.objectAt(stored, rvVector{clusterOf(stored): n}.encode(o.view))
}

// objectAt is a stored object as the view shows it at the resourceVersion rv (as the view writes
// it: see encodeRV): a watch event's object carries the watch's whole position, so a client resuming from it misses nothing. The
// qualified view renames the object and its references to other objects of its member
// (references.go). An Event stored in the other API group is converted first (events.go).
func (o *renderer) objectAt(stored []byte, rv string) ([]byte, error) {
	return o.appendObjectAt(nil, stored, rv)
}

// appendObjectAt appends objectAt's answer to dst: a watch writes each event's object straight
// into its buffer (an event is rendered once per watcher: at 100 watchers, a copy less each).
func (o *renderer) appendObjectAt(dst, stored []byte, rv string) ([]byte, error) {
	stored, err := o.res.served(stored)
	if err != nil || !o.view.vector() {
		if dst == nil {
			return stored, err
		}
		return append(dst, stored...), err
	}
	meta := gjson.GetManyBytes(stored, "metadata.name", "metadata.resourceVersion")
	name, oldRV := meta[0], meta[1]
	if name.Index == 0 {
		return nil, fmt.Errorf("%w: no metadata.name", errNoStore)
	}
	edits := make([]edit, 0, 4)
	if oldRV.Index > 0 {
		edits = append(edits, edit{oldRV.Index, len(oldRV.Raw), quoteRV(rv)})
	}
	if o.view.qualified {
		cluster := clusterOf(stored)
		edits = append(edits, edit{name.Index, len(name.Raw), strconv.Quote(name.Str + qualifiedSeparator + cluster)})
		edits = qualifyReferences(stored, cluster, o.refs, edits)
	}
	return appendSplice(dst, stored, edits), nil
}

// appendEventAt is appendObjectAt for a watch cache event, whose metadata the cache located once
// for all the watchers that render it (watchcache.Event.RVAt): the fleet view, the one every event
// of a fleet watch is rewritten for, splices the resourceVersion in without a scan of its own.
// Other views (a converted Event, the qualified names) take appendObjectAt's way.
func (o *renderer) appendEventAt(dst []byte, e *watchcache.Event, rv string) ([]byte, error) {
	if o.res.from != nil || !o.view.vector() || o.view.qualified {
		return o.appendObjectAt(dst, e.Object, rv)
	}
	if e.NameAt.Len == 0 {
		return nil, fmt.Errorf("%w: no metadata.name", errNoStore)
	}
	if e.RVAt.Len == 0 {
		return append(dst, e.Object...), nil
	}
	at, n := int(e.RVAt.Off), int(e.RVAt.Len)
	dst = append(dst, e.Object[:at]...)
	dst = append(dst, quoteRV(rv)...)
	return append(dst, e.Object[at+n:]...), nil
}

// quoteRV is a resourceVersion as a JSON string: digits, or a sealed position's base64url, need
// no escaping.
func quoteRV(rv string) string {
	for i := 0; i < len(rv); i++ {
		if c := rv[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.Quote(rv)
		}
	}
	return `"` + rv + `"`
}

// edit replaces n bytes at at.
type edit struct {
	at, n int
	with  string
}

// splice applies edits found on the same original, whatever their order, into one new slice.
func splice(b []byte, edits []edit) []byte {
	size := len(b)
	for _, e := range edits {
		size += len(e.with) - e.n
	}
	return appendSplice(make([]byte, 0, size), b, edits)
}

// appendSplice appends b with the edits applied to out.
func appendSplice(out, b []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(x, y edit) int { return x.at - y.at })
	last := 0
	for _, e := range edits {
		out = append(append(out, b[last:e.at]...), e.with...)
		last = e.at + e.n
	}
	return append(out, b[last:]...)
}

// listHead writes everything of a list answer before its first item.
func (o *renderer) listHead(buf *bytes.Buffer, rv, cont string, remaining int64) {
	meta := metav1.ListMeta{ResourceVersion: rv, Continue: cont}
	if cont != "" && remaining > 0 {
		meta.RemainingItemCount = &remaining
	}
	switch o.shape {
	case shapeTable:
		o.tableHeadMeta(buf, meta)
		return
	case shapeMetadata:
		buf.WriteString(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":`)
	default:
		apiVersion := o.res.groupVersion()
		fmt.Fprintf(buf, `{"kind":%q,"apiVersion":%q,"metadata":`, o.res.Kind+"List", apiVersion)
	}
	writeJSON(buf, meta)
	buf.WriteString(`,"items":[`)
}

// tableHead starts a Table of one object (a GET).
func (o *renderer) tableHead(buf *bytes.Buffer, rv string) {
	o.tableHeadMeta(buf, metav1.ListMeta{ResourceVersion: rv})
}

func (o *renderer) tableHeadMeta(buf *bytes.Buffer, meta metav1.ListMeta) {
	fmt.Fprintf(buf, `{"kind":"Table","apiVersion":"meta.k8s.io/%s","metadata":`, o.tableVersion)
	writeJSON(buf, meta)
	cols := append([]metav1.TableColumnDefinition{{Name: "Cluster", Type: "string", Description: "The member cluster the object is cached from."}},
		o.table.Columns()...)
	buf.WriteString(`,"columnDefinitions":`)
	writeJSON(buf, cols)
	buf.WriteString(`,"rows":[`)
}

// row writes one object of a list (or of a one-object Table): a comma unless first, then the item.
func (o *renderer) row(buf *bytes.Buffer, stored, obj []byte, first bool, now time.Time) error {
	if !first {
		buf.WriteByte(',')
	}
	switch o.shape {
	case shapeObject:
		buf.Write(obj)
	case shapeMetadata:
		writePartial(buf, obj)
	case shapeTable:
		// The printers read the object as the client sees it: in the qualified view, its NAME is
		// the qualified name, as -o name and a GET by that name have it; an Event of the other
		// group is printed converted, by the printer of the group asked for.
		src := stored
		if o.view.qualified || o.res.from != nil {
			src = obj
		}
		row, err := o.table.Row(src, now)
		if err != nil {
			return fmt.Errorf("table row of %s: %w", gjson.GetBytes(stored, "metadata.name").Str, err)
		}
		buf.WriteString(`{"cells":`)
		writeJSON(buf, append([]any{clusterOf(stored)}, row.Cells...))
		if len(row.Conditions) > 0 {
			buf.WriteString(`,"conditions":`)
			writeJSON(buf, row.Conditions)
		}
		switch o.includeObject {
		case metav1.IncludeObject:
			buf.WriteString(`,"object":`)
			buf.Write(obj)
		case metav1.IncludeMetadata:
			buf.WriteString(`,"object":`)
			writePartial(buf, obj)
		}
		buf.WriteByte('}')
	}
	return nil
}

// writePartial writes an object's PartialObjectMetadata.
func writePartial(buf *bytes.Buffer, obj []byte) {
	buf.WriteString(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":`)
	buf.WriteString(gjson.GetBytes(obj, "metadata").Raw)
	buf.WriteByte('}')
}

func writeJSON(buf *bytes.Buffer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // Kubernetes API types and strings: a bug if it fails
	}
	buf.Write(b)
}

// printer renders a resource's Table columns: internal/table's Printer.
type printer interface {
	Columns() []metav1.TableColumnDefinition
	Row(obj []byte, now time.Time) (metav1.TableRow, error)
}

// printerFor picks the Table printer of a resource: kube-apiserver's columns for a built-in one;
// for a custom resource, the additionalPrinterColumns of the resource's version in its CRD when the
// CRD itself is cached in one of clusters (the clusters the request covers and the subject may
// see: the lowest-named one serving the version, so a member the subject cannot see never decides
// the columns, and a one-cluster view prints its own member's), else NAME and AGE, as
// kube-apiserver prints a CRD without columns. The CRD is read for its columns only, whether or not
// the subject may read CRDs, as kube-apiserver prints a custom resource for whoever lists it.
func (s *Server) printerFor(ctx context.Context, res apiResource, clusters []string) (printer, error) {
	// Groups without a dot are Kubernetes' own; a dotted one may be a CRD's even under *.k8s.io
	// (gateway.networking.k8s.io, snapshot.storage.k8s.io), so its CRD is looked for first.
	if !strings.Contains(res.Group, ".") {
		return table.For(res.Group, res.Resource), nil
	}
	var found *store.Result
	if len(clusters) > 0 {
		q := &query.Query{Resources: []query.Resource{{Resource: "customresourcedefinitions", Group: "apiextensions.k8s.io"}},
			Names: []string{res.Resource + "." + res.Group}, Clusters: clusters, Limit: 1,
			Fields: []query.Requirement{{Key: "spec.versions.name", Op: query.Equals, Values: []string{res.Version}}},
			Sort:   []query.Sort{{Field: query.SortCluster}}}
		var err error
		if found, err = s.store.Search(ctx, q); err != nil {
			return nil, err
		}
	} else {
		found = &store.Result{}
	}
	if len(found.Items) == 0 && builtinGroup(res.Group) {
		return table.For(res.Group, res.Resource), nil
	}
	var cols []table.PrinterColumn
	if len(found.Items) > 0 {
		v := gjson.GetBytes(found.Items[0], `spec.versions.#(name==`+strconv.Quote(res.Version)+`).additionalPrinterColumns`)
		if v.Exists() {
			if err := json.Unmarshal([]byte(v.Raw), &cols); err != nil {
				return nil, fmt.Errorf("additionalPrinterColumns of CRD %s.%s: %w", res.Resource, res.Group, err)
			}
		}
	}
	p, err := table.ForCRD(cols)
	if err != nil {
		// A column kube-apiserver would not have accepted: print NAME and AGE rather than fail.
		return table.ForCRD(nil)
	}
	return p, nil
}

// builtinGroup says whether a group is Kubernetes' own: the core group, the groups without a dot
// (apps, batch, policy, autoscaling) and *.k8s.io.
func builtinGroup(g string) bool {
	return !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io")
}
