package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// What the query API serves, as queryapi/openapi.json and the facade's views name it (held against
// queryapi's constants by TestWireNamesAgreeWithQueryAPI).
const (
	pathSearch        = "/v1alpha1/search"
	qualifiedPrefix   = "/qualified"
	clustersPrefix    = "/clusters/"
	clusterAnnotation = "resource.karmada.io/cached-from-cluster"
	maxFacetSize      = 1000
	// maxResponseBytes bounds one page: 1,000 objects trimmed at 32 KB strings fit with room.
	maxResponseBytes = 256 << 20
)

// searchResult is the REST search's answer (SearchResult in queryapi/openapi.json).
type searchResult struct {
	Metadata struct {
		Continue string `json:"continue,omitempty"`
	} `json:"metadata"`
	Total  int64             `json:"total"`
	Items  []json.RawMessage `json:"items"`
	Facets []facetResult     `json:"facets,omitempty"`
}

type facetResult struct {
	Name    string `json:"name"`
	Buckets []struct {
		Value string `json:"value"`
		Count int64  `json:"count"`
	} `json:"buckets"`
	Other      int64 `json:"other"`
	ErrorBound int64 `json:"errorBound,omitempty"`
}

// ServerError is a Status the query API answered instead of a result, worded as kubectl words one.
type ServerError struct {
	Status metav1.Status
}

func (e *ServerError) Error() string {
	reason := string(e.Status.Reason)
	if reason == "" {
		reason = http.StatusText(int(e.Status.Code))
	}
	return fmt.Sprintf("Error from server (%s): %s", reason, e.Status.Message)
}

// target is where the current context's facade leads: the query API's base URL, and the member
// its one-cluster view shows ("" for the fleet and qualified views).
type target struct {
	config  *rest.Config
	cluster string
}

// loadTarget reads the kubeconfig as kubectl does (--kubeconfig, else KUBECONFIG, else
// ~/.kube/config; --context, else the current one) into a rest.Config, so every credential kubectl
// takes works: tokens, token files, client certificates, exec plugins, auth providers.
func loadTarget(kubeconfig, context string) (*target, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	base, cluster, err := splitView(cfg.Host)
	if err != nil {
		return nil, err
	}
	cfg.Host = base
	cfg.APIPath = ""
	return &target{config: cfg, cluster: cluster}, nil
}

// splitView turns a facade URL into the query API's base URL: the REST search is served beside the
// fleet view, so the qualified view's /qualified and a one-cluster view's /clusters/<name> are cut
// off (a path before them, a proxy's prefix, stays).
func splitView(host string) (base, cluster string, err error) {
	u, err := url.Parse(host)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", "", fmt.Errorf("the context's server %q: not a URL of the query API", host)
	}
	p := strings.TrimRight(u.Path, "/")
	// A member may be named "qualified": its view's path is looked for first.
	if at := strings.LastIndex(p, clustersPrefix); at >= 0 && !strings.Contains(p[at+len(clustersPrefix):], "/") {
		cluster, p = p[at+len(clustersPrefix):], p[:at]
	} else {
		p = strings.TrimSuffix(p, qualifiedPrefix)
	}
	u.Path, u.RawPath = p, ""
	return u.String(), cluster, nil
}

// client asks the REST search.
type client struct {
	http *http.Client
	base string
	// warn receives each Warning header once, as kubectl prints them.
	warn func(string)
	seen map[string]bool
}

func newClient(cfg *rest.Config, warn func(string)) (*client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: credentials of the context: %w", err)
	}
	return &client{http: hc, base: strings.TrimRight(cfg.Host, "/"), warn: warn, seen: map[string]bool{}}, nil
}

// search asks for one page.
func (c *client) search(ctx context.Context, params url.Values) (*searchResult, error) {
	u := c.base + pathSearch + "?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer resp.Body.Close()
	for _, w := range resp.Header.Values("Warning") {
		if text := warningText(w); !c.seen[text] {
			c.seen[text] = true
			c.warn(text)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("search: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, body)
	}
	var out searchResult
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("search: %s answered what is not a search result (is the context's server a kubesearch query API?): %w", c.base, err)
	}
	return &out, nil
}

// statusError reads the Status the query API sends with every error; a body that is none (a proxy's
// page) is quoted, shortened, so the user still sees who answered what.
func statusError(resp *http.Response, body []byte) error {
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		return &ServerError{Status: st}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	return &ServerError{Status: metav1.Status{Code: int32(resp.StatusCode),
		Message: fmt.Sprintf("%s %s: %s", resp.Request.Method, resp.Request.URL.Path, text)}}
}

// warningText takes the text out of an RFC 7234 warning (`299 - "text"`), as client-go does.
func warningText(h string) string {
	parts := strings.SplitN(h, " ", 3)
	if len(parts) == 3 {
		if s, err := strconv.Unquote(parts[2]); err == nil {
			return s
		}
	}
	return h
}

// IsServerError says whether err is a Status the query API answered.
func IsServerError(err error) bool {
	var se *ServerError
	return errors.As(err, &se)
}
