package queryapi

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// tenantPolicy lets alice see pods and widgets of member1's namespace shop, and lets prometheus
// read /metrics and nothing else.
const tenantPolicy = `rules:
- subjects: [{kind: User, name: alice}]
  clusters: [member1]
  namespaces: [shop]
  resources: [pods, widgets.example.com]
  verbs: [get, list, watch]
- subjects: [{kind: Group, name: system:masters}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verbs: ["*"]
- subjects: [{kind: User, name: prometheus}]
  nonResourceURLs: [/metrics]
  verbs: [get]
`

// tenantWorld is a fleet as the query API knows it: with or without a member2 that alice cannot
// see, which has pods, a newer version of the widgets CRD, its own OpenAPI, watermarks, and
// events the index has not caught up with.
func tenantWorld(t *testing.T, withMember2 bool, policy string, with ...func(*Server)) (url, dir string) {
	t.Helper()
	dir = t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, "alice-token,alice,u1\nprometheus-token,prometheus,u2\nadmin-token,admin,u3,system:masters\n")
	policyFile := filepath.Join(dir, "policy.yaml")
	writeFile(t, policyFile, policy)

	clusters := []string{"member1"}
	if withMember2 {
		clusters = append(clusters, "member2")
	}
	cat := newCatalog()
	wms := []store.Watermark{}
	st := &fakeStore{}
	for i, cl := range clusters {
		cat.apply("selection/"+cl+"//Pod/", &registry.SelectionRecord{Cluster: cl, Version: "v1", Resource: "pods", Kind: "Pod",
			Namespaced: true, Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"}})
		// member2 serves widgets in a version member1 does not, with a short name of its own.
		version, short := "v1", "wd"
		if cl == "member2" {
			version, short = "v2", "secretwidget"
		}
		cat.apply("selection/"+cl+"/example.com/Widget/", &registry.SelectionRecord{Cluster: cl, Group: "example.com",
			Version: version, Resource: "widgets", Kind: "Widget", Namespaced: true, Singular: "widget", ShortNames: []string{short}})
		doc := fmt.Sprintf(`{"openapi":"3.0.0","info":{"title":"%s"}}`, cl)
		cat.applyOpenAPI(cl, registry.OpenAPIPath("example.com", version), cl+"-hash", []byte(doc))
		cat.applyOpenAPI(cl, registry.OpenAPIPath("", "v1"), "core-"+cl, []byte(`{"openapi":"3.0.0","info":{"title":"core `+cl+`"}}`))
		wms = append(wms, store.Watermark{Cluster: cl, Resource: "pods", Kind: "Pod", ResourceVersion: int64(500 + 200*i)})
		for j := range 3 {
			st.objects = append(st.objects, fakeObject{cluster: cl, resource: "pods", namespace: "shop", name: fmt.Sprintf("web-%d", j), rv: int64(100 + j)})
		}
	}
	cat.markSynced()
	f := &fleet{readWatermarks: func(context.Context) ([]store.Watermark, error) { return wms, nil },
		interval: time.Second, staleAfter: time.Minute, log: slog.New(slog.DiscardHandler), now: time.Now}
	f.poll(t.Context())
	authn, err := auth.New(auth.Options{TokenAuthFile: tokens, ReloadInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	authorizer, err := authz.New(authz.Options{PolicyFile: policyFile, ReloadInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second, ResourceVersionWait: 300 * time.Millisecond, SessionRecheckInterval: 50 * time.Millisecond},
		log: slog.New(slog.DiscardHandler), store: st, fleet: f, metrics: newMetrics(), catalog: cat, authn: authn, authz: authorizer}
	c := watchcache.New(watchcache.Options{Log: s.log, MaxEvents: 1000, MaxBytes: 1 << 20})
	c.CaughtUp()
	s.cache = c
	cacheOf(s).SetHeadForTest(store.Pair{Cluster: "member1", Resource: "pods"}, 500)
	if withMember2 {
		// The stream holds member2 events the index has not caught up with: a consistent read of
		// a subject that covers member2 waits for them.
		cacheOf(s).SetHeadForTest(store.Pair{Cluster: "member2", Resource: "pods"}, 900)
	}
	for _, f := range with {
		f(s)
	}
	s.engine = s.routes()
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	return srv.URL, dir
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ask sends a GET with a bearer token and answers the status, the headers that carry meaning and
// the body.
func ask(t *testing.T, url, token, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		body.WriteString(sc.Text() + "\n")
	}
	// A wait is part of the answer: a consistent read that waited on a hidden member says so by
	// its time even without a Warning.
	waited := time.Since(start) > 250*time.Millisecond && !strings.Contains(url, "watch=")
	return resp.StatusCode, fmt.Sprintf("Warning=%q ETag=%q waited=%v", resp.Header.Values("Warning"), resp.Header.Get("Etag"), waited), body.String()
}

// TestRestrictedAnswersIgnoreHiddenClusters: every answer alice gets — bodies, warnings, the
// resourceVersion of a list, a watch's bookmark, discovery, OpenAPI, a wait — is the same whether
// or not member2, which she cannot see, exists, lags and serves its own CRD version.
func TestRestrictedAnswersIgnoreHiddenClusters(t *testing.T) {
	without, _ := tenantWorld(t, false, tenantPolicy)
	with, _ := tenantWorld(t, true, tenantPolicy)
	aggregated := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	for _, c := range []struct{ path, accept string }{
		{"/api/v1/namespaces/shop/pods", ""}, // a consistent LIST: vector, wait, warnings
		{"/api/v1/pods", ""},                 // across namespaces
		{"/api/v1/pods?limit=1", ""},         // one page
		{"/api/v1/pods?resourceVersion=0", "application/json;as=Table;v=v1;g=meta.k8s.io"},
		{"/api/v1/namespaces/shop/pods/web-1", ""},                   // GET
		{"/qualified/api/v1/namespaces/shop/pods", ""},               // the qualified view's vector
		{"/qualified/api/v1/namespaces/shop/pods/web-1_member2", ""}, // a GET naming the hidden member
		{"/qualified/api/v1/namespaces/shop/pods/web-1_member1", ""},
		{"/apis", aggregated},                             // versions and short names
		{"/apis/example.com", ""},                         // the group's versions
		{"/apis/example.com/v2/widgets", ""},              // the hidden member's version
		{"/openapi/v3", ""},                               // the index
		{"/openapi/v3/apis/example.com/v2", ""},           // the hidden member's document
		{"/v1alpha1/search?clusters=member1,member2", ""}, // a named hidden cluster
		{"/v1alpha1/fleet", ""},
		{"/v1alpha1/clusters", ""},
		{"/clusters/member2/api/v1/pods", ""},
		{"/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", ""},
		{"/metrics", ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			code1, head1, body1 := ask(t, without+c.path, "alice-token", c.accept)
			code2, head2, body2 := ask(t, with+c.path, "alice-token", c.accept)
			body1, body2 = dropAge(body1), dropAge(body2)
			if code1 != code2 || head1 != head2 || body1 != body2 {
				t.Errorf("alice's answer depends on member2:\nwithout: %d %s\n%s\nwith:    %d %s\n%s", code1, head1, body1, code2, head2, body2)
			}
		})
	}
	// The control: the admin, whom nothing restricts, does see member2 in the same answers, so
	// the comparison above would catch a leak.
	_, head, body := ask(t, with+"/api/v1/pods", "admin-token", "")
	rv := gjson.Get(body, "metadata.resourceVersion").Str
	if v, err := parseRV(rv, view{}); err != nil || v["member2"] == 0 || !strings.Contains(head, "member2 at 700 of 900") {
		t.Errorf("admin's fleet list: resourceVersion %s (%v), %s", rv, v, head)
	}
}

// tableCells blanks a Table's cells, whose AGE moves with the clock; the rows' objects stay.
var tableCells = regexp.MustCompile(`"cells":\[[^\]]*\]`)

func dropAge(body string) string { return tableCells.ReplaceAllString(body, `"cells":[]`) }

// TestMetricsNeedsItsOwnGrant: /metrics names every member; a subject the policy restricts needs
// a nonResourceURLs rule for it.
func TestMetricsNeedsItsOwnGrant(t *testing.T) {
	url, _ := tenantWorld(t, true, tenantPolicy)
	if code, _, body := ask(t, url+"/metrics", "alice-token", ""); code != http.StatusForbidden || !strings.Contains(body, `cannot get path \"/metrics\"`) {
		t.Errorf("alice's /metrics: %d %s", code, body)
	}
	if code, _, body := ask(t, url+"/metrics", "prometheus-token", ""); code != http.StatusOK || !strings.Contains(body, "kubesearch_queryapi") {
		t.Errorf("prometheus's /metrics: %d %.200s", code, body)
	}
	// A subject that may get everything reads them too.
	if code, _, _ := ask(t, url+"/metrics", "admin-token", ""); code != http.StatusOK {
		t.Errorf("admin's /metrics: %d", code)
	}
	// The URL rule grants nothing else.
	if code, _, _ := ask(t, url+"/api/v1/pods", "prometheus-token", ""); code != http.StatusForbidden {
		t.Errorf("prometheus's pods: %d, want 403", code)
	}
}

// TestProfilingIsForWhoMayGetIt: /debug/pprof/ exists only with --profiling, and answers only
// subjects who may get its path (a profile's stacks are the process's, every member's work).
func TestProfilingIsForWhoMayGetIt(t *testing.T) {
	off, _ := tenantWorld(t, true, tenantPolicy)
	if code, _, _ := ask(t, off+"/debug/pprof/heap", "admin-token", ""); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/heap without --profiling: %d, want 404", code)
	}
	on, _ := tenantWorld(t, true, tenantPolicy, func(s *Server) { s.opts.Profiling = true })
	if code, _, body := ask(t, on+"/debug/pprof/heap", "alice-token", ""); code != http.StatusForbidden || !strings.Contains(body, `cannot get path \"/debug/pprof/heap\"`) {
		t.Errorf("alice's /debug/pprof/heap: %d %.200s, want 403", code, body)
	}
	if code, _, body := ask(t, on+"/debug/pprof/", "admin-token", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("the admin's /debug/pprof/: %d %.200s", code, body)
	}
	if code, _, body := ask(t, on+"/debug/pprof/profile?seconds=1", "admin-token", ""); code != http.StatusOK || len(body) == 0 {
		t.Errorf("the admin's CPU profile: %d, %d bytes", code, len(body))
	}
}

// TestRevokedSubjectLosesItsWatch: an open watch ends with 401 once the subject's token is
// removed, and with 410 once the policy narrows what it may see, so its client lists again.
func TestRevokedSubjectLosesItsWatch(t *testing.T) {
	watchPath := "/api/v1/namespaces/shop/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=30"
	for _, c := range []struct {
		name, file, content, want string
		failingSource             bool
	}{
		{"token removed", "tokens.csv", "prometheus-token,prometheus,u2\n", `"code":401`, false},
		// Its source failed authentication too often: new requests get only known credentials
		// judged, and the watch's recheck must still judge its own.
		{"token removed, source failing", "tokens.csv", "prometheus-token,prometheus,u2\n", `"code":401`, true},
		{"policy narrowed", "policy.yaml", strings.Replace(tenantPolicy, "resources: [pods, widgets.example.com]", "resources: [pods]", 1), `"code":410`, false},
		{"policy rule removed", "policy.yaml", "rules: []\n", `"code":403`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, dir := tenantWorld(t, true, tenantPolicy, func(s *Server) {
				s.limits = newLimiter(Options{SourceAuthFailureLimit: 0.001, SourceAuthFailureBurst: 1}, prometheus.NewRegistry())
			})
			if c.failingSource {
				for range 3 {
					ask(t, url+"/api", "guess", "")
				}
				if code, _, _ := ask(t, url+"/api", "guess", ""); code != http.StatusTooManyRequests {
					t.Fatalf("a guess past the failure burst: %d, want 429", code)
				}
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+watchPath, nil)
			req.Header.Set("Authorization", "Bearer alice-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("watch: %v %v", resp, err)
			}
			defer resp.Body.Close()
			writeFile(t, filepath.Join(dir, c.file), c.content)
			// Without the recheck, the watch would stream until its 30 s: the test's deadline
			// is what fails it then.
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			deadline := time.After(10 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("watch ended without an ERROR event %s", c.want)
					}
					if strings.Contains(l, `"type":"ERROR"`) {
						if !strings.Contains(l, c.want) {
							t.Fatalf("ERROR event %s, want %s", l, c.want)
						}
						return
					}
				case <-deadline:
					resp.Body.Close()
					t.Fatalf("the watch is still open 10 s after %s", c.name)
				}
			}
		})
	}
}

