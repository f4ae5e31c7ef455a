package queryapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/store"

	"github.com/kubesearch/kubesearch/internal/testpki"
)

// controlPlane plays a Karmada control plane storing ResourceRegistry objects: it records every
// request it gets and answers with answer.
type controlPlane struct {
	*httptest.Server
	mu     sync.Mutex
	got    []cpRequest
	answer http.HandlerFunc
}

type cpRequest struct {
	method, path, query string
	header              http.Header
	body                string
}

func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := &controlPlane{}
	// TLS: client-go sends no credentials to a server over plain HTTP.
	cp.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cp.mu.Lock()
		cp.got = append(cp.got, cpRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		answer := cp.answer
		cp.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(cp.Close)
	return cp
}

// requests answers the requests cpRequest since the last call.
func (cp *controlPlane) requests() []cpRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	got := cp.got
	cp.got = nil
	return got
}

func (cp *controlPlane) answerWith(code int, contentType, body string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.answer = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// registriesWorld is a query API serving ResourceRegistry objects of cp over HTTPS, trusting a
// front proxy's certificate; proxied is a client that presents it, naming user "karmada-admin".
type registriesWorld struct {
	url     string
	proxied *http.Client
	other   *http.Client // presents no certificate: authenticates by bearer token or not at all
	server  *Server
}

func newRegistriesWorld(t *testing.T, cp *controlPlane) *registriesWorld {
	t.Helper()
	dir := t.TempDir()
	proxyCA := testpki.NewCA(t, "front-proxy-ca")
	caFile, tokens, kubeconfig := filepath.Join(dir, "front-proxy-ca.crt"), filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "karmada.kubeconfig")
	writeFile(t, caFile, string(proxyCA.PEM))
	writeFile(t, tokens, "alice-token,alice,u1\n")
	writeFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: karmada, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: kubesearch, user: {token: query-api-token}}]
