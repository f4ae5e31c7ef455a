package search

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/table"
)

// object is what printing reads of a stored object besides its cells.
type object struct {
	raw     json.RawMessage
	gvk     schema.GroupVersionKind
	name    string
	ns      string
	cluster string
}

func decodeObject(raw json.RawMessage) (object, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return object{}, fmt.Errorf("search: an object of the answer: %w", err)
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return object{}, fmt.Errorf("search: object %s/%s: apiVersion %q: %w", head.Metadata.Namespace, head.Metadata.Name, head.APIVersion, err)
	}
	return object{raw: raw, gvk: gv.WithKind(head.Kind), name: head.Metadata.Name, ns: head.Metadata.Namespace,
		cluster: head.Metadata.Annotations[clusterAnnotation]}, nil
}

func (r *run) print(ctx context.Context, items []json.RawMessage) error {
	o := r.opts
	switch o.Output {
	case OutputJSON, OutputYAML:
		return printList(o.Out, o.Output, items)
	}
	if len(items) == 0 {
		fmt.Fprintln(o.ErrOut, "No resources found")
		return nil
	}
	objs := make([]object, len(items))
	for i, raw := range items {
		obj, err := decodeObject(raw)
		if err != nil {
			return err
		}
		objs[i] = obj
	}
	if o.Output == OutputName {
		for _, obj := range objs {
			if _, err := fmt.Fprintln(o.Out, qualifiedName(obj)); err != nil {
				return err
			}
		}
		return nil
	}
	return r.printTables(ctx, objs)
}

// printList writes the objects as kubectl get -o json|yaml writes a list of several resources: a v1
// List. Each object keeps the annotation naming its cluster.
func printList(out io.Writer, format string, items []json.RawMessage) error {
	if items == nil {
		items = []json.RawMessage{}
	}
	list := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}{"v1", "List", map[string]string{"resourceVersion": ""}, items}
	b, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return fmt.Errorf("encode the list: %w", err)
	}
	if format == OutputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return fmt.Errorf("encode the list: %w", err)
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}

// qualifiedName is kubectl's -o name (pod/web-1, deployment.apps/web) with the object named as the
// facade's qualified view names it, <name>_<cluster>: `kubectl --context kubesearch-qualified get`
// and describe take the line as it is, where a cluster prefix (member1/pod/web-1) would be read by
// nothing.
func qualifiedName(obj object) string {
	kind := strings.ToLower(obj.gvk.Kind)
	if obj.gvk.Group != "" {
		kind += "." + obj.gvk.Group
	}
	name := obj.name
	if obj.cluster != "" {
		name += "_" + obj.cluster
	}
	return kind + "/" + name
}

