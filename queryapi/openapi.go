package queryapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// The facade serves OpenAPI v3 (/openapi/v3) in every view, so `kubectl explain` and
// `kubectl get -o custom-columns` work: the index lists the group-versions the view caches, and each
// document is a member's own, relayed by its collector through the ledger (the query API never
// talks to members). In the fleet views a group-version's document is the one most members of the
// view serve (a fleet mid-upgrade serves two), the lowest-named member's among equals. Caching
// follows kube-apiserver: each document is addressed by its hash, an old hash redirects to the
// current one, and a current one is immutable. OpenAPI v2 is not served: kubectl uses v3.

// openAPIServed is, by path, the hash of the document the view of cluster ("" the fleet) serves
// to a subject that sees vis: one per group-version the view caches of which some member of the
// view the subject sees relayed a document, chosen among those members only.
func (c *catalog) openAPIServed(cluster string, vis visibleFunc) map[string]string {
	records := c.seen(func(r *registry.SelectionRecord) bool {
		return r.Resource != "" && (cluster == "" || r.Cluster == cluster)
	}, vis)
	c.mu.Lock()
	defer c.mu.Unlock()
	members := map[string]map[string]bool{} // by path, the members that cache something of it
	for _, r := range records {
		path := registry.OpenAPIPath(r.Group, r.Version)
		if _, ok := c.openapi[r.Cluster][path]; !ok {
			continue
		}
		if members[path] == nil {
			members[path] = map[string]bool{}
		}
		members[path][r.Cluster] = true
	}
	out := make(map[string]string, len(members))
	for path, set := range members {
		count := map[string]int{}
		for m := range set {
			count[c.openapi[m][path]]++
		}
		best := 0
		for _, m := range slices.Sorted(maps.Keys(set)) {
			if h := c.openapi[m][path]; count[h] > best {
				out[path], best = h, count[h]
			}
		}
	}
	return out
}

// openAPIDocument is the document of a hash, nil if none is held.
func (c *catalog) openAPIDocument(hash string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.docs[hash]; d != nil {
		return d.body
	}
	return nil
}

// prefix is the view's path prefix: what its kubeconfig server URL adds to the root.
func (v view) prefix() string {
	switch {
	case v.cluster != "":
		return v.mount + ClustersPrefix + v.cluster
	case v.qualified:
		return v.mount + QualifiedPrefix
	}
	return v.mount
}

// openAPIURL is a document's serverRelativeURL in a view, as kube-apiserver writes it with the
// view's prefix: clients strip the prefix their server URL has (client-go's openapi client does).
func (v view) openAPIURL(path, hash string) string {
	return v.prefix() + "/openapi/v3/" + path + "?" + url.Values{"hash": {hash}}.Encode()
}

// serveOpenAPI serves r.openAPI: "v3" (the index), "v3/<path>" (a document), or anything else (404).
func (s *Server) serveOpenAPI(c *gin.Context, r *facadeRequest) {
	switch {
	case r.openAPI == "v3":
		s.openAPIIndex(c, r)
	case strings.HasPrefix(r.openAPI, "v3/"):
		s.openAPIGroupVersion(c, r, strings.TrimPrefix(r.openAPI, "v3/"))
	case r.openAPI == "v2" || strings.HasPrefix(r.openAPI, "v2/"):
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound,
			"kubesearch serves OpenAPI v3 only, at "+r.prefix()+"/openapi/v3 (kubectl explain uses v3)"))
	default:
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
	}
}

// openAPIDiscovery is the /openapi/v3 index, as kube-openapi's handler3 writes it.
type openAPIDiscovery struct {
	Paths map[string]openAPIGroupVersion `json:"paths"`
}

type openAPIGroupVersion struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

func (s *Server) openAPIIndex(c *gin.Context, r *facadeRequest) {
	index := openAPIDiscovery{Paths: map[string]openAPIGroupVersion{}}
	for path, hash := range s.catalog.openAPIServed(r.cluster, subjectOf(c).visible()) {
		index.Paths[path] = openAPIGroupVersion{ServerRelativeURL: r.openAPIURL(path, hash)}
	}
	body, err := json.Marshal(index) // map keys sorted: the same index, the same bytes and ETag
	if err != nil {
		writeStatusObject(c, newStatus(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode the OpenAPI index: %v", err)))
		return
	}
	c.Header("Etag", fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(body))))
	c.Header("Content-Type", "application/json")
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(body))
}

func (s *Server) openAPIGroupVersion(c *gin.Context, r *facadeRequest, path string) {
	c.Header("Vary", "Accept")
	hash, ok := s.catalog.openAPIServed(r.cluster, subjectOf(c).visible())[path]
	var body []byte
	if ok {
		body = s.catalog.openAPIDocument(hash)
	}
	if body == nil {
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("no OpenAPI document of %q: kubesearch serves those of the group-versions it caches, as a member relayed them", path)))
		return
	}
	if !acceptsJSON(c.GetHeader("Accept")) {
		writeStatusObject(c, newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"kubesearch serves OpenAPI documents as application/json only"))
		return
	}
	c.Header("Content-Type", "application/json")
	c.Header("Etag", fmt.Sprintf("%q", hash))
	if h := c.Query("hash"); h != "" {
		if h != hash {
			// As kube-apiserver: an old hash is sent to the current document.
			c.Redirect(http.StatusMovedPermanently, r.openAPIURL(path, hash))
			return
		}
		c.Header("Cache-Control", "public, immutable")
		c.Header("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(body))
}

// acceptsJSON says whether an Accept header admits application/json; none admits anything.
func acceptsJSON(accept string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		switch mediaParams(part).typ {
		case "application/json", "application/*", "*/*":
			return true
		}
	}
	return false
}