// recordingStore answers nothing and keeps the queries it was asked.
type recordingStore struct{ queries []*query.Query }

func (r *recordingStore) Search(_ context.Context, q *query.Query) (*store.Result, error) {
	r.queries = append(r.queries, q)
	return &store.Result{}, nil
}
func (r *recordingStore) Release(context.Context, string) {}
func (r *recordingStore) Counts(context.Context, *query.Scope) ([]store.Count, error) {
	return nil, nil
}

// TestPrinterColumnsFromTheViewsClusters: a custom resource's columns come from a CRD of the
// clusters the request covers and the subject sees, serving the version asked, never from another
// member; none covered, none read.
func TestPrinterColumnsFromTheViewsClusters(t *testing.T) {
	rec := &recordingStore{}
	s := &Server{store: rec}
	res := apiResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	if _, err := s.printerFor(t.Context(), res, []string{"member2"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.queries) != 1 {
		t.Fatalf("%d searches, want 1", len(rec.queries))
	}
	q := rec.queries[0]
	if fmt.Sprint(q.Clusters) != "[member2]" || len(q.Fields) != 1 || q.Fields[0].Key != "spec.versions.name" || fmt.Sprint(q.Fields[0].Values) != "[v2]" {
		t.Errorf("CRD query: clusters %v, fields %+v", q.Clusters, q.Fields)
	}
	rec.queries = nil
	if _, err := s.printerFor(t.Context(), res, nil); err != nil || len(rec.queries) != 0 {
		t.Errorf("no cluster covered: %v, %d searches", err, len(rec.queries))
	}
}
