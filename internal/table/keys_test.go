package table

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A sort key is computed once, when the object is written, and kept until the object changes: a
// column whose cell moves with the clock must have a key of its own (kind.keys). Every golden
// object's row is printed at two instants a year apart; a keyed column whose cells differ and
// whose key is its cell's would sort by an age frozen at write time.
func TestSortKeysIgnoreTheTime(t *testing.T) {
	timed := map[string]bool{}
	for _, input := range builtinGoldens(t) {
		p := For(input.Group, input.Resource)
		cols := p.Columns()
		now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		for i, obj := range input.Items {
			a, err := p.Row(obj, now)
			if err != nil {
				t.Fatal(err)
			}
			b, err := p.Row(obj, now.AddDate(1, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			for c, def := range cols {
				if a.Cells[c] == b.Cells[c] || unkeyed(def.Name) {
					continue
				}
				timed[input.Resource+"/"+def.Name] = true
				if !slices.Contains(p.keyedApart, def.Name) {
					t.Errorf("%s item %d: column %s prints %v, then %v a year later, and its key is its cell", input.Resource, i, def.Name, a.Cells[c], b.Cells[c])
				}
			}
			k1, err := p.SortKeys(obj)
			if err != nil {
				t.Fatal(err)
			}
			k2, _ := p.SortKeys(obj)
			if !slices.Equal(k1, k2) {
				t.Errorf("%s item %d: keys %v, then %v", input.Resource, i, k1, k2)
			}
		}
	}
	// The golden objects must exercise the timed columns, or the test proves nothing.
	for _, want := range []string{"pods/Restarts", "events/Last Seen", "cronjobs/Last Schedule"} {
		if !timed[want] {
			t.Errorf("no golden %s cell moves with the clock: %v", want, timed)
		}
	}
}

// Every built-in kind's keyed columns, keys as they compare.
func TestSortKeysPerKind(t *testing.T) {
	tests := []struct {
		group, resource, obj string
		want                 map[string]string
	}{
		{"", "pods", `{"metadata":{"name":"a"},"spec":{"nodeName":"node-2","containers":[{"name":"a"},{"name":"b"}]},
			"status":{"phase":"Running","podIP":"10.0.0.9","containerStatuses":[
			{"name":"a","ready":true,"restartCount":3,"state":{"running":{}},"lastState":{"terminated":{"finishedAt":"2026-01-01T00:00:00Z"}}},{"name":"b","ready":false}]}}`,
			map[string]string{"ready": numKey(1, 2), "restarts": numKey(3), "ip": ipHex("10.0.0.9"), "node": "node-2"}},
		{"apps", "deployments", `{"metadata":{"name":"d"},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}},
			"selector":{"matchLabels":{"app":"web"}}},"status":{"readyReplicas":2,"updatedReplicas":3,"availableReplicas":2}}`,
			map[string]string{"ready": numKey(2, 3), "up-to-date": numKey(3), "available": numKey(2), "containers": "web", "images": "nginx:1.27", "selector": "app=web"}},
		{"apps", "statefulsets", `{"metadata":{"name":"s"},"spec":{"replicas":2},"status":{"readyReplicas":1}}`,
			map[string]string{"ready": numKey(1, 2)}},
		{"apps", "replicasets", `{"metadata":{"name":"r"},"spec":{"replicas":2},"status":{"replicas":2,"readyReplicas":1}}`,
			map[string]string{"desired": numKey(2), "current": numKey(2), "ready": numKey(1)}},
		{"apps", "daemonsets", `{"metadata":{"name":"ds"},"status":{"desiredNumberScheduled":3,"currentNumberScheduled":3,"numberReady":2,"updatedNumberScheduled":3,"numberAvailable":2}}`,
			map[string]string{"desired": numKey(3), "current": numKey(3), "ready": numKey(2), "up-to-date": numKey(3), "available": numKey(2)}},
		{"batch", "jobs", `{"metadata":{"name":"j"},"spec":{"completions":3},"status":{"succeeded":3,
			"startTime":"2026-01-01T00:00:00Z","completionTime":"2026-01-01T00:01:30Z"}}`,
			map[string]string{"completions": numKey(3, 3), "duration": numKey(90000)}},
		{"batch", "jobs", `{"metadata":{"name":"running"},"status":{"startTime":"2026-01-01T00:00:00Z"}}`,
			map[string]string{"completions": numKey(0, 1)}},
		{"batch", "cronjobs", `{"metadata":{"name":"c"},"spec":{"schedule":"*/5 * * * *","suspend":false},
			"status":{"active":[{"name":"x"}],"lastScheduleTime":"2026-01-01T00:00:00Z"}}`,
			map[string]string{"schedule": "*/5 * * * *", "suspend": "False", "active": numKey(1),
				"last-schedule": numKey(-time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())}},
		{"", "services", `{"metadata":{"name":"s"},"spec":{"type":"ClusterIP","clusterIP":"None","ports":[{"port":80,"protocol":"TCP"}]}}`,
			map[string]string{"type": "ClusterIP", "cluster-ip": "None", "ports": "80/TCP"}},
		{"", "configmaps", `{"metadata":{"name":"c"},"data":{"a":"1","b":"2"}}`, map[string]string{"data": numKey(2)}},
		{"", "secrets", `{"metadata":{"name":"s"},"type":"Opaque","data":{"password":"aHVudGVyMg=="}}`,
			map[string]string{"type": "Opaque", "data": numKey(1)}},
		{"", "nodes", `{"metadata":{"name":"n","labels":{"node-role.kubernetes.io/control-plane":""}},
			"status":{"nodeInfo":{"kubeletVersion":"v1.34.1"},"addresses":[{"type":"InternalIP","address":"172.18.0.2"}]}}`,
			map[string]string{"roles": "control-plane", "version": "v1.34.1", "internal-ip": ipHex("172.18.0.2")}},
		{"", "persistentvolumeclaims", `{"metadata":{"name":"p"},"spec":{"volumeName":"pv-1","storageClassName":"standard"},
			"status":{"phase":"Bound","capacity":{"storage":"10Gi"},"accessModes":["ReadWriteOnce"]}}`,
			map[string]string{"volume": "pv-1", "capacity": numKey(10 << 30), "access-modes": "RWO", "storageclass": "standard"}},
		{"", "events", `{"metadata":{"name":"e"},"type":"Warning","reason":"BackOff","count":4,"message":" back-off ",
			"involvedObject":{"kind":"Pod","name":"a"},"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-02T00:00:00Z"}`,
			map[string]string{"type": "Warning", "reason": "BackOff", "object": "pod/a", "message": "back-off", "count": numKey(4),
				"last-seen":  numKey(-time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixMilli()),
				"first-seen": numKey(-time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())}},
		{"", "serviceaccounts", `{"metadata":{"name":"default"}}`, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.resource, func(t *testing.T) {
			p, ok := Lookup(tc.group, tc.resource)
			if !ok {
				t.Fatalf("no printer for %s", tc.resource)
			}
			keys, err := p.SortKeys([]byte(tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, k := range keys {
				if _, dup := got[k.Column]; dup {
					t.Errorf("column %s keyed twice", k.Column)
				}
				if !slices.Contains(p.SortColumns(), k.Column) {
					t.Errorf("key of %s, not among the sort columns %v", k.Column, p.SortColumns())
				}
				got[k.Column] = k.Value
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s: key %q, want %q", id, got[id], want)
				}
			}
			for id, v := range got {
				if _, ok := tc.want[id]; !ok {
					t.Errorf("%s: key %q, want none", id, v)
				}
			}
		})
	}
}

// Keys compare as the cells should: numbers as numbers, addresses as addresses, READY by the
// ready count then the total, ages the most recent first; placeholders have none.
func TestSortKeysOrder(t *testing.T) {
	ordered := [][]string{
		{numKey(0, 3), numKey(1, 1), numKey(1, 3), numKey(2, 2), numKey(10, 10)},
		{numKey(-5), numKey(0), numKey(9), numKey(10), numKey(1 << 40)},
		{ipHex("9.0.0.1"), ipHex("10.0.0.9"), ipHex("10.0.0.10"), ipHex("fd00::1"), "None"},
	}
	for _, keys := range ordered {
		if !slices.IsSorted(keys) {
			t.Errorf("keys out of order: %q", keys)
		}
	}
	now := time.Now()
	older, _ := ageKey(now.Add(-time.Hour))
	newer, _ := ageKey(now.Add(-time.Minute))
	if newer >= older {
		t.Errorf("a minute ago %q does not sort before an hour ago %q", newer, older)
	}
	for _, s := range []string{"", "<none>", "<unset>", "<unknown>", "<pending>", "<invalid>"} {
		if k, ok := textKey(s); ok {
			t.Errorf("%q has key %q", s, k)
		}
	}
	long := strings.Repeat("é", MaxKeyBytes) // two bytes each
	if k, _ := textKey(long); len(k) != MaxKeyBytes || !strings.HasPrefix(long, k) {
		t.Errorf("a long cell's key is %d bytes, want %d of its start", len(k), MaxKeyBytes)
	}
	if k, _ := textKey("a" + long); len(k) != MaxKeyBytes-1 {
		t.Errorf("a key cut inside a character: %d bytes", len(k))
	}
}

func TestColumnID(t *testing.T) {
	for name, want := range map[string]string{
		"Ready": "ready", "Nominated Node": "nominated-node", "Port(s)": "ports", "Cluster-IP": "cluster-ip",
		"Up-to-date": "up-to-date", "StorageClass": "storageclass", "Last Seen": "last-seen",
	} {
		if got := ColumnID(name); got != want {
			t.Errorf("ColumnID(%q) = %q, want %q", name, got, want)
		}
	}
	// Within a kind, ids name one column each.
	for _, r := range [][2]string{{"", "pods"}, {"apps", "deployments"}, {"apps", "daemonsets"}, {"", "nodes"}, {"", "events"},
		{"", "services"}, {"batch", "jobs"}, {"batch", "cronjobs"}, {"", "persistentvolumeclaims"}, {"networking.k8s.io", "ingresses"}} {
		ids := For(r[0], r[1]).SortColumns()
		if len(ids) == 0 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
			t.Errorf("%s: sort columns %v", r[1], ids)
		}
	}
}

func ipHex(s string) string { k, _ := textKey(s); return k }

// BenchmarkPodSortKeys is the sort keys of a Pod, which the document builder computes for every
// Pod it indexes: a whole decode, as BenchmarkPodRow's, then the keyed cells.
func BenchmarkPodSortKeys(b *testing.B) {
	var input struct {
		Items []json.RawMessage `json:"items"`
	}
	readJSON(b, "testdata/pods.json", &input)
	p := For("", "pods")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := p.SortKeys(input.Items[i%len(input.Items)]); err != nil {
			b.Fatal(err)
		}
	}
}

// A Pod's keys are computed from the object narrowed to what its keyed columns read (decoding a
// whole Pod is most of the cost): they equal the whole object's, for every golden Pod. And Index's
// Status cell, from the same decode, is Status's, for every golden object.
func TestIndexOfNarrowedObjects(t *testing.T) {
	var input struct {
		Items []json.RawMessage `json:"items"`
	}
	readJSON(t, "testdata/pods.json", &input)
	p := For("", "pods")
	for i, obj := range input.Items {
		narrowed, err := p.SortKeys(obj)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := p.keys(obj, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(narrowed, whole.Keys) {
			t.Errorf("pod %d: keys %v narrowed, %v whole", i, narrowed, whole.Keys)
		}
	}
	if len(input.Items) < 10 {
		t.Errorf("%d golden Pods: too few", len(input.Items))
	}
	for _, input := range builtinGoldens(t) {
		p := For(input.Group, input.Resource)
		for i, obj := range input.Items {
			ix, err := p.Index(obj)
			if err != nil {
				t.Fatal(err)
			}
			s, ok, err := p.Status(obj)
			if err != nil || s != ix.Status || ok != ix.HasStatus {
				t.Errorf("%s item %d: Index's status %q (%v), Status's %q (%v, %v)", input.Resource, i, ix.Status, ix.HasStatus, s, ok, err)
			}
		}
	}
}

// Every printer's sort columns have distinct ids: two columns of one kind with one id ("Port(s)"
// and "Ports") would write the document's columns object with a key twice, which OpenSearch
// refuses (duplicate field) and the indexer dead-letters, whatever the object.
func TestSortColumnsDistinct(t *testing.T) {
	for _, r := range BuiltIn() {
		group, resource, _ := strings.Cut(r, "/")
		p, _ := Lookup(group, resource)
		ids := p.SortColumns()
		for i, id := range ids {
			if id == "" || slices.Contains(ids[:i], id) {
				t.Errorf("%s: column id %q empty or given twice in %v", r, id, ids)
			}
		}
	}
}

// goldenInput is a testdata file: the objects of one resource.
type goldenInput struct {
	Group          string            `json:"group"`
	Resource       string            `json:"resource"`
	CustomResource bool              `json:"customResource"`
	Items          []json.RawMessage `json:"items"`
}

// builtinGoldens are the testdata files of built-in resources (a custom resource's printer is its
// CRD's, which keys nothing).
func builtinGoldens(t *testing.T) []goldenInput {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenInput
	for _, f := range files {
		var input goldenInput
		readJSON(t, f, &input)
		if !input.CustomResource {
			out = append(out, input)
		}
	}
	return out
}