contexts: [{name: karmada, context: {cluster: karmada, user: kubesearch}}]
current-context: karmada
`, cp.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.Certificate().Raw}))))
	o := auth.Options{TokenAuthFile: tokens, Anonymous: true, RequestHeader: auth.RequestHeaderOptions{ClientCAFile: caFile, AllowedNames: []string{"front-proxy-client"}}}
	authn, err := auth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := o.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	regs, err := newRegistryProxy(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(regs.close)
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second}, log: slog.New(slog.DiscardHandler), store: &fakeStore{},
		metrics: newMetrics(), catalog: testCatalog(), authn: authn, registries: regs,
		limits: newLimiter(Options{MaxWatches: 1}, nil)}
	s.engine = s.routes()
	srv := httptest.NewUnstartedServer(s.engine)
	srv.TLS = tlsConfig
	srv.StartTLS()
	t.Cleanup(srv.Close)

	proxyCert := proxyCA.Issue(t, pkix.Name{CommonName: "front-proxy-client"}, x509.ExtKeyUsageClientAuth)
	proxied := srv.Client().Transport.(*http.Transport).Clone()
	proxied.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &proxyCert, nil }
	other := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(proxied.CloseIdleConnections)
	t.Cleanup(other.CloseIdleConnections)
	return &registriesWorld{url: srv.URL, proxied: &http.Client{Transport: proxied}, other: &http.Client{Transport: other}, server: s}
}

// do sends a request; headers are given as "Name: value" pairs.
func (w *registriesWorld) do(t *testing.T, client *http.Client, method, path, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if client == w.proxied {
		req.Header.Set("X-Remote-User", "karmada-admin")
		req.Header.Add("X-Remote-Group", "system:masters")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

const storedRegistry = `{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistry","metadata":{"name":"fleet","generation":9007199254740993,` +
	`"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"karmada.kubesearch.io/v1alpha1"}]},"spec":{"resourceSelectors":[{"apiVersion":"v1","kind":"Pod"}]}}`

// TestKarmadaRegistriesForwarded: each verb reaches the control plane at the stored group's path
// with the query API's credentials and none of the client's, its body's apiVersion rewritten to
// the stored group, and its answer comes back in Karmada's group: objects, lists, managedFields,
// Status errors, Tables' row objects.
func TestKarmadaRegistriesForwarded(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	const base = "/apis/search.karmada.io/v1alpha1/resourceregistries"
	const stored = "/apis/karmada.kubesearch.io/v1alpha1/resourceregistries"
	yamlBody := "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata:\n  name: fleet\nspec:\n  resourceSelectors:\n  - apiVersion: v1\n    kind: Pod\n"
	for _, c := range []struct {
		name, method, path, body, contentType string
		answerCode                            int
		answer                                string
		wantPath, wantBodyAPIVersion          string
		wantContentType                       string
		check                                 func(t *testing.T, body []byte)
	}{
		{name: "create from YAML", method: "POST", path: base + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict", body: yamlBody, contentType: "application/yaml",
			answerCode: 201, answer: storedRegistry, wantPath: stored, wantBodyAPIVersion: "karmada.kubesearch.io/v1alpha1", wantContentType: "application/json",
			check: func(t *testing.T, body []byte) {
				if gjson.GetBytes(body, "apiVersion").Str != "search.karmada.io/v1alpha1" || gjson.GetBytes(body, "metadata.managedFields.0.apiVersion").Str != "search.karmada.io/v1alpha1" {
					t.Errorf("answer not in Karmada's group: %s", body)
				}
				if gjson.GetBytes(body, "metadata.generation").Raw != "9007199254740993" {
					t.Errorf("a large integer changed: %s", body)
				}
			}},
		{name: "update", method: "PUT", path: base + "/fleet", body: `{"apiVersion":"search.karmada.io/v1alpha1","kind":"ResourceRegistry","metadata":{"name":"fleet","managedFields":[{"manager":"m","apiVersion":"search.karmada.io/v1alpha1"}]}}`,
			contentType: "application/json", answerCode: 200, answer: storedRegistry, wantPath: stored + "/fleet", wantBodyAPIVersion: "karmada.kubesearch.io/v1alpha1", wantContentType: "application/json"},
		{name: "server-side apply of the status, in YAML", method: "PATCH", path: base + "/fleet/status?fieldManager=me&force=true", body: yamlBody, contentType: "application/apply-patch+yaml",
			answerCode: 200, answer: storedRegistry, wantPath: stored + "/fleet/status", wantBodyAPIVersion: "karmada.kubesearch.io/v1alpha1", wantContentType: "application/apply-patch+yaml"},
		{name: "merge patch", method: "PATCH", path: base + "/fleet", body: `{"metadata":{"labels":{"a":"b"}}}`, contentType: "application/merge-patch+json",
			answerCode: 200, answer: storedRegistry, wantPath: stored + "/fleet", wantContentType: "application/merge-patch+json"},
		{name: "list", method: "GET", path: base + "?limit=10&labelSelector=a%3Db", answerCode: 200,
			answer:   `{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistryList","metadata":{"resourceVersion":"7"},"items":[` + storedRegistry + `]}`,
			wantPath: stored,
			check: func(t *testing.T, body []byte) {
				if gjson.GetBytes(body, "apiVersion").Str != "search.karmada.io/v1alpha1" || gjson.GetBytes(body, "items.0.apiVersion").Str != "search.karmada.io/v1alpha1" {
					t.Errorf("list not in Karmada's group: %s", body)
				}
			}},
		{name: "a Table passes, its rows' objects rewritten", method: "GET", path: base, answerCode: 200,
			answer:   `{"apiVersion":"meta.k8s.io/v1","kind":"Table","columnDefinitions":[{"name":"Name","type":"string"}],"rows":[{"cells":["fleet"],"object":` + storedRegistry + `}]}`,
			wantPath: stored,
			check: func(t *testing.T, body []byte) {
				if gjson.GetBytes(body, "apiVersion").Str != "meta.k8s.io/v1" || gjson.GetBytes(body, "rows.0.object.apiVersion").Str != "search.karmada.io/v1alpha1" {
					t.Errorf("table: %s", body)
				}
			}},
		{name: "the control plane's 404 Status names Karmada's group", method: "GET", path: base + "/gone", answerCode: 404,
			answer:   `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"resourceregistries.karmada.kubesearch.io \"gone\" not found","reason":"NotFound","details":{"name":"gone","group":"karmada.kubesearch.io","kind":"resourceregistries"},"code":404}`,
			wantPath: stored + "/gone",
			check: func(t *testing.T, body []byte) {
				if gjson.GetBytes(body, "details.group").Str != "search.karmada.io" || gjson.GetBytes(body, "message").Str != `resourceregistries.search.karmada.io "gone" not found` {
					t.Errorf("status: %s", body)
				}
			}},
		{name: "deletecollection", method: "DELETE", path: base + "?labelSelector=a%3Db", body: `{"apiVersion":"v1","kind":"DeleteOptions","propagationPolicy":"Background"}`, contentType: "application/json",
			answerCode: 200, answer: `{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistryList","items":[]}`, wantPath: stored, wantBodyAPIVersion: "v1", wantContentType: "application/json"},
		{name: "delete", method: "DELETE", path: base + "/fleet", answerCode: 200, answer: storedRegistry, wantPath: stored + "/fleet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp.answerWith(c.answerCode, "application/json", c.answer)
			headers := []string{"Accept: application/json;as=Table;g=meta.k8s.io;v=v1, application/json",
				"Authorization: Bearer alice-token", "Impersonate-User: root", "Impersonate-Group: system:masters", "X-Remote-Extra-Scopes: all"}
			if c.contentType != "" {
				headers = append(headers, "Content-Type: "+c.contentType)
			}
			code, head, body := w.do(t, w.proxied, c.method, c.path, c.body, headers...)
			if code != c.answerCode || head.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q %s, want %d", code, head.Get("Content-Type"), body, c.answerCode)
			}
			got := cp.requests()
			if len(got) != 1 {
				t.Fatalf("the control plane got %d requests, want 1", len(got))
			}
			r := got[0]
			_, wantQuery, _ := strings.Cut(c.path, "?")
			if r.method != c.method || r.path != c.wantPath || r.query != wantQuery {
				t.Errorf("forwarded %s %s?%s, want %s %s?%s", r.method, r.path, r.query, c.method, c.wantPath, wantQuery)
			}
			if a := r.header.Get("Authorization"); a != "Bearer query-api-token" {
				t.Errorf("forwarded Authorization %q, want the query API's own", a)
			}
			for k := range r.header {
				if strings.HasPrefix(k, "Impersonate-") || strings.HasPrefix(k, "X-Remote-") {
					t.Errorf("forwarded the client's %s", k)
				}
			}
			if a := r.header.Get("Accept"); a != "application/json;as=Table;g=meta.k8s.io;v=v1, application/json" {
				t.Errorf("forwarded Accept %q", a)
			}
			if ct := r.header.Get("Content-Type"); ct != c.wantContentType {
				t.Errorf("forwarded Content-Type %q, want %q", ct, c.wantContentType)
			}
			if c.wantBodyAPIVersion != "" {
				if v := gjson.Get(r.body, "apiVersion").Str; v != c.wantBodyAPIVersion {
					t.Errorf("forwarded body %s, want apiVersion %s", r.body, c.wantBodyAPIVersion)
				}
				if v := gjson.Get(r.body, "metadata.managedFields.0.apiVersion").Str; v != "" && v != c.wantBodyAPIVersion {
					t.Errorf("forwarded body's managedFields %s", r.body)
				}
			}
			if c.check != nil {
				c.check(t, body)
			}
		})
	}
}

