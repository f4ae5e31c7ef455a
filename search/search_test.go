package search

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/queryapi"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// The recorded answers are from TestKubectlSearch (KUBESEARCH_RECORD_SEARCH_TESTDATA=search/testdata):
// the namespace below is the one it made, and now is a moment after it recorded.
const recordedNamespace = "shop-598159309"

var now = time.Date(2026, 12, 2, 15, 10, 0, 0, time.UTC)

// recorded is one answer of the query API as TestKubectlSearch recorded it.
type recorded struct {
	Status      int             `json:"status"`
	ContentType string          `json:"contentType"`
	Body        json.RawMessage `json:"body"`
}

func readRecorded(t *testing.T, file string) recorded {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return r
}

// replay is a query API that answers discovery and searches with recorded answers, and keeps the
// searches' parameters.
type replay struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(q url.Values) (file string, header http.Header)
	mu     sync.Mutex
	asked  []url.Values
}

const token = "t0ken"

func newReplay(t *testing.T, answer func(url.Values) (string, http.Header)) *replay {
	t.Helper()
	r := &replay{t: t, answer: answer}
	// TLS: client-go, as kubectl, sends a bearer token only over TLS.
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replay) serve(w http.ResponseWriter, req *http.Request) {
	if req.Header.Get("Authorization") != "Bearer "+token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var file string
	switch req.URL.Path {
	case "/api":
		file = "discovery-api.json"
	case "/apis":
		file = "discovery-apis.json"
	case pathSearch:
		r.mu.Lock()
		r.asked = append(r.asked, req.URL.Query())
		r.mu.Unlock()
		var h http.Header
		file, h = r.answer(req.URL.Query())
		for k, vs := range h {
			w.Header()[k] = vs
		}
	default:
		http.NotFound(w, req)
		return
	}
	rec := readRecorded(r.t, file)
	w.Header().Set("Content-Type", rec.ContentType)
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}

func (r *replay) searches() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// kubeconfig writes a kubeconfig whose current context's server is the replay's URL plus path (a
// facade view), with a bearer token.
func (r *replay) kubeconfig(t *testing.T, path string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {token: %s}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, r.srv.URL+path, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})), token)
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func answerFile(file string) func(url.Values) (string, http.Header) {
	return func(url.Values) (string, http.Header) { return file, nil }
}

// options are a command line's defaults, as cmd/kubectl-search sets them.
func options(kubeconfig string, out, errOut *bytes.Buffer) Options {
	return Options{Kubeconfig: kubeconfig, ChunkSize: 500, Out: out, ErrOut: errOut, Now: func() time.Time { return now }}
}

