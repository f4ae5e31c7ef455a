package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PathClusters lists the member clusters the facade has a one-cluster view of.
const PathClusters = "/v1alpha1/clusters"

// KindClusterList is the kind of PathClusters' answer.
const KindClusterList = "ClusterList"

// ClusterList is the answer of PathClusters.
type ClusterList struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Items      []ClusterItem `json:"items"`
}

// ClusterItem is one member cluster and the path of its one-cluster view.
type ClusterItem struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

func (s *Server) clusterList(c *gin.Context) {
	out := ClusterList{APIVersion: APIVersion, Kind: KindClusterList, Items: []ClusterItem{}}
	for _, cl := range s.visibleClusters(subjectOf(c)) {
		out.Items = append(out.Items, ClusterItem{Name: cl, Path: ClustersPrefix + cl})
	}
	c.JSON(http.StatusOK, out)
}

// Context names of a kubesearch kubeconfig.
const (
	ContextFleet     = "kubesearch"
	ContextQualified = "kubesearch-qualified"
	// ContextClusterPrefix + a member's name is its one-cluster view.
	ContextClusterPrefix = "kubesearch-"
)

// KubeconfigOptions say how kubectl reaches the query API.
type KubeconfigOptions struct {
	Server                string
	CertificateAuthority  string
	InsecureSkipTLSVerify bool
	Token                 string
	// ClientCertificate and ClientKey are PEM files of a client certificate, referenced by path.
	ClientCertificate, ClientKey string
}

// ViewExtension names the extension of each context of a kubesearch kubeconfig that says which
// view it is and what to know of it: client-go writes no comments, and `kubectl config view`
// shows extensions.
const ViewExtension = "kubesearch.io/view"

// FleetViewNotice is what the fleet context's extension says, and `kubesearch kubeconfig` prints:
// in the fleet view one namespace/name may be several clusters' objects.
const FleetViewNotice = "context " + ContextFleet + " is the fleet view: objects keep their names, so one namespace/name may be several clusters' objects " +
	"(kubectl get shows a CLUSTER column, a GET of such a name is a 409); informers, controller-runtime and k9s keep one object per namespace/name " +
	"and merge them: point those at context " + ContextQualified + " (names <name>_<cluster>) or at one cluster's context"

// Kubeconfig has a context for the fleet view (current), one for the qualified view and one per
// member cluster, all with one user. Each context's ViewExtension says which view it is.
func Kubeconfig(o KubeconfigOptions, clusters []string) *clientcmdapi.Config {
	server := strings.TrimRight(o.Server, "/")
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos[ContextFleet] = &clientcmdapi.AuthInfo{Token: o.Token, ClientCertificate: o.ClientCertificate, ClientKey: o.ClientKey}
	add := func(name, url string, ext viewExtension) {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: url, CertificateAuthority: o.CertificateAuthority,
			InsecureSkipTLSVerify: o.InsecureSkipTLSVerify}
		raw, _ := json.Marshal(ext) // strings only: cannot fail
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: ContextFleet,
			Extensions: map[string]runtime.Object{ViewExtension: &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}}}
	}
	add(ContextFleet, server, viewExtension{View: "fleet", Note: FleetViewNotice})
	add(ContextQualified, server+QualifiedPrefix, viewExtension{View: "qualified",
		Note: "every object is named <name>_<cluster>: clients keying objects by namespace/name keep every cluster's"})
	for _, cl := range clusters {
		add(ContextClusterPrefix+cl, server+ClustersPrefix+cl, viewExtension{View: "cluster", Cluster: cl,
			Note: "cluster " + cl + " alone, its objects and resourceVersions as the member has them"})
	}
	cfg.CurrentContext = ContextFleet
	return cfg
}

// viewExtension is a context's ViewExtension.
type viewExtension struct {
	View    string `json:"view"`
	Cluster string `json:"cluster,omitempty"`
	Note    string `json:"note"`
}

// FetchClusters asks a query API for the member clusters it has a view of.
func FetchClusters(ctx context.Context, client *http.Client, server, token string) ([]string, error) {
	url := strings.TrimRight(server, "/") + PathClusters
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var list ClusterList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	names := make([]string, len(list.Items))
	for i, it := range list.Items {
		names[i] = it.Name
	}
	return names, nil
}