// TestKarmadaRegistriesWatch: a watch's events come back one by one, each rewritten as it comes,
// and the watch ends when the control plane ends it; watches count against the subject's bound.
func TestKarmadaRegistriesWatch(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	release := make(chan struct{})
	cp.answer = func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		fmt.Fprintf(rw, `{"type":"ADDED","object":%s}`+"\n", storedRegistry)
		rw.(http.Flusher).Flush()
		select { // the second event only once the first was read: each is flushed on its own
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(rw, `{"type":"BOOKMARK","object":{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistry","metadata":{"resourceVersion":"12"}}}`+"\n")
		fmt.Fprint(rw, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","details":{"group":"karmada.kubesearch.io"},"code":410}}`+"\n")
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", w.url+"/apis/search.karmada.io/v1alpha1/resourceregistries?watch=1&resourceVersion=5&allowWatchBookmarks=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "karmada-admin")
	resp, err := w.proxied.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatalf("no first event: %v", lines.Err())
	}
	if first := lines.Bytes(); gjson.GetBytes(first, "type").Str != "ADDED" || gjson.GetBytes(first, "object.apiVersion").Str != "search.karmada.io/v1alpha1" ||
		gjson.GetBytes(first, "object.metadata.managedFields.0.apiVersion").Str != "search.karmada.io/v1alpha1" {
		t.Errorf("first event %s", first)
	}
	// A second watch of the same subject is past its bound of one while the first is open.
	if code, _, body := w.do(t, w.proxied, "GET", "/apis/search.karmada.io/v1alpha1/resourceregistries?watch=true", ""); code != http.StatusTooManyRequests {
		t.Errorf("a second watch: %d %s, want 429", code, body)
	}
	close(release)
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if len(rest) != 2 || gjson.Get(rest[0], "object.apiVersion").Str != "search.karmada.io/v1alpha1" || gjson.Get(rest[1], "object.details.group").Str != "search.karmada.io" {
		t.Errorf("later events %q", rest)
	}
	got := cp.requests()
	if len(got) != 1 || got[0].query != "watch=1&resourceVersion=5&allowWatchBookmarks=true" {
		t.Errorf("forwarded %+v", got)
	}
}

