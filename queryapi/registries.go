package queryapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// ResourceRegistry objects of a Karmada control plane, served under Karmada's group
// (search.karmada.io/v1alpha1) and stored in kubesearch's (karmada.kubesearch.io/v1alpha1).
//
// kubesearch owns the control plane's APIService v1alpha1.search.karmada.io, so no CRD of
// resourceregistries.search.karmada.io can live there: the objects are stored as a CRD of
// kubesearch's own group, which the collectors read, and the query API forwards requests for
// them to the control plane, rewriting the apiVersion both ways, so that manifests and tools
// written for Karmada work unchanged.
//
// Who may read or change them is the control plane's RBAC on resourceregistries.search.karmada.io:
// the aggregation layer decided before it named the user (auth.User.Proxied), and only such users
// are served. The forwarded request carries the query API's own credentials, never the client's,
// and is built from the parsed path only, so nothing but these objects becomes writable.

// Paths under the control plane the objects are stored at, and what they are served as.
const (
	registryStoreAPIVersion  = registry.StoreGroup + "/" + registry.StoreVersion
	registryServedAPIVersion = KarmadaGroup + "/" + KarmadaVersion
	registryStorePath        = "/apis/" + registryStoreAPIVersion + "/" + registry.StoreResource
)

// maxRegistryBody bounds a request's body as kube-apiserver bounds its own (3 MiB): the body is
// read whole to rewrite it.
const maxRegistryBody = 3 << 20

// maxRegistryAnswer bounds an answer read whole to rewrite it (a list, an object): thousands of
// registries fit, and a control plane answering more cannot make the query API hold it.
const maxRegistryAnswer = 64 << 20

// registryRequestTimeout bounds a forwarded request other than a watch, as kube-apiserver's
// --request-timeout default does; a watch ends by its timeoutSeconds, its client, or shutdown.
const registryRequestTimeout = time.Minute

// registryProxy forwards ResourceRegistry requests to the control plane storing them.
type registryProxy struct {
	base   *url.URL // the control plane's server URL, without user info
	client *http.Client
	// stopping is done once the query API shuts down: a watch is a handler the server's shutdown
	// would otherwise wait for until its own timeout.
	stopping context.Context
	stop     context.CancelFunc
}

// newRegistryProxy reads the control plane's kubeconfig (--karmada-kubeconfig).
func newRegistryProxy(kubeconfig string) (*registryProxy, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: %w", kubeconfig, err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: server: %w", kubeconfig, err)
	}
	base.User = nil // so that no error message can show it
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: credentials: %w", kubeconfig, err)
	}
	// A redirect is answered as it came, never followed: the transport adds the query API's
	// credentials to every request it sends, wherever the Location points (a proxy or login page
	// in front of the control plane), and the client would get what it was never asked for.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	stopping, stop := context.WithCancel(context.Background())
	return &registryProxy{base: base, client: client, stopping: stopping, stop: stop}, nil
}

// close ends the watches being served and the idle connections; for the server's shutdown.
func (p *registryProxy) close() {
	p.stop()
	p.client.CloseIdleConnections()
}

// registryRequest is a parsed request for ResourceRegistry objects: the collection, one object
// (name), or its status.
type registryRequest struct {
	name   string
	status bool
}

// parseRegistryPath reads what follows .../resourceregistries ("", "/<name>", "/<name>/status"):
// anything else, or a name that is no DNS subdomain, is a 404, so the forwarded path is always
// one of the stored collection's.
func parseRegistryPath(rest string) (registryRequest, *metav1.Status) {
	notFound := func(msg string) (registryRequest, *metav1.Status) {
		return registryRequest{}, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, msg)
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return registryRequest{}, nil
	}
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if errs := validation.IsDNS1123Subdomain(parts[0]); len(errs) > 0 {
		return notFound(fmt.Sprintf("resourceregistries %q: %s", parts[0], strings.Join(errs, "; ")))
	}
	switch {
	case len(parts) == 1:
		return registryRequest{name: parts[0]}, nil
	case len(parts) == 2 && parts[1] == "status":
		return registryRequest{name: parts[0], status: true}, nil
	}
	return notFound(fmt.Sprintf("resourceregistries/%s: a ResourceRegistry has one subresource, status", strings.Join(parts[1:], "/")))
}

