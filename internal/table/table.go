package table

import (
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/json"
)

// Printer renders the objects of one resource as Table rows. It is safe for concurrent use.
type Printer struct {
	columns []metav1.TableColumnDefinition
	row     func(obj []byte, now time.Time) (metav1.TableRow, error)
	// status renders the Status column's cell alone; nil when the resource has no such column.
	status func(obj []byte) (string, error)
	// keys computes the sort keys (keys.go), of the object narrowed to what they read unless
	// whole; nil for a printer without keyed columns.
	keys func(obj []byte, whole bool) (Indexed, error)
	// keyedApart are the columns whose key is not their cell's (kind.keys), for the tests.
	keyedApart []string
}

// Columns are the column definitions of the resource, in the order of the cells of Row.
func (p *Printer) Columns() []metav1.TableColumnDefinition { return slices.Clone(p.columns) }

// Row renders one object, its JSON as stored, into the row's cells (and, for pods, the row conditions
// kube-apiserver sets). now is the response time, from which ages are computed. The row's Object is
// left empty.
func (p *Printer) Row(obj []byte, now time.Time) (metav1.TableRow, error) { return p.row(obj, now) }

// StatusColumn is the name of the column the search page shows as STATUS and the document builder
// indexes for sort=status.
const StatusColumn = "Status"

// Status renders the object's Status cell, the one Row puts under the StatusColumn, by the same
// cell function, without the other columns. ok is false when the resource's printer has no Status
// column (most kinds: Deployments count replicas, ConfigMaps their keys). The cell depends on the
// object alone, never on the time, so it can be computed once when the object is stored. obj must
// be valid JSON, as a stored object is: Status reads only the members the cell needs, and does not
// check the rest.
func (p *Printer) Status(obj []byte) (status string, ok bool, err error) {
	if p.status == nil {
		return "", false, nil
	}
	s, err := p.status(obj)
	return s, err == nil, err
}

// For returns the printer kube-apiserver uses for a built-in resource (group "" is the core group),
// or Default for a resource without one. Custom resources are printed by ForCRD.
func For(group, resource string) *Printer {
	if p, ok := Lookup(group, resource); ok {
		return p
	}
	return Default()
}

// Lookup returns the printer of a built-in resource and true, or false for a resource without one:
// a client that cannot read CRDs prints those its own way (kubectl search: NAME and AGE).
func Lookup(group, resource string) (*Printer, bool) {
	if f, ok := builtIn[group+"/"+resource]; ok {
		return f(), true
	}
	return nil, false
}

// BuiltIn are the resources with a printer of their own, "group/resource" ("/pods" for the core
// group), sorted.
func BuiltIn() []string { return slices.Sorted(maps.Keys(builtIn)) }

var builtIn = map[string]func() *Printer{
	"/pods":                       pods,
	"apps/deployments":            deployments,
	"apps/replicasets":            replicaSets,
	"apps/statefulsets":           statefulSets,
	"apps/daemonsets":             daemonSets,
	"batch/jobs":                  jobs,
	"batch/cronjobs":              cronJobs,
	"/services":                   services,
	"networking.k8s.io/ingresses": ingresses,
	"/configmaps":                 configMaps,
	"/secrets":                    secrets,
	"/namespaces":                 namespaces,
	"/nodes":                      nodes,
	"/events":                     events,
	"events.k8s.io/events":        eventsV1,
	"/persistentvolumeclaims":     persistentVolumeClaims,
	"/serviceaccounts":            serviceAccounts,
}

// Default is kube-apiserver's table for a resource without a printer: the name and the creation time
// as an RFC 3339 timestamp.
func Default() *Printer {
	return kind[metav1.PartialObjectMetadata]{columns: []column[metav1.PartialObjectMetadata]{
		{nameColumn(), func(o *metav1.PartialObjectMetadata, _ time.Time) any { return o.Name }},
		{metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: metaDoc("creationTimestamp")},
			func(o *metav1.PartialObjectMetadata, _ time.Time) any {
				return o.CreationTimestamp.UTC().Format(time.RFC3339)
			}},
	}}.printer()
}

