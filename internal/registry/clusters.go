package registry

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/net/http/httpguts"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"
)

// Cluster is a member cluster: what registries select it by, and how to reach it. It is reached
// either through a kubeconfig (Kubeconfig, and Context or the kubeconfig's current context) or
// directly (Server, CAFile or CAData, TokenFile or Token). A clusters file names credentials only by
// file, never inline, so that they can rotate and never end up in logs; CAData, Token and ProxyURL are
// never read from a file (json:"-"): they hold what a Karmada Cluster object's Secret gives, in
// memory, and a rotation is a changed Cluster (a reconnect).
type Cluster struct {
	// Name identifies the cluster everywhere (documents, status, partition keys); a DNS label.
	Name string `json:"name"`
	// Labels are matched by a registry's targetCluster.labelSelector.
	Labels map[string]string `json:"labels,omitempty"`
	// Provider, Region and Zone are matched by a registry's targetCluster.fieldSelector.
	Provider string `json:"provider,omitempty"`
	Region   string `json:"region,omitempty"`
	Zone     string `json:"zone,omitempty"`

	// Kubeconfig is the path of a kubeconfig file; Context picks one of its contexts.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`

	// Server is the https URL of the member's API server, CAFile the PEM bundle to verify it and
	// TokenFile a file holding a bearer token (re-read when it changes).
	Server    string `json:"server,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	// InsecureSkipTLSVerify trusts any server certificate; for test beds only.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// CAData (PEM) and Token replace CAFile and TokenFile when the credentials are held in memory.
	CAData []byte `json:"-"`
	Token  string `json:"-"`
	// ProxyURL is the proxy every request to the member goes through (http, https or socks5).
	ProxyURL string `json:"-"`
	// ProxyHeader is sent to an http or https ProxyURL in the CONNECT request that opens the tunnel
	// to the member (a Karmada Cluster's spec.proxyHeader: often a Proxy-Authorization), never to
	// the member itself.
	ProxyHeader http.Header `json:"-"`
}

// clustersFile is the shape of a clusters file.
type clustersFile struct {
	Clusters []Cluster `json:"clusters"`
}

// LoadClusters reads a clusters file:
//
//	clusters:
//	- name: member1
//	  labels: {env: prod}
//	  provider: aws
//	  region: eu-west-1
//	  zone: eu-west-1a
//	  kubeconfig: member1.kubeconfig   # relative to this file's folder
//	  context: member1                 # optional: the kubeconfig's current context otherwise
//	- name: member2
//	  server: https://10.0.0.2:6443
//	  caFile: member2/ca.crt
//	  tokenFile: member2/token
//
// Decoding is strict, relative paths are resolved against the file's folder, and the clusters are
// validated (see ValidateClusters); all errors are reported at once.
func LoadClusters(path string) ([]Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load clusters: %w", err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("load clusters %s: %w", path, err)
	}
	var f clustersFile
	if err := decodeStrict(j, &f, path); err != nil {
		return nil, fmt.Errorf("load clusters: %w", err)
	}
	dir := filepath.Dir(path)
	for i := range f.Clusters {
		c := &f.Clusters[i]
		c.Kubeconfig = resolve(dir, c.Kubeconfig)
		c.CAFile = resolve(dir, c.CAFile)
		c.TokenFile = resolve(dir, c.TokenFile)
	}
	if err := ValidateClusters(f.Clusters); err != nil {
		return nil, fmt.Errorf("load clusters %s:\n%w", path, err)
	}
	return f.Clusters, nil
}

func resolve(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// ValidateClusters checks every cluster and that names are unique. Errors name the field path, e.g.
// `clusters[2].server: Required value: ...`; all are returned at once, joined.
func ValidateClusters(clusters []Cluster) error {
	var errs []error
	seen := map[string]bool{}
	for i := range clusters {
		path := field.NewPath("clusters").Index(i)
		for _, e := range validateCluster(&clusters[i], path) {
			errs = append(errs, e)
		}
		name := clusters[i].Name
		if name == "" {
			continue
		}
		if seen[name] {
			errs = append(errs, field.Duplicate(path.Child("name"), name))
		}
		seen[name] = true
	}
	return errors.Join(errs...)
}

func validateCluster(c *Cluster, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(path.Child("name"), "a DNS label, e.g. member1"))
	} else {
		// A DNS label can hold no "_", which is what lets qualified names like pod_member1 split.
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			allErrs = append(allErrs, field.Invalid(path.Child("name"), c.Name, msg))
		}
	}
	allErrs = append(allErrs, metav1validation.ValidateLabels(c.Labels, path.Child("labels"))...)

	direct := c.Server != "" || c.CAFile != "" || c.TokenFile != "" || c.InsecureSkipTLSVerify ||
		len(c.CAData) > 0 || c.Token != "" || c.ProxyURL != "" || len(c.ProxyHeader) > 0
	switch {
	case c.Kubeconfig != "" && direct:
		for _, f := range []struct {
			name string
			set  bool
		}{{"server", c.Server != ""}, {"caFile", c.CAFile != ""}, {"tokenFile", c.TokenFile != ""},
			{"insecureSkipTLSVerify", c.InsecureSkipTLSVerify}, {"caData", len(c.CAData) > 0},
			{"token", c.Token != ""}, {"proxyURL", c.ProxyURL != ""}, {"proxyHeader", len(c.ProxyHeader) > 0}} {
			if f.set {
				allErrs = append(allErrs, field.Forbidden(path.Child(f.name),
					"cannot be combined with kubeconfig; reach a cluster through one or the other"))
			}
		}
	case c.Kubeconfig != "":
	case c.Context != "":
		allErrs = append(allErrs, field.Required(path.Child("kubeconfig"), "context needs the kubeconfig it belongs to"))
	case c.Server == "":
		allErrs = append(allErrs, field.Required(path.Child("server"),
			"reach the cluster through kubeconfig (and context), or server with caFile and tokenFile"))
	default:
		allErrs = append(allErrs, validateDirect(c, path)...)
	}
	return allErrs
}

func validateDirect(c *Cluster, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	u, err := url.Parse(c.Server)
	switch {
	case err != nil:
		// url.Parse's error repeats the input, whose userinfo may be a password: neither is shown.
		allErrs = append(allErrs, field.Invalid(path.Child("server"), redactURL(c.Server), "not a URL"))
	case u.Scheme != "https" || u.Host == "":
		// A bearer token must not travel in clear text.
		allErrs = append(allErrs, field.Invalid(path.Child("server"), u.Redacted(), "must be an https URL with a host"))
	case u.User != nil:
		allErrs = append(allErrs, field.Invalid(path.Child("server"), u.Redacted(),
			"must not carry credentials; use tokenFile"))
	}
	switch {
	case c.TokenFile == "" && c.Token == "":
		allErrs = append(allErrs, field.Required(path.Child("tokenFile"), "a file holding a bearer token"))
	case c.TokenFile != "" && c.Token != "":
		allErrs = append(allErrs, field.Forbidden(path.Child("token"), "cannot be combined with tokenFile"))
	}
	hasCA := c.CAFile != "" || len(c.CAData) > 0
	switch {
	case c.CAFile != "" && len(c.CAData) > 0:
		allErrs = append(allErrs, field.Forbidden(path.Child("caData"), "cannot be combined with caFile"))
	case hasCA && c.InsecureSkipTLSVerify:
		allErrs = append(allErrs, field.Forbidden(path.Child("insecureSkipTLSVerify"), "cannot be combined with caFile"))
	case !hasCA && !c.InsecureSkipTLSVerify:
		allErrs = append(allErrs, field.Required(path.Child("caFile"),
			"the CA bundle that signed the server's certificate (or insecureSkipTLSVerify, for test beds only)"))
	}
	if len(c.CAData) > 0 {
		// Checked here, not at the first request: a bad bundle is the Cluster's fault, named as such.
		if _, err := certutil.ParseCertsPEM(c.CAData); err != nil {
			allErrs = append(allErrs, field.Invalid(path.Child("caData"), "(PEM)", err.Error()))
		}
	}
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		switch {
		case err != nil:
			// As the server's: a proxy's userinfo is its password, which a bare "%" fails to parse.
			allErrs = append(allErrs, field.Invalid(path.Child("proxyURL"), redactURL(c.ProxyURL), "not a URL"))
		case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5" || u.Host == "":
			allErrs = append(allErrs, field.Invalid(path.Child("proxyURL"), u.Redacted(), "must be an http, https or socks5 URL with a host"))
		case u.Scheme == "socks5" && len(c.ProxyHeader) > 0:
			allErrs = append(allErrs, field.Forbidden(path.Child("proxyHeader"), "a socks5 proxy takes no headers: they are sent in an http or https proxy's CONNECT"))
		}
	} else if len(c.ProxyHeader) > 0 {
		allErrs = append(allErrs, field.Forbidden(path.Child("proxyHeader"), "needs proxyURL: the headers are sent to the proxy"))
	}
	allErrs = append(allErrs, validateProxyHeader(c.ProxyHeader, path.Child("proxyHeader"))...)
	return allErrs
}

// validateProxyHeader checks names and values as HTTP defines them. A value is never echoed: a
// proxy header is often a credential (Proxy-Authorization), and errors end up in logs and /status.
func validateProxyHeader(h http.Header, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := slices.Sorted(maps.Keys(h))
	for _, name := range names {
		if !httpguts.ValidHeaderFieldName(name) {
			allErrs = append(allErrs, field.Invalid(path.Key(name), "(value hidden)", "not a valid HTTP header name"))
			continue
		}
		for _, v := range h[name] {
			if !httpguts.ValidHeaderFieldValue(v) {
				allErrs = append(allErrs, field.Invalid(path.Key(name), "(value hidden)", "a value holds a character HTTP headers cannot carry (a control character or line break)"))
				break
			}
		}
	}
	return allErrs
}

// ClustersFromKubeconfig makes a cluster of every context of a kubeconfig file, named after the
// context, sorted by name. Context names must be DNS labels (cloud providers' generated names often
// are not: list such clusters in a clusters file instead). Every context must name a cluster the file
// defines.
func ClustersFromKubeconfig(path string) ([]Cluster, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("clusters from kubeconfig: %w", err)
	}
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("clusters from kubeconfig %s: no contexts", path)
	}
	var (
		clusters []Cluster
		errs     []error
	)
	for _, name := range names {
		ctx := cfg.Contexts[name]
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("context %q cannot name a cluster: %s", name, msgs[0]))
			continue
		}
		if _, ok := cfg.Clusters[ctx.Cluster]; !ok {
			errs = append(errs, fmt.Errorf("context %q: cluster %q is not defined", name, ctx.Cluster))
			continue
		}
		clusters = append(clusters, Cluster{Name: name, Kubeconfig: path, Context: name})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("clusters from kubeconfig %s:\n%w", path, err)
	}
	return clusters, nil
}

// RESTConfig builds the client configuration for the cluster. Rate limits and the user agent are
// left to the caller. Files are checked here so that a missing one is reported with the cluster's
// name before any request is made.
func (c Cluster) RESTConfig() (*rest.Config, error) {
	if errs := validateCluster(&c, field.NewPath("cluster")); len(errs) > 0 {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, errs.ToAggregate())
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			return nil, fmt.Errorf("cluster %q: kubeconfig: %w", c.Name, err)
		}
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: c.Context})
		cfg, err := loader.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("cluster %q: kubeconfig %s: %w", c.Name, c.Kubeconfig, err)
		}
		return cfg, nil
	}
	if c.TokenFile != "" {
		if _, err := os.Stat(c.TokenFile); err != nil {
			return nil, fmt.Errorf("cluster %q: token file: %w", c.Name, err)
		}
	}
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			return nil, fmt.Errorf("cluster %q: CA file: %w", c.Name, err)
		}
	}
	cfg := &rest.Config{
		Host:            c.Server,
		BearerToken:     c.Token,
		BearerTokenFile: c.TokenFile,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   c.CAFile,
			CAData:   c.CAData,
			Insecure: c.InsecureSkipTLSVerify,
		},
	}
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL) // validated above
		if err != nil {
			return nil, fmt.Errorf("cluster %q: proxy URL %s: not a URL", c.Name, redactURL(c.ProxyURL))
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	if len(c.ProxyHeader) > 0 {
		cfg.Wrap(proxyConnectHeader(c.Name, c.ProxyHeader.Clone()))
	}
	return cfg, nil
}

// proxyConnectHeader puts h on the CONNECT requests of the transport client-go builds for the
// member. rest.Config has no field for it; its WrapTransport sees the *http.Transport itself, which
// is the member's own (client-go never shares a transport whose config has a Proxy), so it is set
// once, before the transport's first request.
func proxyConnectHeader(cluster string, h http.Header) transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		t, ok := rt.(*http.Transport)
		if !ok {
			return failingTransport{fmt.Errorf("cluster %q: proxyHeader: the member's transport is a %T, not an *http.Transport: its CONNECT headers cannot be set", cluster, rt)}
		}
		t.ProxyConnectHeader = h.Clone() // one map per transport: a config may build several
		return t
	}
}

// failingTransport answers every request with err: a member that cannot be reached as configured
// fails loudly (in its status) rather than reaching its proxy without the headers it requires.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// sameConnection reports whether a and b reach their cluster the same way.
func sameConnection(a, b Cluster) bool {
	return a.Kubeconfig == b.Kubeconfig && a.Context == b.Context && a.Server == b.Server &&
		a.CAFile == b.CAFile && a.TokenFile == b.TokenFile && a.InsecureSkipTLSVerify == b.InsecureSkipTLSVerify &&
		bytes.Equal(a.CAData, b.CAData) && a.Token == b.Token && a.ProxyURL == b.ProxyURL &&
		maps.EqualFunc(a.ProxyHeader, b.ProxyHeader, slices.Equal)
}