// TestKarmadaRegistriesProtobufWatchPasses: a watch the control plane answers in protobuf (the
// garbage collector's PartialObjectMetadata watches) passes as it comes, not cut at its first event.
func TestKarmadaRegistriesProtobufWatchPasses(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	stream := "k8s\x00\x0a\x04PartialObjectMetadata event one" + "k8s\x00 event two"
	cp.answerWith(http.StatusOK, "application/vnd.kubernetes.protobuf;stream=watch", stream)
	code, head, body := w.do(t, w.proxied, "GET", "/apis/search.karmada.io/v1alpha1/resourceregistries?watch=1", "",
		"Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	if code != http.StatusOK || string(body) != stream || head.Get("Content-Type") != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Errorf("%d %q %q, want the stream as it came", code, head.Get("Content-Type"), body)
	}
}

// TestKarmadaRegistriesWatchEndsAtShutdown: a relayed watch is the query API's, ended when it
// shuts down, whatever the control plane does.
func TestKarmadaRegistriesWatchEndsAtShutdown(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	cp.answer = func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		rw.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", w.url+"/apis/search.karmada.io/v1alpha1/resourceregistries?watch=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "karmada-admin")
	resp, err := w.proxied.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	w.server.registries.close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end at shutdown")
	}
}

// TestKarmadaRegistriesRefused: only users the aggregation layer names are served; the path is
// the stored collection's or a 404; bodies are bounded; a control plane away is a 503; every
// other path stays read-only.
func TestKarmadaRegistriesRefused(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	cp.answerWith(200, "application/json", storedRegistry)
	const base = "/apis/search.karmada.io/v1alpha1/resourceregistries"
	big := `{"apiVersion":"search.karmada.io/v1alpha1","kind":"ResourceRegistry","metadata":{"name":"x","annotations":{"a":"` + strings.Repeat("x", maxRegistryBody) + `"}}}`
	for _, c := range []struct {
		name         string
		client       *http.Client
		method, path string
		body         string
		headers      []string
		code         int
		says         string
	}{
		{"anonymous", w.other, "GET", base, "", nil, http.StatusForbidden, "served through the Karmada control plane's aggregation layer"},
		{"a token's user", w.other, "POST", base, `{}`, []string{"Authorization: Bearer alice-token"}, http.StatusForbidden, `user "alice"`},
		{"a token's user naming a user in the proxy's headers", w.other, "DELETE", base + "/fleet", "", []string{"Authorization: Bearer alice-token", "X-Remote-User: karmada-admin"}, http.StatusForbidden, "RBAC on resourceregistries.search.karmada.io"},
		{"another subresource", w.proxied, "GET", base + "/fleet/finalize", "", nil, http.StatusNotFound, "one subresource, status"},
		{"extra segments", w.proxied, "GET", base + "/fleet/status/x", "", nil, http.StatusNotFound, "one subresource, status"},
		{"a name that is no name", w.proxied, "GET", base + "/Fleet_1", "", nil, http.StatusNotFound, "RFC 1123"},
		{"an escaped slash", w.proxied, "PUT", base + "/%2E%2E%2Fother", `{}`, nil, http.StatusNotFound, "RFC 1123"},
		{"namespaced", w.proxied, "GET", "/apis/search.karmada.io/v1alpha1/namespaces/a/resourceregistries", "", nil, http.StatusNotFound, ""},
		{"create on a name", w.proxied, "POST", base + "/fleet", `{}`, nil, http.StatusMethodNotAllowed, "POST is not allowed"},
		{"delete the status", w.proxied, "DELETE", base + "/fleet/status", "", nil, http.StatusMethodNotAllowed, "DELETE is not allowed"},
		{"watch the status", w.proxied, "GET", base + "/fleet/status?watch=1", "", nil, http.StatusMethodNotAllowed, "GET is not allowed"},
		{"a body past 3 MiB", w.proxied, "POST", base, big, []string{"Content-Type: application/json"}, http.StatusRequestEntityTooLarge, "larger than"},
		{"protobuf", w.proxied, "POST", base, "k8s\x00", []string{"Content-Type: application/vnd.kubernetes.protobuf"}, http.StatusUnsupportedMediaType, "send JSON or YAML"},
		{"a write elsewhere", w.proxied, "POST", "/api/v1/namespaces/shop/pods", `{}`, nil, http.StatusMethodNotAllowed, "read-only"},
		{"a write through Karmada's proxy", w.proxied, "PUT", KarmadaProxyPath + "/apis/karmada.kubesearch.io/v1alpha1/resourceregistries/fleet", `{}`, nil, http.StatusMethodNotAllowed, "read-only"},
		{"the stored group at the root", w.proxied, "DELETE", "/apis/karmada.kubesearch.io/v1alpha1/resourceregistries/fleet", "", nil, http.StatusMethodNotAllowed, "read-only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := w.do(t, c.client, c.method, c.path, c.body, c.headers...)
			if code != c.code || gjson.GetBytes(body, "kind").Str != "Status" || !strings.Contains(gjson.GetBytes(body, "message").Str, c.says) {
				t.Errorf("%d %.300s, want a %d Status saying %q", code, body, c.code, c.says)
			}
			if got := cp.requests(); len(got) != 0 {
				t.Errorf("forwarded %d requests", len(got))
			}
		})
	}

	cp.Close()
	code, head, body := w.do(t, w.proxied, "GET", base, "")
	if code != http.StatusServiceUnavailable || head.Get("Retry-After") == "" || !strings.Contains(gjson.GetBytes(body, "message").Str, "cannot be reached") ||
		strings.Contains(string(body), "query-api-token") {
		t.Errorf("the control plane away: %d %q %s", code, head.Get("Retry-After"), body)
	}
}