// verb is the Kubernetes verb of a method on r, "" for a method r does not take.
func (r registryRequest) verb(method string, watch bool) string {
	switch {
	case r.name == "" && (method == http.MethodGet || method == http.MethodHead) && watch:
		return "watch"
	case r.name == "" && (method == http.MethodGet || method == http.MethodHead):
		return "list"
	case r.name == "" && method == http.MethodPost:
		return "create"
	case r.name == "" && method == http.MethodDelete:
		return "deletecollection"
	case (method == http.MethodGet || method == http.MethodHead) && watch:
		if r.status {
			return "" // kube-apiserver watches no subresource
		}
		return "watch"
	case method == http.MethodGet || method == http.MethodHead:
		return "get"
	case method == http.MethodPut:
		return "update"
	case method == http.MethodPatch:
		return "patch"
	case method == http.MethodDelete && !r.status:
		return "delete"
	}
	return ""
}

// kubeBool reads a boolean query parameter as kube-apiserver reads it
// (runtime.Convert_Slice_string_To_bool): absent, "0" or "false" (any case) is false, anything
// else true ("True", "yes", a bare "watch"). The control plane the request is forwarded to reads
// watch= so, and a watch taken here for a list would be read whole for a minute and escape the
// watch bound.
func kubeBool(values []string) bool {
	return len(values) > 0 && values[0] != "0" && !strings.EqualFold(values[0], "false")
}

// serveRegistries answers a request for ResourceRegistry objects: 404 unless the query API has a
// control plane to forward to, 403 unless the aggregation layer named the user.
func (s *Server) serveRegistries(c *gin.Context, r *facadeRequest) {
	if s.registries == nil {
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf(
			"%s: kubesearch does not serve ResourceRegistry objects through this API; the collectors read them from their --registry files (start the query API with --karmada-kubeconfig to serve those a Karmada control plane stores)",
			c.Request.URL.Path)))
		return
	}
	rr, st := parseRegistryPath(strings.TrimPrefix(r.path, karmadaRegistriesPath))
	if st != nil {
		writeStatusObject(c, st)
		return
	}
	subj := subjectOf(c)
	if !subj.user.Proxied {
		writeStatus(c, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
			"user %q: ResourceRegistry objects are served through the Karmada control plane's aggregation layer, whose RBAC on resourceregistries.%s decides who may read or change them; ask the control plane",
			subj.user.Name, KarmadaGroup), nil)
		return
	}
	watch := kubeBool(c.Request.URL.Query()[paramWatch])
	verb := rr.verb(c.Request.Method, watch)
	if verb == "" {
		writeStatus(c, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s", c.Request.Method, c.Request.URL.Path), nil)
		return
	}
	body, contentType, st := readRegistryBody(c.Request)
	if st != nil {
		writeStatusObject(c, st)
		return
	}

	ctx := c.Request.Context()
	if verb == "watch" {
		done, ok := s.openWatch(c, subj)
		if !ok {
			return
		}
		defer done()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.registries.stopping, cancel)()
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, registryRequestTimeout)
		defer cancel()
	}
	resp, err := s.registries.forward(ctx, c.Request, rr, body, contentType)
	if err != nil {
		if ctx.Err() != nil && c.Request.Context().Err() != nil {
			return // the client went: nobody to answer
		}
		c.Header("Retry-After", "5")
		writeStatus(c, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("the Karmada control plane storing ResourceRegistry objects (%s) cannot be reached: %v", s.registries.base.Host, err), nil)
		return
	}
	defer resp.Body.Close()
	s.relayRegistryAnswer(c, resp, verb == "watch")
}