// printTables writes one table per kind, in the order the kinds first appear, as kubectl get prints
// several kinds: CLUSTER, NAMESPACE (left out when one namespace is searched, as kubectl leaves it
// out without -A), then kube-apiserver's columns of the kind; -o wide adds the columns of priority 1.
func (r *run) printTables(ctx context.Context, objs []object) error {
	o := r.opts
	var order []schema.GroupVersionKind
	byKind := map[schema.GroupVersionKind][]object{}
	for _, obj := range objs {
		if _, ok := byKind[obj.gvk]; !ok {
			order = append(order, obj.gvk)
		}
		byKind[obj.gvk] = append(byKind[obj.gvk], obj)
	}
	// kubectl prints the kinds in the order they were asked for; kinds not asked for (a search of
	// every kind) keep the order they first appear in.
	printers := map[schema.GroupVersionKind]printer{}
	rank := map[schema.GroupVersionKind]int{}
	for _, gvk := range order {
		var gr schema.GroupResource
		printers[gvk], gr = r.printerFor(ctx, gvk)
		rank[gvk] = len(r.resources)
		if i := slices.Index(r.resources, gr); i >= 0 {
			rank[gvk] = i
		}
	}
	slices.SortStableFunc(order, func(a, b schema.GroupVersionKind) int { return rank[a] - rank[b] })
	// kubectl names rows kind/name when a get covers several kinds, so rows stay told apart.
	prefixKind := len(r.resources) != 1 || len(order) > 1
	withNamespace := len(o.Namespaces) != 1
	now := o.Now()
	w := tabwriter.NewWriter(o.Out, 6, 4, 3, ' ', 0) // kubectl's tab writer
	for i, gvk := range order {
		if i > 0 {
			fmt.Fprintln(w)
		}
		p := printers[gvk]
		cols := p.Columns()
		var show []int
		nameCol := -1
		for j, c := range cols {
			if c.Priority == 0 || o.Output == OutputWide {
				show = append(show, j)
			}
			if c.Name == "Name" {
				nameCol = j
			}
		}
		if !o.NoHeaders {
			head := []string{"CLUSTER"}
			if withNamespace {
				head = append(head, "NAMESPACE")
			}
			for _, j := range show {
				head = append(head, strings.ToUpper(cols[j].Name))
			}
			fmt.Fprintln(w, strings.Join(head, "\t"))
		}
		for _, obj := range byKind[gvk] {
			row, err := p.Row(obj.raw, now)
			if err != nil {
				return fmt.Errorf("print %s %s/%s of cluster %s: %w", gvk.Kind, obj.ns, obj.name, obj.cluster, err)
			}
			cells := []string{orNone(obj.cluster)}
			if withNamespace {
				cells = append(cells, orNone(obj.ns))
			}
			for _, j := range show {
				cell := cellText(row.Cells[j])
				if j == nameCol && prefixKind {
					cell = kindPrefix(gvk) + cell
				}
				cells = append(cells, cell)
			}
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
	}
	return w.Flush()
}

// printer is what a table needs of a kind: internal/table's printers, and nameAge.
type printer interface {
	Columns() []metav1.TableColumnDefinition
	Row(obj []byte, now time.Time) (metav1.TableRow, error)
}

// printerFor is kube-apiserver's printer of the kind's resource, or NAME and AGE (what kube-apiserver
// prints for a custom resource without printer columns; this client reads no CRD); and the resource.
func (r *run) printerFor(ctx context.Context, gvk schema.GroupVersionKind) (printer, schema.GroupResource) {
	gvr, ok := r.kinds.kindOf(ctx, gvk)
	if ok {
		if p, ok := table.Lookup(gvr.Group, gvr.Resource); ok {
			return p, gvr.GroupResource()
		}
	}
	return nameAge{}, gvr.GroupResource()
}

// nameAge prints NAME and AGE.
type nameAge struct{}

func (nameAge) Columns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}, {Name: "Age", Type: "string"}}
}

func (nameAge) Row(obj []byte, now time.Time) (metav1.TableRow, error) {
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &m); err != nil {
		return metav1.TableRow{}, err
	}
	age := "<unknown>"
	if t := m.Metadata.CreationTimestamp; !t.IsZero() {
		age = duration.HumanDuration(now.Sub(t.Time))
	}
	return metav1.TableRow{Cells: []any{m.Metadata.Name, age}}, nil
}

func kindPrefix(gvk schema.GroupVersionKind) string {
	k := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		k += "." + gvk.Group
	}
	return k + "/"
}

// cellText prints a cell as kubectl's table printer does.
func cellText(c any) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprint(c)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// printCounts writes each facet's buckets: a table of value and count, or the facets as JSON or YAML.
func printCounts(o Options, dims []string, res *searchResult) error {
	if o.Output == OutputJSON || o.Output == OutputYAML {
		b, err := json.MarshalIndent(struct {
			Total  int64         `json:"total"`
			Facets []facetResult `json:"facets"`
		}{res.Total, res.Facets}, "", "    ")
		if err != nil {
			return fmt.Errorf("encode the counts: %w", err)
		}
		if o.Output == OutputYAML {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return fmt.Errorf("encode the counts: %w", err)
			}
		} else {
			b = append(b, '\n')
		}
		_, err = o.Out.Write(b)
		return err
	}
	w := tabwriter.NewWriter(o.Out, 6, 4, 3, ' ', 0)
	for i, f := range res.Facets {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if !o.NoHeaders {
			fmt.Fprintf(w, "%s\tCOUNT\n", countHeader(dims, i, f.Name))
		}
		for _, b := range f.Buckets {
			fmt.Fprintf(w, "%s\t%d\n", b.Value, b.Count)
		}
		if f.Other > 0 {
			fmt.Fprintf(w, "<other>\t%d\n", f.Other)
		}
		if f.ErrorBound > 0 {
			fmt.Fprintf(o.ErrOut, "Warning: the counts by %s may be off by up to %d\n", f.Name, f.ErrorBound)
		}
	}
	if len(res.Facets) == 0 && res.Total == 0 {
		fmt.Fprintln(o.ErrOut, "No resources found")
	}
	return w.Flush()
}

// countHeader names a facet's column as the user asked for it (KIND for kind, the key for a label).
func countHeader(dims []string, i int, name string) string {
	d := name
	if i < len(dims) {
		d = dims[i]
	}
	d = strings.TrimPrefix(d, "label:")
	return strings.ToUpper(d)
}
