package osstore

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now anchors relative times in the golden files.
var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// TestCompileGolden records request → query model → DSL, one file per operator and combination.
// What the DSL means is proven on OpenSearch by the e2e tests; these catch unintended changes.
func TestCompileGolden(t *testing.T) {
	cases := map[string]string{
		"empty":                 "",
		"resources":             "resources=pods,deployments.apps,services.core",
		"clusters-namespaces":   "clusters=member1,member2&namespaces=shop",
		"names":                 "names=web,api",
		"name-prefix":           "namePrefix=web-",
		"fuzzy-name":            "fuzzyName=ng*nx",
		"label-equals":          "labelSelector=app.kubernetes.io/name%3Dweb",
		"label-double-equals":   "labelSelector=app%3D%3Dweb",
		"label-not-equals":      "labelSelector=tier!%3Dfrontend",
		"label-in":              "labelSelector=env+in+(prod,staging)",
		"label-notin":           "labelSelector=env+notin+(dev)",
		"label-exists":          "labelSelector=app.kubernetes.io/part-of",
		"label-not-exists":      "labelSelector=!app",
		"label-combination":     "labelSelector=app.kubernetes.io/name%3Dweb,env+in+(prod),!canary,tier!%3Dcache",
		"field-equals":          "fieldSelector=status.phase%3DRunning",
		"field-double-equals":   "fieldSelector=spec.containers.image%3D%3Dnginx:1.25",
		"field-not-equals":      "fieldSelector=status.phase!%3DRunning",
		"field-empty":           "fieldSelector=spec.nodeName%3D",
		"field-not-empty":       "fieldSelector=spec.nodeName!%3D",
		"field-annotation":      "fieldSelector=metadata.annotations.example.com/owner%3Dteam-a",
		"field-typed":           "fieldSelector=metadata.namespace%3D,metadata.name!%3Dweb",
		"text":                  "q=nginx+1.25",
		"owner-uid":             "owner=6a3c0d4e-1f2b-4c5d-8e9f-0a1b2c3d4e5f",
		"owner-kind-name":       "owner=ReplicaSet/web-7d9f8c6b5",
		"time-absolute":         "createdSince=2026-11-01T00:00:00Z&createdBefore=2026-11-02T00:00:00Z",
		"time-relative":         "changedSince=1h&createdSince=7d",
		"sort":                  "sort=creationTimestamp:desc,name",
		"sort-kind":             "sort=kind:desc,name",
		"sort-status":           "sort=status,creationTimestamp:desc",
		"sort-column":           "resources=pods&sort=columns.restarts:desc,columns.node",
		"limit":                 "limit=5",
		"facets":                "facets=cluster,namespace,resource,labels,label:app.kubernetes.io/name&facetSize=3",
		"metadata-only":         "metadataOnly=true",
		"where-does-app-run":    "resources=deployments.apps&labelSelector=app.kubernetes.io/name%3Dweb&facets=cluster",
		"not-running-namespace": "resources=pods&namespaces=shop&fieldSelector=status.phase!%3DRunning&sort=cluster",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := url.ParseQuery(raw)
			if err != nil {
				t.Fatal(err)
			}
			q, err := query.Parse(v, now)
			if err != nil {
				t.Fatalf("parse %q: %v", raw, err)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			got.WriteString("# request: ?" + raw + "\n# model:\n")
			if err := enc.Encode(q); err != nil {
				t.Fatal(err)
			}
			got.WriteString("# dsl:\n")
			if err := enc.Encode(Compile(q)); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, got.Bytes())
		})
	}
}

// compileSort sorts on the document field a sort field is named after: each must be one
// OpenSearch sorts on (a keyword, long or date, whose doc values the mapping leaves on), or
// OpenSearch refuses every search sorted by it.
func TestSortFieldsAreSortableFields(t *testing.T) {
	types := map[string]string{}
	for _, f := range document.Fields {
		types[f.Name] = f.Type
	}
	for _, f := range query.SortFields {
		switch typ := types[f]; typ {
		case "keyword", "long", "date":
		default:
			t.Errorf("sort %s: the document field %s is %q, not sortable", f, f, typ)
		}
	}
}

// TestCompileScopeGolden records the filter a subject's scope adds to every query: hand-made scopes,
// as authorization will set them (no request parameter sets one). What it means on OpenSearch is
// proven by TestScopeIsAppliedInsideTheQuery (e2e).
func TestCompileScopeGolden(t *testing.T) {
	cases := map[string]*query.Scope{
		"scope-nothing": {},
		"scope-one-grant": {Grants: []query.Grant{{Clusters: []string{"member1"}, Namespaces: []string{"shop", "web"},
			Resources: []query.Resource{{Resource: "pods"}, {Resource: "deployments", Group: "apps"}}}}},
		"scope-cluster-scoped": {Grants: []query.Grant{{Namespaces: []string{""}}, {Clusters: []string{"member2"}, Namespaces: []string{"", "shop"}}}},
	}
	for name, scope := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := query.Parse(url.Values{"labelSelector": {"app=web"}}, now)
			if err != nil {
				t.Fatal(err)
			}
			q.Scope = scope
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetIndent("", "  ")
			if err := enc.Encode(Compile(q)["query"]); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, got.Bytes())
		})
	}
}

// checkGolden compares got with testdata/<name>.golden, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed (go test -update after checking):\n%s", path, got)
	}
}

// TestCompileVersions: the newest resourceVersion per cluster is taken over the query's resources,
// clusters and scope only, not its selectors, so a LIST in one namespace with a label selector
// still learns how far the snapshot shows the whole (cluster, resource).
func TestCompileVersions(t *testing.T) {
	q := &query.Query{Resources: []query.Resource{{Resource: "pods"}}, Clusters: []string{"member1"},
		Namespaces: []string{"shop"}, Labels: []query.Requirement{{Key: "app", Op: query.Equals, Values: []string{"web"}}},
		Scope: &query.Scope{Grants: []query.Grant{{Clusters: []string{"member1"}}}}, Versions: true, Limit: 10}
	b, err := json.Marshal(Compile(q)["aggs"])
	if err != nil {
		t.Fatal(err)
	}
	filter := gjson.GetBytes(b, "versions.aggs.pair.filter").Raw
	for _, want := range []string{`"resource":"pods"`, `"cluster":"member1"`} {
		if !strings.Contains(filter, want) {
			t.Errorf("versions filter lacks %s: %s", want, filter)
		}
	}
	for _, not := range []string{"shop", "app=web"} {
		if strings.Contains(filter, not) {
			t.Errorf("versions filter holds the query's selector %q: %s", not, filter)
		}
	}
	if !gjson.GetBytes(b, "versions.global").Exists() || gjson.GetBytes(b, "versions.aggs.pair.aggs.cluster.aggs.rv.max.field").Str != "resourceVersion" {
		t.Errorf("versions aggregation = %s", b)
	}
}