// relayRegistryAnswer answers the client with the control plane's answer, rewritten: a watch's
// events as they come, anything else whole.
func (s *Server) relayRegistryAnswer(c *gin.Context, resp *http.Response, watch bool) {
	for _, h := range []string{"Content-Type", "Warning", "Retry-After"} {
		for _, v := range resp.Header.Values(h) {
			c.Writer.Header().Add(h, v)
		}
	}
	if watch && resp.StatusCode == http.StatusOK {
		streamRegistryWatch(c, resp)
		return
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistryAnswer+1))
	if err == nil && len(out) > maxRegistryAnswer {
		err = fmt.Errorf("an answer larger than %d bytes: page the list (limit=)", maxRegistryAnswer)
	}
	if err != nil {
		c.Writer.Header().Del("Content-Type")
		c.Header("Retry-After", "5")
		writeStatus(c, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("the Karmada control plane storing ResourceRegistry objects (%s) broke off its answer: %v", s.registries.base.Host, err), nil)
		return
	}
	c.Data(resp.StatusCode, resp.Header.Get("Content-Type"), rewriteBody(out, resp.Header.Get("Content-Type"), toServed))
}

// forward sends a request for r to the control plane with the query API's credentials. Only
// Accept and Content-Type are carried over: the client's Authorization, Impersonate-* and
// X-Remote-* headers, like any other, must not reach a server that trusts the query API's own.
func (p *registryProxy) forward(ctx context.Context, in *http.Request, r registryRequest, body []byte, contentType string) (*http.Response, error) {
	u := *p.base
	path := registryStorePath
	if r.name != "" {
		path += "/" + r.name
	}
	if r.status {
		path += "/status"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = in.URL.RawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	if a := in.Header.Values("Accept"); len(a) > 0 {
		req.Header["Accept"] = a
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", in.Method, path, err)
	}
	return resp, nil
}

// readRegistryBody reads a request's body, bounded, as JSON with the served apiVersion rewritten
// to the stored one, and answers it with the content type to send it as. YAML (a create or
// update in YAML, an apply patch) is sent as JSON: the control plane reads both, and only JSON is
// rewritten here.
func readRegistryBody(req *http.Request) ([]byte, string, *metav1.Status) {
	if req.Body == nil || req.Method == http.MethodGet || req.Method == http.MethodHead {
		return nil, "", nil
	}
	tooLarge := newStatus(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
		fmt.Sprintf("the request's body is larger than %d bytes, the most a ResourceRegistry request may carry", maxRegistryBody))
	if req.ContentLength > maxRegistryBody {
		return nil, "", tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRegistryBody+1))
	if err != nil {
		return nil, "", newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("read the request's body: %v", err))
	}
	if len(body) > maxRegistryBody {
		return nil, "", tooLarge
	}
	contentType := req.Header.Get("Content-Type")
	if len(body) == 0 {
		return nil, contentType, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = "application/json" // as kube-apiserver takes a body without a type
	}
	switch mt {
	case "application/yaml":
		mt, contentType = "application/json", "application/json"
		fallthrough
	case "application/apply-patch+yaml":
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return nil, "", newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the request's YAML body: %v", err))
		}
	case "application/json", "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json":
	default:
		st := newStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the body's media type %q is not served for ResourceRegistry objects: send JSON or YAML", mt))
		return nil, "", st
	}
	if contentType == "" {
		contentType = "application/json"
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // integers past 2^53 stay as they were written
	if err := d.Decode(&v); err != nil {
		return nil, "", newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the request's body is not JSON: %v", err))
	}
	if mt == "application/json-patch+json" {
		rewriteJSONPatch(v)
	} else {
		rewriteDocument(v, toStored)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, "", newStatus(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode the request's body: %v", err))
	}
	return out, contentType, nil
}

// direction is which way apiVersions are rewritten.
type direction struct{ from, to, fromGroup, toGroup string }

var (
	toStored = direction{from: registryServedAPIVersion, to: registryStoreAPIVersion, fromGroup: KarmadaGroup, toGroup: registry.StoreGroup}
	toServed = direction{from: registryStoreAPIVersion, to: registryServedAPIVersion, fromGroup: registry.StoreGroup, toGroup: KarmadaGroup}
)

// rewriteDocument rewrites what a body holds: an object, a list's items, a Table's row objects
// (the Table itself is meta.k8s.io's), a watch event's object, a Status's group and messages.
func rewriteDocument(v any, d direction) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	rewriteObject(m, d)
	if m["kind"] == "Status" {
		rewriteStatus(m, d)
	}
	for _, key := range []string{"items", "rows"} {
		list, _ := m[key].([]any)
		for _, it := range list {
			im, _ := it.(map[string]any)
			if key == "rows" {
				im, _ = im["object"].(map[string]any)
			}
			if im != nil {
				rewriteObject(im, d)
			}
		}
	}
	if obj, ok := m["object"].(map[string]any); ok && m["type"] != nil {
		rewriteDocument(obj, d) // a watch event
	}
}

