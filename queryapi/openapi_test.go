package queryapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// openAPIDoc of a title: a small OpenAPI document told apart by its title.
func openAPIDocOf(title string) string {
	return `{"openapi":"3.0.0","info":{"title":"` + title + `","version":"v1.37.2"},"paths":{},"components":{"schemas":{}}}`
}

// openAPIRecord is the ledger message of a member's document, as a collector writes it.
func openAPIRecord(t *testing.T, cluster, path, hash, doc string) stream.Message {
	t.Helper()
	v, err := json.Marshal(registry.OpenAPIRecord{V: registry.LedgerVersion, Cluster: cluster, Path: path, Hash: hash,
		Document: json.RawMessage(doc)})
	if err != nil {
		t.Fatal(err)
	}
	return stream.Message{Key: []byte(registry.OpenAPIRecordKey(cluster, path)), Value: v}
}

// newOpenAPIServer is a facade over testCatalog plus member3 (pods only), with OpenAPI records
// applied as the ledger delivers them: api/v1 is "old" on member1 and "new" on member2 and member3;
// apps/v1 is member1's, example.com/v1beta1 member2's; batch/v1 is relayed but nothing of it cached.
func newOpenAPIServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	cat := testCatalog()
	cat.apply("selection/member3//Pod/", &registry.SelectionRecord{Cluster: "member3", Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true})
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second}, log: slog.New(slog.DiscardHandler), metrics: newMetrics(), catalog: cat, authn: anonymous(t)}
	for _, m := range []stream.Message{
		openAPIRecord(t, "member1", "api/v1", "OLD", openAPIDocOf("core old")),
		openAPIRecord(t, "member2", "api/v1", "NEW", openAPIDocOf("core new")),
		openAPIRecord(t, "member3", "api/v1", "NEW", openAPIDocOf("core new")),
		openAPIRecord(t, "member1", "apis/apps/v1", "APPS", openAPIDocOf("apps")),
		openAPIRecord(t, "member2", "apis/example.com/v1beta1", "WIDGETS", openAPIDocOf("widgets")),
		openAPIRecord(t, "member1", "apis/batch/v1", "BATCH", openAPIDocOf("batch")),
		{Key: []byte(registry.OpenAPIRecordKey("member2", "apis/gone/v1")), Value: []byte(`{"v":1,`)}, // damaged: skipped
	} {
		s.applyLedgerRecord(m)
	}
	s.engine = s.routes()
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	return s, srv
}

