package queryapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
)

// TestSearchPageIsPublicAndItsDataIsNot: a browser must load the page before it can present a
// token, so the page's assets answer without credentials, under any Host (they hold no data),
// with a Content-Security-Policy that runs no inline script; what the page then asks of the API
// needs credentials as before.
func TestSearchPageIsPublicAndItsDataIsNot(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("secret-token,alice,1001,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newGuardServer(t, auth.Options{TokenAuthFile: tokens})
	for _, tc := range []struct {
		path, host string
		want       int
		body       string
	}{
		{"/ui/", "127.0.0.1:8080", 200, "<title>kubesearch</title>"},
		{"/ui/", "kubesearch.example.com", 200, "<title>kubesearch</title>"},
		{"/ui/app.js", "127.0.0.1:8080", 200, "sessionStorage"},
		{"/ui/app.css", "127.0.0.1:8080", 200, "#fleet"},
		{"/ui/nothing.js", "127.0.0.1:8080", 404, ""},
		{"/ui/../openapi.json", "127.0.0.1:8080", 404, ""},
		{"/", "127.0.0.1:8080", 302, ""},
		{"/ui", "127.0.0.1:8080", 302, ""},
		{"/v1alpha1/search", "127.0.0.1:8080", 401, ""},
		{"/v1alpha1/fleet", "127.0.0.1:8080", 401, ""},
		{"/api/v1/pods", "127.0.0.1:8080", 401, ""},
	} {
		code, body := request(t, s, tc.path, tc.host)
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s (Host %s): %d %.80q, want %d with %q", tc.path, tc.host, code, body, tc.want, tc.body)
		}
	}
	w := recorded(t, s, "/ui/")
	csp := w.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q: want the page's own scripts only, and no framing", csp)
	}
	if w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", w.Header().Get("X-Content-Type-Options"))
	}
	if loc := recorded(t, s, "/").Header().Get("Location"); loc != "/ui/" {
		t.Errorf("/ redirects to %q, want /ui/", loc)
	}
	// With the token, the page's own requests are answered (same origin: Sec-Fetch-Site).
	if code, body := request(t, s, "/openapi.json", "127.0.0.1:8080", "Authorization", "Bearer secret-token", "Sec-Fetch-Site", "same-origin"); code != 200 {
		t.Errorf("the page's same-origin request with a token: %d %.200s", code, body)
	}
}

func recorded(t *testing.T, s *Server, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	s.engine.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
	return w
}

// TestSearchTableRows: with the Table media type the REST search adds each item's row as the
// facade prints its resource, and the columns per resource; without it, neither.
func TestSearchTableRows(t *testing.T) {
	st := &fakeStore{objects: []fakeObject{
		{cluster: "member1", resource: "pods", namespace: "shop", name: "web-1", rv: 10},
		{cluster: "member2", resource: "pods", namespace: "shop", name: "web-1", rv: 11},
	}}
	srv := newFacadeServer(t, st)
	const table = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
	code, _, body := fetch(t, http.MethodGet, srv.URL+"/v1alpha1/search?resources=pods", table)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var res SearchResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || len(res.Items) != 2 {
		t.Fatalf("%d rows for %d items: %s", len(res.Rows), len(res.Items), body)
	}
	cols := res.Columns["pods"]
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "Name,Ready,Status,Restarts,Age,IP,Node,Nominated Node,Readiness Gates" {
		t.Errorf("pod columns %v, want kube-apiserver's", names)
	}
	for i, r := range res.Rows {
		if r.Resource != "pods" || len(r.Cells) != len(cols) || r.Cells[0] != "web-1" || r.Cells[1] != "0/1" {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	// Each column's sort field, which the page's headers use: the kind's own columns by their keys.
	wantSorts := []string{"name", "columns.ready", "status", "columns.restarts", "creationTimestamp", "columns.ip", "columns.node",
		"columns.nominated-node", "columns.readiness-gates"}
	if !slices.Equal(res.ColumnSorts["pods"], wantSorts) {
		t.Errorf("columnSorts %q, want %q", res.ColumnSorts["pods"], wantSorts)
	}
	for _, f := range res.ColumnSorts["pods"] {
		v := url.Values{"resources": {"pods"}, "sort": {f}}
		if _, err := query.Parse(v, time.Now()); err != nil {
			t.Errorf("the page would sort by %v, which the REST search refuses: %v", v, err)
		}
	}
	code, _, body = fetch(t, http.MethodGet, srv.URL+"/v1alpha1/search?resources=pods", "application/json")
	if code != 200 || strings.Contains(string(body), `"rows"`) || strings.Contains(string(body), `"columns"`) {
		t.Errorf("without the Table media type: %d %.300s", code, body)
	}
}

// The search page's results table sorts a column by the REST search's sort field it names: every
// such field must be one the search accepts (a 400 otherwise, on every click), and the fixed
// columns that sort on the server are CLUSTER, NAMESPACE, KIND, NAME, STATUS and AGE (issue 28);
// the kind's own columns sort by the fields the answer's columnSorts names (TestSearchTableRows
// holds those against the parser), which the page reads.
func TestSearchPageSortsColumnsOnTheServer(t *testing.T) {
	js, err := os.ReadFile(filepath.Join("page", "assets", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	base := regexp.MustCompile(`(?s)const BASE = \[(.*?)\];`).FindSubmatch(js)
	if base == nil {
		t.Fatal("app.js: no BASE columns")
	}
	col := regexp.MustCompile(`\{ name: "([A-Z]+)"(?:, sort: "([A-Za-z]+)")?`)
	sorts := map[string]string{}
	for _, m := range col.FindAllSubmatch(base[1], -1) {
		sorts[string(m[1])] = string(m[2])
	}
	want := map[string]string{"CLUSTER": query.SortCluster, "NAMESPACE": query.SortNamespace, "KIND": query.SortKind,
		"NAME": query.SortName, "STATUS": query.SortStatus, "AGE": query.SortCreationTimestamp}
	if !maps.Equal(sorts, want) {
		t.Errorf("the results table's columns and their sorts %v, want %v", sorts, want)
	}
	for c, f := range sorts {
		if f != "" && !slices.Contains(query.SortFields, f) {
			t.Errorf("column %s sorts by %q, which the REST search refuses (known: %v)", c, f, query.SortFields)
		}
	}
	if !strings.Contains(string(js), "state.columnSorts[resource]") || !strings.Contains(string(js), `"columns."`) {
		t.Error("app.js does not sort the kind's own columns by the answer's columnSorts")
	}
}

// The OpenAPI document's sort parameter names every field the search sorts by, and the columns.
func TestOpenAPISortNamesEveryField(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, p := range op.Parameters {
				if p.Name != query.ParamSort {
					continue
				}
				found = true
				for _, f := range append(slices.Clone(query.SortFields), query.SortColumnPrefix+"<id>", query.ParamResources) {
					if !strings.Contains(p.Description, f) {
						t.Errorf("%s %s: the sort parameter's description does not name %s", method, path, f)
					}
				}
			}
		}
	}
	if !found {
		t.Error("no sort parameter in openapi.json")
	}
}