// TestKarmadaRegistriesDiscovery: served, resourceregistries lists its verbs and its status
// subresource, in the group version's list and in aggregated discovery; not served (no
// --karmada-kubeconfig), it lists none and any request of it is a 404.
func TestKarmadaRegistriesDiscovery(t *testing.T) {
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	_, _, body := w.do(t, w.proxied, "GET", "/apis/search.karmada.io/v1alpha1", "")
	if got := gjson.GetBytes(body, `resources.#(name=="resourceregistries").verbs`).String(); got != `["create","delete","deletecollection","get","list","patch","update","watch"]` {
		t.Errorf("resourceregistries verbs %s in %s", got, body)
	}
	if got := gjson.GetBytes(body, `resources.#(name=="resourceregistries/status").verbs`).String(); got != `["get","patch","update"]` {
		t.Errorf("resourceregistries/status verbs %s in %s", got, body)
	}
	_, _, body = w.do(t, w.proxied, "GET", "/apis", "", "Accept: "+aggregatedContentType)
	rr := gjson.GetBytes(body, `items.#(metadata.name=="search.karmada.io").versions.0.resources.#(resource=="resourceregistries")`)
	if rr.Get("verbs.#").Int() != 8 || rr.Get("subresources.0.subresource").Str != "status" || rr.Get("subresources.0.verbs").String() != `["get","patch","update"]` {
		t.Errorf("aggregated resourceregistries: %s", rr.Raw)
	}
	if n := gjson.GetBytes(body, `items.#(metadata.name=="search.karmada.io").versions.0.resources.#`).Int(); n != 3 {
		t.Errorf("aggregated resources: %d, want proxying, resourceregistries, search", n)
	}

	srv := newFacadeServer(t, &fakeStore{})
	code, _, body := fetch(t, "GET", srv.URL+"/apis/search.karmada.io/v1alpha1", "")
	if code != http.StatusOK || gjson.GetBytes(body, `resources.#(name=="resourceregistries").verbs.#`).Int() != 0 || strings.Contains(string(body), "resourceregistries/status") {
		t.Errorf("not served: %s", body)
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		code, _, body = fetch(t, m, srv.URL+"/apis/search.karmada.io/v1alpha1/resourceregistries", "")
		if code != http.StatusNotFound || !strings.Contains(gjson.GetBytes(body, "message").Str, "--karmada-kubeconfig") {
			t.Errorf("not served, %s: %d %s", m, code, body)
		}
	}
}