func TestFacadeOpenAPIIndex(t *testing.T) {
	_, srv := newOpenAPIServer(t)
	for _, tc := range []struct {
		prefix string
		want   map[string]string // path → serverRelativeURL
	}{
		{"", map[string]string{
			"api/v1":                   "/openapi/v3/api/v1?hash=NEW", // two members of three
			"apis/apps/v1":             "/openapi/v3/apis/apps/v1?hash=APPS",
			"apis/example.com/v1beta1": "/openapi/v3/apis/example.com/v1beta1?hash=WIDGETS",
		}},
		{"/qualified", map[string]string{
			"api/v1":                   "/qualified/openapi/v3/api/v1?hash=NEW",
			"apis/apps/v1":             "/qualified/openapi/v3/apis/apps/v1?hash=APPS",
			"apis/example.com/v1beta1": "/qualified/openapi/v3/apis/example.com/v1beta1?hash=WIDGETS",
		}},
		{"/clusters/member1", map[string]string{
			"api/v1":       "/clusters/member1/openapi/v3/api/v1?hash=OLD",
			"apis/apps/v1": "/clusters/member1/openapi/v3/apis/apps/v1?hash=APPS",
		}},
		{"/clusters/member3", map[string]string{"api/v1": "/clusters/member3/openapi/v3/api/v1?hash=NEW"}},
	} {
		t.Run("view "+tc.prefix, func(t *testing.T) {
			code, h, body := fetch(t, http.MethodGet, srv.URL+tc.prefix+"/openapi/v3", "application/json")
			if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
				t.Fatalf("GET %s/openapi/v3: %d %s\n%s", tc.prefix, code, h.Get("Content-Type"), body)
			}
			var index openAPIDiscovery
			if err := json.Unmarshal(body, &index); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for p, gv := range index.Paths {
				got[p] = gv.ServerRelativeURL
			}
			if !mapsEqual(got, tc.want) {
				t.Errorf("index:\n got %v\nwant %v", got, tc.want)
			}
			etag := h.Get("Etag")
			if etag == "" {
				t.Fatal("no Etag")
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+tc.prefix+"/openapi/v3", nil)
			req.Header.Set("If-None-Match", etag)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotModified {
				t.Errorf("GET with If-None-Match of the current index: %d, want 304", resp.StatusCode)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestFacadeOpenAPIDocument(t *testing.T) {
	_, srv := newOpenAPIServer(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		name, path, accept string
		code               int
		title              string // of the document served
		immutable          bool
		location           string
		status             string // in the message of a Status
	}{
		{name: "current hash", path: "/openapi/v3/api/v1?hash=NEW", code: 200, title: "core new", immutable: true},
		{name: "no hash", path: "/openapi/v3/api/v1", code: 200, title: "core new"},
		{name: "one member's own", path: "/clusters/member1/openapi/v3/api/v1?hash=OLD", code: 200, title: "core old", immutable: true},
		{name: "old hash", path: "/clusters/member2/openapi/v3/api/v1?hash=OLD", code: 301, location: "/clusters/member2/openapi/v3/api/v1?hash=NEW"},
		{name: "qualified", path: "/qualified/openapi/v3/apis/apps/v1?hash=APPS", code: 200, title: "apps", immutable: true},
		{name: "any type", path: "/openapi/v3/apis/apps/v1", accept: "*/*", code: 200, title: "apps"},
		{name: "protobuf only", path: "/openapi/v3/apis/apps/v1", accept: "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", code: 406},
		{name: "not in the view", path: "/clusters/member1/openapi/v3/apis/example.com/v1beta1", code: 404, status: "no OpenAPI document"},
		{name: "relayed, not cached", path: "/openapi/v3/apis/batch/v1", code: 404, status: "no OpenAPI document"},
		{name: "damaged record", path: "/clusters/member2/openapi/v3/apis/gone/v1", code: 404, status: "no OpenAPI document"},
		{name: "v2", path: "/clusters/member1/openapi/v2", code: 404, status: "at /clusters/member1/openapi/v3"},
		{name: "unknown cluster", path: "/clusters/member9/openapi/v3", code: 404, status: "member9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+tc.path, nil)
			if tc.accept == "" {
				tc.accept = "application/json"
			}
			req.Header.Set("Accept", tc.accept)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Info struct {
					Title string `json:"title"`
				} `json:"info"`
				Kind    string `json:"kind"`
				Message string `json:"message"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.code {
				t.Fatalf("GET %s: %d, want %d (%s)", tc.path, resp.StatusCode, tc.code, body.Message)
			}
			if immutable := resp.Header.Get("Cache-Control") == "public, immutable"; immutable != tc.immutable {
				t.Errorf("Cache-Control %q, immutable want %v", resp.Header.Get("Cache-Control"), tc.immutable)
			}
			switch {
			case tc.code == 200:
				if body.Info.Title != tc.title || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Etag") == "" {
					t.Errorf("document %q (%s, Etag %s), want %q", body.Info.Title, resp.Header.Get("Content-Type"), resp.Header.Get("Etag"), tc.title)
				}
			case tc.code == 301:
				if got := resp.Header.Get("Location"); got != tc.location {
					t.Errorf("Location %q, want %q", got, tc.location)
				}
			case tc.status != "":
				if body.Kind != "Status" || !strings.Contains(body.Message, tc.status) {
					t.Errorf("%s %q, want a Status saying %q", body.Kind, body.Message, tc.status)
				}
			}
		})
	}
}

// kubectl reads OpenAPI through client-go's openapi client, which strips the server URL's path from
// serverRelativeURLs: a one-cluster view's documents are found under its prefix, and an old cached
// URL follows the redirect.
func TestFacadeOpenAPIClientGo(t *testing.T) {
	_, srv := newOpenAPIServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL + "/clusters/member1"})
	if err != nil {
		t.Fatal(err)
	}
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for p := range paths {
		names = append(names, p)
	}
	slices.Sort(names)
	if want := []string{"api/v1", "apis/apps/v1"}; !slices.Equal(names, want) {
		t.Fatalf("paths %v, want %v", names, want)
	}
	doc, err := paths["api/v1"].Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `"core old"`) {
		t.Errorf("member1's api/v1: %s", doc)
	}
}

// The catalog holds a document once however many members serve it, and forgets it with its last
// member; a tombstone removes a member's document from the views.
func TestCatalogOpenAPIDedupe(t *testing.T) {
	s, srv := newOpenAPIServer(t)
	if n, refs := len(s.catalog.docs), s.catalog.docs["NEW"].refs; n != 5 || refs != 2 {
		t.Fatalf("%d documents held, NEW by %d members; want 5 and 2", n, refs)
	}
	for _, key := range []string{registry.OpenAPIRecordKey("member2", "api/v1"), registry.OpenAPIRecordKey("member2", "apis/example.com/v1beta1")} {
		s.applyLedgerRecord(stream.Message{Key: []byte(key)})
	}
	if _, ok := s.catalog.docs["WIDGETS"]; ok || s.catalog.docs["NEW"].refs != 1 {
		t.Errorf("after tombstones: WIDGETS held %v, NEW refs %d; want gone and 1", ok, s.catalog.docs["NEW"].refs)
	}
	// api/v1 is now OLD on member1 and NEW on member3: one each, the lowest-named member's wins.
	code, _, body := fetch(t, http.MethodGet, srv.URL+"/openapi/v3", "")
	if code != 200 || !strings.Contains(string(body), "api/v1?hash=OLD") || strings.Contains(string(body), "example.com") {
		t.Errorf("fleet index after tombstones: %d %s", code, body)
	}
	// A changed document replaces the member's old one.
	s.applyLedgerRecord(openAPIRecord(t, "member1", "api/v1", "NEWER", openAPIDocOf("core newer")))
	if _, ok := s.catalog.docs["OLD"]; ok {
		t.Error("OLD still held once no member serves it")
	}
}
