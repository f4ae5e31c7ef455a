package table

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The golden files hold what kube-apiserver itself answered: tests/e2e's TestTableMatchesAPIServer
// created the objects in a member cluster, saved them as testdata/<name>.json and the server's Table
// of them as testdata/<name>.golden. Refresh both with
//
//	go test -tags e2e -run TestTable ./tests/e2e/ -args -table.update
//
// rather than from this package's own output, which would make the test unable to fail.
func TestRowsMatchAPIServer(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata")
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			var input struct {
				Group          string            `json:"group"`
				Resource       string            `json:"resource"`
				CustomResource bool              `json:"customResource"`
				PrinterColumns []PrinterColumn   `json:"printerColumns"`
				Items          []json.RawMessage `json:"items"`
			}
			var golden struct {
				Now     time.Time                      `json:"now"`
				Columns []metav1.TableColumnDefinition `json:"columns"`
				Rows    []struct {
					Cells      []any                      `json:"cells"`
					Conditions []metav1.TableRowCondition `json:"conditions"`
				} `json:"rows"`
			}
			readJSON(t, in, &input)
			readJSON(t, strings.TrimSuffix(in, ".json")+".golden", &golden)

			p := For(input.Group, input.Resource)
			if input.CustomResource {
				if p, err = ForCRD(input.PrinterColumns); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := jsonString(t, p.Columns()), jsonString(t, golden.Columns); got != want {
				t.Errorf("columns:\n got %s\nwant %s", got, want)
			}
			if len(input.Items) != len(golden.Rows) {
				t.Fatalf("%d objects, %d golden rows", len(input.Items), len(golden.Rows))
			}
			for i, obj := range input.Items {
				row, err := p.Row(obj, golden.Now)
				if err != nil {
					t.Fatal(err)
				}
				want := golden.Rows[i]
				if len(row.Cells) != len(want.Cells) {
					t.Errorf("row %d: %d cells, want %d", i, len(row.Cells), len(want.Cells))
					continue
				}
				for j, cell := range row.Cells {
					if got, want := jsonString(t, cell), jsonString(t, want.Cells[j]); got != want {
						t.Errorf("row %s column %s: got %s, want %s", golden.Rows[i].Cells[0], golden.Columns[j].Name, got, want)
					}
				}
				if got, want := jsonString(t, row.Conditions), jsonString(t, want.Conditions); got != want {
					t.Errorf("row %s conditions: got %s, want %s", golden.Rows[i].Cells[0], got, want)
				}
			}
		})
	}
}

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		group, resource string
		columns         string
	}{
		{"", "pods", "Name Ready Status Restarts Age IP* Node* Nominated Node* Readiness Gates*"},
		{"", "events", "Last Seen Type Reason Object Subobject* Source* Message First Seen* Count* Name*"},
		{"apps", "deployments", "Name Ready Up-to-date Available Age Containers* Images* Selector*"},
		{"", "deployments", "Name Created At"}, // not in the core group
		{"coordination.k8s.io", "leases", "Name Created At"},
		{"example.com", "widgets", "Name Created At"},
	} {
		if got := columnList(For(tc.group, tc.resource).Columns()); got != tc.columns {
			t.Errorf("For(%q, %q) columns %q, want %q", tc.group, tc.resource, got, tc.columns)
		}
	}
}

func TestDefault(t *testing.T) {
	row, err := Default().Row([]byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"kube-scheduler","namespace":"kube-system","creationTimestamp":"2026-11-01T10:00:00Z"}}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonString(t, row.Cells), `["kube-scheduler","2026-11-01T10:00:00Z"]`; got != want {
		t.Errorf("cells %s, want %s", got, want)
	}
}