// TestKarmadaRegistriesKubeconfigChecked: a kubeconfig that cannot be read fails New, naming
// the flag.
func TestKarmadaRegistriesKubeconfigChecked(t *testing.T) {
	_, err := New(Options{Backend: watermarkless{&fakeStore{}}, ListenAddr: "127.0.0.1:0", KarmadaKubeconfig: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "--karmada-kubeconfig") {
		t.Errorf("New with a missing kubeconfig: %v", err)
	}
}

// watermarkless is a Backend of a fakeStore.
type watermarkless struct{ *fakeStore }

func (watermarkless) Watermarks(context.Context) ([]store.Watermark, error) { return nil, nil }

// TestKarmadaRegistriesWatchAsKubeReadsIt: the control plane reads watch= as kube-apiserver reads
// every boolean parameter (anything but absent, "", "0" and "false" is true: watch=True, watch=yes,
// a bare watch), and so must the query API: a watch it took for a list would be read whole for a
// minute (its events held back, and only the first one answered) and counted as no watch.
func TestKarmadaRegistriesWatchAsKubeReadsIt(t *testing.T) {
	for _, q := range []string{"watch=True", "watch=yes", "watch", "watch=on"} {
		t.Run(q, func(t *testing.T) {
			cp := newControlPlane(t)
			w := newRegistriesWorld(t, cp)
			cp.answer = func(rw http.ResponseWriter, r *http.Request) {
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusOK)
				fmt.Fprintf(rw, `{"type":"ADDED","object":%s}`+"\n", storedRegistry)
				rw.(http.Flusher).Flush()
				<-r.Context().Done() // a watch goes on until its client leaves
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", w.url+"/apis/search.karmada.io/v1alpha1/resourceregistries?"+q, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Remote-User", "karmada-admin")
			resp, err := w.proxied.Do(req)
			if err != nil {
				t.Fatalf("%s: %v (the watch was held back as a list)", q, err)
			}
			defer resp.Body.Close()
			lines := bufio.NewScanner(resp.Body)
			if !lines.Scan() {
				t.Fatalf("%s: no first event as it came: %v", q, lines.Err())
			}
			if first := lines.Bytes(); gjson.GetBytes(first, "type").Str != "ADDED" {
				t.Errorf("%s: first event %s", q, first)
			}
			// Counted as a watch: a second one is past the bound of one.
			if code, _, body := w.do(t, w.proxied, "GET", "/apis/search.karmada.io/v1alpha1/resourceregistries?watch=true", ""); code != http.StatusTooManyRequests {
				t.Errorf("%s: a second watch: %d %s, want 429", q, code, body)
			}
		})
	}
}

// TestKarmadaRegistriesNoRedirect: an answer of the control plane redirecting elsewhere (a proxy or
// login page in front of it) is not followed: the query API's credentials, which its transport adds
// to every request, reach the control plane only, and nothing it was not asked for comes back.
func TestKarmadaRegistriesNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		t.Logf("followed with Authorization %q", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Secret"}`)
	}))
	defer other.Close()
	cp := newControlPlane(t)
	w := newRegistriesWorld(t, cp)
	cp.answer = func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}
	code, _, body := w.do(t, w.proxied, "GET", "/apis/search.karmada.io/v1alpha1/resourceregistries/fleet", "")
	if elsewhere.Load() != 0 {
		t.Errorf("the redirect was followed (answered %d %s)", code, body)
	}
	if code < 300 || code >= 400 {
		t.Errorf("answered %d %s, want the control plane's redirect status", code, body)
	}
}