func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		view string // the context server's path
		set  func(*Options)
		want url.Values
	}{
		{"short name and label selector", "", func(o *Options) { o.Resources = []string{"po"}; o.LabelSelector = "app=web" },
			url.Values{"resources": {"pods.core"}, "labelSelector": {"app=web"}, "limit": {"500"}}},
		{"kinds, plurals and a CRD, as one list or several", "", func(o *Options) { o.Resources = []string{"deploy,Pod", "widgets"} },
			url.Values{"resources": {"deployments.apps,pods.core,widgets.example.com"}, "limit": {"500"}}},
		{"no kind searches every kind", "", func(o *Options) { o.Text = "crashloop envoy" },
			url.Values{"q": {"crashloop envoy"}, "limit": {"500"}}},
		{"clusters, namespaces, field selector and image", "", func(o *Options) {
			o.Resources = []string{"deployments.apps"}
			o.Clusters = []string{"a", "b"}
			o.Namespaces = []string{"shop", "pay"}
			o.FieldSelector = "metadata.name!=x"
			o.Image = "nginx:1.27"
		}, url.Values{"resources": {"deployments.apps"}, "clusters": {"a,b"}, "namespaces": {"shop,pay"},
			"fieldSelector": {"metadata.name!=x,spec.template.spec.containers.image=nginx:1.27"}, "limit": {"500"}}},
		{"an image with a comma is escaped", "", func(o *Options) { o.Resources = []string{"pods"}; o.Image = "a,b" },
			url.Values{"resources": {"pods.core"}, "fieldSelector": {`spec.containers.image=a\,b`}, "limit": {"500"}}},
		{"count by", "", func(o *Options) { o.Resources = []string{"pods"}; o.CountBy = []string{"cluster", "kind", "label:app"} },
			url.Values{"resources": {"pods.core"}, "facets": {"cluster,resource,label:app"}, "facetSize": {"1000"}, "limit": {"1"}, "metadataOnly": {"true"}}},
		{"names need metadata only; --limit below a chunk", "", func(o *Options) { o.Output = OutputName; o.Limit = 3 },
			url.Values{"metadataOnly": {"true"}, "limit": {"3"}}},
		{"a one-cluster context searches its member", "/clusters/member2", nil,
			url.Values{"clusters": {"member2"}, "limit": {"500"}}},
		{"unless --clusters says otherwise", "/clusters/member2", func(o *Options) { o.Clusters = []string{"member1"} },
			url.Values{"clusters": {"member1"}, "limit": {"500"}}},
		{"the qualified context searches the fleet", "/qualified/", nil, url.Values{"limit": {"500"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplay(t, answerFile("pods.json"))
			var out, errOut bytes.Buffer
			o := options(r.kubeconfig(t, tc.view), &out, &errOut)
			if tc.set != nil {
				tc.set(&o)
			}
			if err := Run(t.Context(), o); err != nil {
				t.Fatal(err)
			}
			if got := r.searches(); len(got) != 1 || got[0].Encode() != tc.want.Encode() {
				t.Errorf("asked %v\nwant  %v", got, tc.want.Encode())
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"a kind the fleet does not cache", func(o *Options) { o.Resources = []string{"services"} },
			`resource "services": the fleet caches no such resource type`},
		{"image on kinds without containers", func(o *Options) { o.Resources = []string{"configmaps"}; o.Image = "x" },
			"--image: configmaps has no containers"},
		{"image on kinds keeping images at different paths", func(o *Options) { o.Resources = []string{"pods,deployments"}; o.Image = "x" },
			"--image: the kinds keep images at different paths (deployments.apps at spec.template.spec.containers.image; pods at spec.containers.image)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplay(t, answerFile("pods.json"))
			var out, errOut bytes.Buffer
			o := options(r.kubeconfig(t, ""), &out, &errOut)
			tc.set(&o)
			err := Run(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if len(r.searches()) != 0 {
				t.Error("searched anyway")
			}
		})
	}
}

// TestOutput holds what each format prints of the recorded answers against testdata/*.golden
// (go test ./search -run TestOutput -update rewrites them).
func TestOutput(t *testing.T) {
	for _, tc := range []struct {
		golden, answer string
		set            func(*Options)
	}{
		{"pods.golden", "pods.json", func(o *Options) { o.Resources = []string{"pods"}; o.Namespaces = []string{recordedNamespace} }},
		{"pods-wide.golden", "pods.json", func(o *Options) { o.Resources = []string{"pods"}; o.Output = OutputWide }},
		{"pods-no-headers.golden", "pods.json", func(o *Options) { o.Resources = []string{"pods"}; o.NoHeaders = true }},
		{"deployments.golden", "deployments.json", func(o *Options) { o.Resources = []string{"deploy"} }},
		{"mixed.golden", "mixed.json", func(o *Options) { o.Resources = []string{"deploy,cm,widgets"} }},
		{"mixed-name.golden", "mixed.json", func(o *Options) { o.Output = OutputName }},
		{"deployments-json.golden", "deployments.json", func(o *Options) { o.Output = OutputJSON }},
		{"deployments-yaml.golden", "deployments.json", func(o *Options) { o.Output = OutputYAML }},
		{"counts.golden", "counts.json", func(o *Options) { o.CountBy = []string{"cluster", "kind"} }},
		{"counts-json.golden", "counts.json", func(o *Options) { o.CountBy = []string{"cluster", "kind"}; o.Output = OutputJSON }},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r := newReplay(t, answerFile(tc.answer))
			var out, errOut bytes.Buffer
			o := options(r.kubeconfig(t, ""), &out, &errOut)
			tc.set(&o)
			if err := Run(t.Context(), o); err != nil {
				t.Fatal(err)
			}
			if errOut.Len() > 0 {
				t.Errorf("stderr: %s", errOut.String())
			}
			golden(t, tc.golden, out.Bytes())
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestNothingFound(t *testing.T) {
	var out, errOut bytes.Buffer
	o := options("", &out, &errOut)
	if err := (&run{opts: o}).print(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || errOut.String() != "No resources found\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	o.Output = OutputJSON
	if err := (&run{opts: o}).print(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if want := "{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    },\n    \"items\": []\n}\n"; out.String() != want {
		t.Errorf("-o json of nothing: %q", out.String())
	}
}

func TestServerErrors(t *testing.T) {
	r := newReplay(t, answerFile("bad-field-selector.json"))
	var out, errOut bytes.Buffer
	o := options(r.kubeconfig(t, ""), &out, &errOut)
	o.Resources = []string{"pods"}
	o.FieldSelector = "spec.nodNames=x"
	err := Run(t.Context(), o)
	if want := "Error from server (BadRequest): invalid parameters: fieldSelector: field label not supported: spec.nodNames"; err == nil || err.Error() != want || !IsServerError(err) {
		t.Errorf("error %v, want %q", err, want)
	}

	// What a proxy in front answers is no Status: quoted, with the code.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == pathSearch {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
			return
		}
		http.NotFound(w, req)
	}))
	defer proxy.Close()
	r.srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "+proxy.URL+"}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = options(kc, &out, &errOut)
	err = Run(t.Context(), o)
	if want := "Error from server (Bad Gateway): GET /v1alpha1/search: <html>bad gateway</html>"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestPaging reads pages through the continue token until --limit or the last page, and prints
// each of the server's warnings once.
func TestPaging(t *testing.T) {
	var pods searchResult
	if err := json.Unmarshal(readRecorded(t, "pods.json").Body, &pods); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 4 {
		t.Fatalf("pods.json holds %d pods; the test needs 4", len(pods.Items))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		from := 0
		if c := q.Get("continue"); c != "" {
			fmt.Sscanf(c, "at-%d", &from)
		}
		var size int
		fmt.Sscanf(q.Get("limit"), "%d", &size)
		page := searchResult{Total: int64(len(pods.Items)), Items: pods.Items[from:min(from+size, len(pods.Items))]}
		if from+size < len(pods.Items) {
			page.Metadata.Continue = fmt.Sprintf("at-%d", from+size)
		}
		w.Header().Add("Warning", `299 - "member3 is 40s behind"`)
		_ = json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "+srv.URL+"}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit, chunk int
		names        int
		stderr       string
	}{
		{0, 1, len(pods.Items), "Warning: member3 is 40s behind\n"},
		{0, 500, len(pods.Items), "Warning: member3 is 40s behind\n"},
		{3, 2, 3, fmt.Sprintf("Warning: member3 is 40s behind\nShowing 3 of %d matches (--limit 3); --limit 0 prints every match.\n", len(pods.Items))},
	} {
		var out, errOut bytes.Buffer
		o := options(kc, &out, &errOut)
		o.Output, o.Limit, o.ChunkSize = OutputName, tc.limit, tc.chunk
		if err := Run(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		if n := len(strings.Fields(out.String())); n != tc.names || errOut.String() != tc.stderr {
			t.Errorf("--limit %d --chunk-size %d: %d names, stderr %q; want %d, %q", tc.limit, tc.chunk, n, errOut.String(), tc.names, tc.stderr)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Options{ChunkSize: 500}
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"-n and -A", func(o *Options) { o.Namespaces = []string{"a"}; o.AllNamespaces = true }, "-n/--namespace and -A/--all-namespaces: give one or the other"},
		{"-A alone", func(o *Options) { o.AllNamespaces = true }, ""},
		{"empty kind", func(o *Options) { o.Resources = []string{"pods,"} }, `resource "pods,": empty name in the list`},
		{"empty cluster", func(o *Options) { o.Clusters = []string{"a", ""} }, `--clusters "a,": empty entry`},
		{"output", func(o *Options) { o.Output = "jsonpath" }, `-o/--output "jsonpath": unknown format; one of wide, json, yaml, name`},
		{"limit", func(o *Options) { o.Limit = -1 }, "--limit -1: 0 (every match) or more"},
		{"chunk size", func(o *Options) { o.ChunkSize = 1001 }, "--chunk-size 1001: between 1 and 1000"},
		{"count by", func(o *Options) { o.CountBy = []string{"node"} }, `--count-by "node": one of cluster, namespace, kind, resource, labels, label:<key>`},
		{"count by label without key", func(o *Options) { o.CountBy = []string{"label:"} }, `--count-by "label:"`},
		{"count by with -o name", func(o *Options) { o.CountBy = []string{"cluster"}; o.Output = OutputName }, "--count-by with -o name"},
		{"image without kinds", func(o *Options) { o.Image = "nginx" }, "--image: name the kinds to search"},
		{"every error at once", func(o *Options) { o.Limit = -1; o.Output = "x" }, "-o/--output \"x\": unknown format; one of wide, json, yaml, name\n--limit -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.set(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSplitView(t *testing.T) {
	for _, tc := range []struct{ host, base, cluster string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"https://ks.example.com/", "https://ks.example.com", ""},
		{"https://ks.example.com/qualified", "https://ks.example.com", ""},
		{"https://ks.example.com/clusters/member2", "https://ks.example.com", "member2"},
		{"https://ks.example.com/clusters/qualified", "https://ks.example.com", "qualified"},
		{"https://proxy.example.com/kubesearch/clusters/m1/", "https://proxy.example.com/kubesearch", "m1"},
	} {
		base, cluster, err := splitView(tc.host)
		if err != nil || base != tc.base || cluster != tc.cluster {
			t.Errorf("splitView(%q) = %q, %q, %v; want %q, %q", tc.host, base, cluster, err, tc.base, tc.cluster)
		}
	}
	if _, _, err := splitView("127.0.0.1:8080"); err == nil {
		t.Error("a server without a scheme is accepted")
	}
}

// The client writes the query API's names again rather than importing it (see doc.go): they must
// agree.
func TestWireNamesAgreeWithQueryAPI(t *testing.T) {
	for _, c := range []struct{ here, there string }{
		{pathSearch, queryapi.PathSearch},
		{qualifiedPrefix, queryapi.QualifiedPrefix},
		{clustersPrefix, queryapi.ClustersPrefix},
		{clusterAnnotation, document.CachedFromClusterAnnotation},
	} {
		if c.here != c.there {
			t.Errorf("%q here, %q in the query API", c.here, c.there)
		}
	}
}