func TestForCRD(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	obj := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","creationTimestamp":"2026-11-01T10:30:00Z"},
		"spec":{"replicas":3,"big":12345678901234567890,"items":[{"id":1},{"id":2}]},"status":{"phase":"Ready"}}`)
	for _, tc := range []struct {
		name    string
		columns []PrinterColumn
		cells   string
		defs    string
	}{
		{"no columns: Age", nil, `["w1","90m"]`, "Name Age"},
		{"jsonpath", []PrinterColumn{
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Priority: 1},
			{Name: "Ids", Type: "string", JSONPath: ".spec.items[*].id"},
			{Name: "Big", Type: "string", JSONPath: ".spec.big"}, // beyond int64: a float64, as in kube-apiserver
			{Name: "Missing", Type: "string", JSONPath: ".status.nothing"},
			{Name: "Wrong", Type: "boolean", JSONPath: ".status.phase"},
		}, `["w1","Ready",3,"1","1.2345678901234567e+19",null,null]`, "Name Phase Replicas* Ids Big Missing Wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ForCRD(tc.columns)
			if err != nil {
				t.Fatal(err)
			}
			if got := columnList(p.Columns()); got != tc.defs {
				t.Errorf("columns %q, want %q", got, tc.defs)
			}
			row, err := p.Row(obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonString(t, row.Cells); got != tc.cells {
				t.Errorf("cells %s, want %s", got, tc.cells)
			}
		})
	}
	if _, err := ForCRD([]PrinterColumn{{Name: "Bad", Type: "string", JSONPath: ".spec[?(@.x=="}}); err == nil {
		t.Error("ForCRD accepted a JSONPath that does not parse")
	}
}

func TestRowRejectsBadJSON(t *testing.T) {
	if _, err := For("", "pods").Row([]byte(`{"metadata":`), time.Now()); err == nil {
		t.Error("Row accepted truncated JSON")
	}
}

// benchPods are the recorded Pods of testdata/pods.json.
func benchPods(b *testing.B) []json.RawMessage {
	b.Helper()
	var input struct {
		Items []json.RawMessage `json:"items"`
	}
	raw, err := os.ReadFile("testdata/pods.json")
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, &input); err != nil {
		b.Fatal(err)
	}
	return input.Items
}

func BenchmarkPodRow(b *testing.B) {
	items := benchPods(b)
	p, now := For("", "pods"), time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := p.Row(items[i%len(items)], now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodStatus is the Status cell alone, as the document builder computes it for every Pod
// it indexes: compare with BenchmarkPodRow.
func BenchmarkPodStatus(b *testing.B) {
	items := benchPods(b)
	p := For("", "pods")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, err := p.Status(items[i%len(items)]); err != nil {
			b.Fatal(err)
		}
	}
}

// columnList is the columns' names, wide ones marked with *.
func columnList(cols []metav1.TableColumnDefinition) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
		if c.Priority > 0 {
			names[i] += "*"
		}
	}
	return strings.Join(names, " ")
}

func readJSON(t testing.TB, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// jsonString is v as compact JSON, "<none>" left readable.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Printer.Status is what kube-apiserver printed in the Status column, object by object, for every
// built-in resource of the golden files; a resource without that column has none. The document
// builder indexes it for sort=status, so this is what the search page's STATUS sorts by.
func TestStatusIsTheAPIServersStatusCell(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	withStatus := 0
	for _, in := range inputs {
		var input struct {
			Group          string            `json:"group"`
			Resource       string            `json:"resource"`
			CustomResource bool              `json:"customResource"`
			Items          []json.RawMessage `json:"items"`
		}
		var golden struct {
			Columns []metav1.TableColumnDefinition `json:"columns"`
			Rows    []struct {
				Cells []any `json:"cells"`
			} `json:"rows"`
		}
		readJSON(t, in, &input)
		readJSON(t, strings.TrimSuffix(in, ".json")+".golden", &golden)
		if input.CustomResource {
			continue
		}
		col := slices.IndexFunc(golden.Columns, func(c metav1.TableColumnDefinition) bool { return c.Name == StatusColumn })
		p := For(input.Group, input.Resource)
		if col >= 0 {
			withStatus++
		}
		for i, obj := range input.Items {
			got, ok, err := p.Status(obj)
			if err != nil {
				t.Fatalf("%s item %d: %v", in, i, err)
			}
			switch {
			case col < 0 && ok:
				t.Errorf("%s item %d: status %q; kube-apiserver's table has no Status column", in, i, got)
			case col >= 0 && !ok:
				t.Errorf("%s item %d: no status; kube-apiserver printed %v", in, i, golden.Rows[i].Cells[col])
			case col >= 0 && got != golden.Rows[i].Cells[col]:
				t.Errorf("%s row %v: status %q, kube-apiserver printed %q", in, golden.Rows[i].Cells[0], got, golden.Rows[i].Cells[col])
			}
		}
	}
	// pods, nodes, namespaces, jobs, persistentvolumeclaims
	if withStatus < 5 {
		t.Errorf("%d golden resources with a Status column; the test covers too few", withStatus)
	}
}

// An object its printer cannot decode has no status, as it has no row.
func TestStatusRejectsWhatRowRejects(t *testing.T) {
	for _, tc := range []struct{ resource, obj string }{
		{"pods", `{"metadata":{"name":"a"},"status":{"phase":3}}`},
		{"pods", `{"metadata":{"name":"a","deletionTimestamp":"yesterday"}}`},
		{"namespaces", `{"metadata":`},
	} {
		p := For("", tc.resource)
		if _, err := p.Row([]byte(tc.obj), time.Now()); err == nil {
			t.Errorf("%s: Row accepted %s", tc.resource, tc.obj)
		}
		if s, ok, err := p.Status([]byte(tc.obj)); err == nil || ok {
			t.Errorf("%s: Status of %s = %q, ok %v, err %v", tc.resource, tc.obj, s, ok, err)
		}
	}
}