// kind is the printer of one Go type: each column carries its definition and the function that fills
// its cell, so the schema and the code travel together.
type kind[T any] struct {
	// decode, if set, reads the object in place of unmarshalling its JSON into T.
	decode func([]byte) (*T, error)
	// prepare, if set, computes what several cells share once the object is decoded.
	prepare    func(*T)
	conditions func(*T) []metav1.TableRowCondition
	columns    []column[T]
	// statusMembers, if set, are all the Status cell reads of the object (status.go): Status
	// decodes only those.
	statusMembers []member
	// keys, by column name, are the sort keys of the columns whose cell reads the time or does
	// not compare as its text (keys.go); any other column's key is its cell's.
	keys map[string]func(*T) (string, bool)
	// keyMembers, if set, are all the keyed columns read of the object (status.go): SortKeys
	// decodes only those, as Status does its members.
	keyMembers []member
}

type column[T any] struct {
	def  metav1.TableColumnDefinition
	cell func(o *T, now time.Time) any
}

func (k kind[T]) printer() *Printer {
	defs := make([]metav1.TableColumnDefinition, len(k.columns))
	for i, c := range k.columns {
		defs[i] = c.def
	}
	decode := func(b []byte) (*T, error) {
		d := k.decode
		if d == nil {
			d = func(b []byte) (*T, error) {
				o := new(T)
				return o, unmarshal(b, o)
			}
		}
		o, err := d(b)
		if err != nil {
			return nil, fmt.Errorf("table: decode %T: %w", o, err)
		}
		if k.prepare != nil {
			k.prepare(o)
		}
		return o, nil
	}
	p := &Printer{columns: defs, row: func(obj []byte, now time.Time) (metav1.TableRow, error) {
		o, err := decode(obj)
		if err != nil {
			return metav1.TableRow{}, err
		}
		row := metav1.TableRow{Cells: make([]any, len(k.columns))}
		for i, c := range k.columns {
			row.Cells[i] = c.cell(o, now)
		}
		if k.conditions != nil {
			row.Conditions = k.conditions(o)
		}
		return row, nil
	}}
	var statusCell func(*T, time.Time) any
	for _, c := range k.columns {
		if c.def.Name == StatusColumn {
			statusCell = c.cell
			break
		}
	}
	// A Status cell is text and never reads the time (no kind prints an age there).
	statusOf := func(o *T) string {
		s, _ := statusCell(o, time.Time{}).(string)
		return s
	}
	if statusCell != nil {
		p.status = func(obj []byte) (string, error) {
			if k.statusMembers != nil {
				obj = narrow(obj, k.statusMembers)
			}
			o, err := decode(obj)
			if err != nil {
				return "", err
			}
			return statusOf(o), nil
		}
	}
	type keyed struct {
		id  string
		key func(*T) (string, bool)
	}
	var keyers []keyed
	for _, c := range k.columns {
		if unkeyed(c.def.Name) {
			continue
		}
		key := k.keys[c.def.Name]
		if key != nil {
			p.keyedApart = append(p.keyedApart, c.def.Name)
		} else {
			cell := c.cell
			// The zero time: a column whose cell reads the time has its own key function, and
			// TestSortKeysIgnoreTheTime holds every other cell to the same text at any time.
			key = func(o *T) (string, bool) { return cellKey(cell(o, time.Time{})) }
		}
		keyers = append(keyers, keyed{ColumnID(c.def.Name), key})
	}
	if len(keyers) > 0 {
		// One decode for the keys and the Status cell: keyMembers hold statusMembers.
		p.keys = func(obj []byte, whole bool) (Indexed, error) {
			if k.keyMembers != nil && !whole {
				obj = narrow(obj, k.keyMembers)
			}
			o, err := decode(obj)
			if err != nil {
				return Indexed{}, err
			}
			var out Indexed
			if statusCell != nil {
				out.Status, out.HasStatus = statusOf(o), true
			}
			out.Keys = make([]Key, 0, len(keyers))
			for _, kc := range keyers {
				if v, ok := kc.key(o); ok {
					out.Keys = append(out.Keys, Key{Column: kc.id, Value: v})
				}
			}
			return out, nil
		}
	}
	return p
}

// unmarshal decodes JSON as kube-apiserver does: field names case-sensitively, numbers in an
// interface{} as int64 where they are integers.
func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func metaDoc(field string) string { return metav1.ObjectMeta{}.SwaggerDoc()[field] }

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metaDoc("name")}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metaDoc("creationTimestamp")}
}

func str(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc}
}

func integer(name, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "integer", Description: desc}
}

// wide marks a column kubectl shows only with -o wide.
func wide(d metav1.TableColumnDefinition) metav1.TableColumnDefinition {
	d.Priority = 1
	return d
}

// since is the age kube-apiserver prints: "<unknown>" for an unset time.
func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func sinceMicro(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