// rewriteObject rewrites an object's apiVersion and its managedFields' (a field manager's entry
// names the apiVersion it wrote with).
func rewriteObject(m map[string]any, d direction) {
	if m["apiVersion"] == d.from {
		m["apiVersion"] = d.to
	}
	meta, _ := m["metadata"].(map[string]any)
	mfs, _ := meta["managedFields"].([]any)
	for _, mf := range mfs {
		if e, ok := mf.(map[string]any); ok && e["apiVersion"] == d.from {
			e["apiVersion"] = d.to
		}
	}
}

// rewriteStatus rewrites the group a Status names ("resourceregistries.karmada.kubesearch.io
// "x" not found"), so that the client reads the resource it asked for.
func rewriteStatus(m map[string]any, d direction) {
	from, to := registry.StoreResource+"."+d.fromGroup, registry.StoreResource+"."+d.toGroup
	if msg, ok := m["message"].(string); ok {
		m["message"] = strings.ReplaceAll(msg, from, to)
	}
	details, _ := m["details"].(map[string]any)
	if details == nil {
		return
	}
	if details["group"] == d.fromGroup {
		details["group"] = d.toGroup
	}
	causes, _ := details["causes"].([]any)
	for _, c := range causes {
		if cm, ok := c.(map[string]any); ok {
			if msg, ok := cm["message"].(string); ok {
				cm["message"] = strings.ReplaceAll(msg, from, to)
			}
		}
	}
}

// rewriteJSONPatch rewrites the apiVersion a JSON patch sets or tests.
func rewriteJSONPatch(v any) {
	ops, _ := v.([]any)
	for _, op := range ops {
		if m, ok := op.(map[string]any); ok && m["path"] == "/apiVersion" && m["value"] == registryServedAPIVersion {
			m["value"] = registryStoreAPIVersion
		}
	}
}

// rewriteBody rewrites an answer of the control plane, JSON or YAML; anything else (or what does
// not decode) passes as it came.
func rewriteBody(body []byte, contentType string, d direction) []byte {
	mt, _, _ := mime.ParseMediaType(contentType)
	yamlBody := mt == "application/yaml"
	if mt != "application/json" && !yamlBody || len(body) == 0 {
		return body
	}
	in := body
	if yamlBody {
		var err error
		if in, err = yaml.YAMLToJSON(body); err != nil {
			return body
		}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return body
	}
	rewriteDocument(v, d)
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	if yamlBody {
		if out, err = yaml.JSONToYAML(out); err != nil {
			return body
		}
	}
	return out
}

// streamRegistryWatch relays a watch's events, each rewritten and flushed as it comes, until the
// control plane ends it, the client goes, or the query API shuts down (the request's context,
// which cancels the upstream request and so ends the read).
func streamRegistryWatch(c *gin.Context, resp *http.Response) {
	c.Status(resp.StatusCode)
	c.Writer.WriteHeaderNow()
	c.Writer.Flush()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		// Protobuf, which the control plane speaks for PartialObjectMetadata (its garbage
		// collector's watches): those objects are meta.k8s.io's, so they pass as they come.
		relayRaw(c.Writer, resp.Body)
		return
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	for {
		var ev any
		if err := dec.Decode(&ev); err != nil {
			return // the control plane ended the watch, or the context did
		}
		rewriteDocument(ev, toServed)
		line, err := json.Marshal(ev)
		if err != nil {
			return
		}
		if _, err := c.Writer.Write(append(line, '\n')); err != nil {
			return // the client went
		}
		c.Writer.Flush()
	}
}

// relayRaw copies a stream, flushing each read, until either side ends.
func relayRaw(w gin.ResponseWriter, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			w.Flush()
		}
		if err != nil {
			return
		}
	}
}
