package registry

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kubesearch/kubesearch/internal/testproxy"
)

func TestLoadClusters(t *testing.T) {
	clusters, err := LoadClusters("testdata/clusters/clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join("testdata", "clusters", "kubeconfig")
	want := []Cluster{
		{Name: "member1", Labels: map[string]string{"env": "prod", "topology.kubernetes.io/region": "eu-west-1"},
			Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Kubeconfig: kubeconfig, Context: "member1"},
		{Name: "member2", Labels: map[string]string{"env": "staging"}, Provider: "aws", Region: "us-east-1",
			Kubeconfig: kubeconfig, Context: "member2"},
		{Name: "member3", Labels: map[string]string{"env": "prod"}, Provider: "gcp", Region: "europe-west1",
			Kubeconfig: kubeconfig, Context: "member3"},
		{Name: "member4", Server: "https://10.0.0.4:6443",
			CAFile: filepath.Join("testdata", "clusters", "ca.crt"), TokenFile: filepath.Join("testdata", "clusters", "token")},
	}
	if !reflect.DeepEqual(clusters, want) {
		t.Errorf("LoadClusters:\n got %+v\nwant %+v", clusters, want)
	}
}

func TestLoadClustersErrors(t *testing.T) {
	const ok = "- name: ok\n  kubeconfig: kc\n"
	tests := []struct {
		name string
		file string
		want []string
	}{
		{name: "no way to reach it", file: ok + "- name: b\n  kubeconfig: kc\n- name: c\n",
			want: []string{`clusters[2].server: Required value: reach the cluster through kubeconfig (and context), or server with caFile and tokenFile`}},
		{name: "both ways", file: "- name: a\n  kubeconfig: kc\n  server: https://x\n  tokenFile: t\n",
			want: []string{
				`clusters[0].server: Forbidden: cannot be combined with kubeconfig`,
				`clusters[0].tokenFile: Forbidden: cannot be combined with kubeconfig`,
			}},
		{name: "context without kubeconfig", file: "- name: a\n  context: a\n",
			want: []string{`clusters[0].kubeconfig: Required value: context needs the kubeconfig it belongs to`}},
		{name: "plain http", file: "- name: a\n  server: http://10.0.0.1:8080\n  tokenFile: t\n  caFile: ca\n",
			want: []string{`clusters[0].server: Invalid value: "http://10.0.0.1:8080": must be an https URL with a host`}},
		{name: "credentials in the server URL", file: "- name: a\n  server: https://admin:pw@10.0.0.1\n  tokenFile: t\n  caFile: ca\n",
			want: []string{`clusters[0].server: Invalid value: "https://admin:xxxxx@10.0.0.1": must not carry credentials`}},
		{name: "no token, no CA", file: "- name: a\n  server: https://10.0.0.1\n",
			want: []string{`clusters[0].tokenFile: Required value`, `clusters[0].caFile: Required value`}},
		{name: "CA and insecure", file: "- name: a\n  server: https://10.0.0.1\n  tokenFile: t\n  caFile: ca\n  insecureSkipTLSVerify: true\n",
			want: []string{`clusters[0].insecureSkipTLSVerify: Forbidden: cannot be combined with caFile`}},
		{name: "insecure alone is allowed", file: "- name: a\n  server: https://10.0.0.1\n  tokenFile: t\n  insecureSkipTLSVerify: true\n"},
		{name: "names", file: "- kubeconfig: kc\n- name: Member_1\n  kubeconfig: kc\n- name: ok\n  kubeconfig: kc\n" + ok,
			want: []string{
				`clusters[0].name: Required value`,
				`clusters[1].name: Invalid value: "Member_1": a lowercase RFC 1123 label`,
				`clusters[3].name: Duplicate value: "ok"`,
			}},
		{name: "labels", file: "- name: a\n  kubeconfig: kc\n  labels: {bad key: x}\n",
			want: []string{`clusters[0].labels: Invalid value: "bad key"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"clusters.yaml": "clusters:\n" + tt.file})
			clusters, err := LoadClusters(filepath.Join(dir, "clusters.yaml"))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadClusters = %+v, want an error", clusters)
			}
			lines := errorLines(err)
			if !strings.HasPrefix(lines[0], "load clusters ") {
				t.Errorf("first line %q does not name the file", lines[0])
			}
			assertPrefixes(t, lines[1:], tt.want)
		})
	}
}

func TestLoadClustersStrict(t *testing.T) {
	dir := writeFiles(t, map[string]string{"c.yaml": "clusters:\n- name: a\n  kubeConfig: kc\n"})
	_, err := LoadClusters(filepath.Join(dir, "c.yaml"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "clusters[0].kubeConfig"`) {
		t.Errorf("LoadClusters error = %v, want the unknown field named", err)
	}
}

func TestLoadClustersKeepsAbsolutePaths(t *testing.T) {
	dir := writeFiles(t, map[string]string{"c.yaml": "clusters:\n- name: a\n  kubeconfig: /etc/kubeconfig\n"})
	clusters, err := LoadClusters(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if clusters[0].Kubeconfig != "/etc/kubeconfig" {
		t.Errorf("Kubeconfig = %q", clusters[0].Kubeconfig)
	}
}

func TestClustersFromKubeconfig(t *testing.T) {
	path := "testdata/clusters/kubeconfig"
	clusters, err := ClustersFromKubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Cluster{
		{Name: "member1", Kubeconfig: path, Context: "member1"},
		{Name: "member2", Kubeconfig: path, Context: "member2"},
		{Name: "member3", Kubeconfig: path, Context: "member3"},
	}
	if !reflect.DeepEqual(clusters, want) {
		t.Errorf("ClustersFromKubeconfig:\n got %+v\nwant %+v", clusters, want)
	}
}

func TestClustersFromKubeconfigErrors(t *testing.T) {
	tests := []struct {
		name       string
		kubeconfig string
		want       []string
	}{
		{name: "context names that cannot name a cluster and a missing cluster", kubeconfig: `apiVersion: v1
kind: Config
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:6443"}}
contexts:
- {name: gke_project_europe-west1_prod, context: {cluster: c}}
- {name: ok, context: {cluster: c}}
- {name: orphan, context: {cluster: gone}}
`, want: []string{
			`context "gke_project_europe-west1_prod" cannot name a cluster: a lowercase RFC 1123 label`,
			`context "orphan": cluster "gone" is not defined`,
		}},
		{name: "no contexts", kubeconfig: "apiVersion: v1\nkind: Config\n", want: []string{"no contexts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"kubeconfig": tt.kubeconfig})
			_, err := ClustersFromKubeconfig(filepath.Join(dir, "kubeconfig"))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := ClustersFromKubeconfig("testdata/clusters/missing"); err == nil {
		t.Error("missing kubeconfig: want an error")
	}
}

func TestRESTConfig(t *testing.T) {
	kubeconfig := "testdata/clusters/kubeconfig"
	ca, err := filepath.Abs("testdata/clusters/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := certutil.GenerateSelfSignedCertKey("member", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cluster Cluster
		want    func(t *testing.T, c *rest.Config)
	}{
		{name: "kubeconfig context with an inline token", cluster: Cluster{Name: "member1", Kubeconfig: kubeconfig, Context: "member1"},
			want: func(t *testing.T, c *rest.Config) {
				if c.Host != "https://127.0.0.1:6441" || c.BearerToken != "token-of-member1" || c.CAFile != ca {
					t.Errorf("got host %q token %q CA %q", c.Host, c.BearerToken, c.CAFile)
				}
			}},
		{name: "kubeconfig context with a token file", cluster: Cluster{Name: "member2", Kubeconfig: kubeconfig, Context: "member2"},
			want: func(t *testing.T, c *rest.Config) {
				if c.Host != "https://127.0.0.1:6442" || !strings.HasSuffix(c.BearerTokenFile, "testdata/clusters/token") {
					t.Errorf("got host %q token file %q", c.Host, c.BearerTokenFile)
				}
			}},
		{name: "kubeconfig context with basic auth, insecure", cluster: Cluster{Name: "member3", Kubeconfig: kubeconfig, Context: "member3"},
			want: func(t *testing.T, c *rest.Config) {
				if c.Host != "https://127.0.0.1:6443" || !c.Insecure || c.Username != "admin" {
					t.Errorf("got host %q insecure %v user %q", c.Host, c.Insecure, c.Username)
				}
			}},
		{name: "kubeconfig without context uses the current one", cluster: Cluster{Name: "x", Kubeconfig: kubeconfig},
			want: func(t *testing.T, c *rest.Config) {
				if c.Host != "https://127.0.0.1:6442" {
					t.Errorf("got host %q, want member2's", c.Host)
				}
			}},
		{name: "server, CA and token file", cluster: Cluster{Name: "member4", Server: "https://10.0.0.4:6443",
			CAFile: "testdata/clusters/ca.crt", TokenFile: "testdata/clusters/token"},
			want: func(t *testing.T, c *rest.Config) {
				want := &rest.Config{Host: "https://10.0.0.4:6443", BearerTokenFile: "testdata/clusters/token",
					TLSClientConfig: rest.TLSClientConfig{CAFile: "testdata/clusters/ca.crt"}}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got %+v\nwant %+v", c, want)
				}
			}},
		{name: "server, insecure", cluster: Cluster{Name: "m", Server: "https://10.0.0.4:6443",
			TokenFile: "testdata/clusters/token", InsecureSkipTLSVerify: true},
			want: func(t *testing.T, c *rest.Config) {
				if !c.Insecure || c.CAFile != "" {
					t.Errorf("got insecure %v CA %q", c.Insecure, c.CAFile)
				}
			}},
		{name: "server, CA and token in memory, proxy", cluster: Cluster{Name: "m", Server: "https://10.0.0.4:6443",
			CAData: caPEM, Token: "t0k3n", ProxyURL: "http://proxy:3128"},
			want: func(t *testing.T, c *rest.Config) {
				if c.BearerToken != "t0k3n" || c.BearerTokenFile != "" || string(c.CAData) != string(caPEM) || c.CAFile != "" || c.Proxy == nil {
					t.Fatalf("got token %q token file %q CA data %d bytes CA file %q proxy set %v", c.BearerToken, c.BearerTokenFile,
						len(c.CAData), c.CAFile, c.Proxy != nil)
				}
				u, err := c.Proxy(&http.Request{URL: &url.URL{Scheme: "https", Host: "10.0.0.4:6443"}})
				if err != nil || u.String() != "http://proxy:3128" {
					t.Errorf("proxy = %v, %v; want http://proxy:3128", u, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cluster.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			tt.want(t, c)
		})
	}
}

func TestRESTConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cluster Cluster
		want    string
	}{
		{name: "unknown context", cluster: Cluster{Name: "m", Kubeconfig: "testdata/clusters/kubeconfig", Context: "member9"},
			want: `cluster "m": kubeconfig testdata/clusters/kubeconfig: context "member9" does not exist`},
		{name: "missing kubeconfig", cluster: Cluster{Name: "m", Kubeconfig: "testdata/clusters/missing"},
			want: `cluster "m": kubeconfig: stat testdata/clusters/missing: no such file or directory`},
		{name: "missing token file", cluster: Cluster{Name: "m", Server: "https://x", CAFile: "testdata/clusters/ca.crt", TokenFile: "nope"},
			want: `cluster "m": token file: stat nope: no such file or directory`},
		{name: "missing CA file", cluster: Cluster{Name: "m", Server: "https://x", CAFile: "nope", TokenFile: "testdata/clusters/token"},
			want: `cluster "m": CA file: stat nope: no such file or directory`},
		{name: "no way to reach it", cluster: Cluster{Name: "m"},
			want: `cluster "m": cluster.server: Required value`},
		{name: "token and token file", cluster: Cluster{Name: "m", Server: "https://x", InsecureSkipTLSVerify: true, Token: "t", TokenFile: "testdata/clusters/token"},
			want: `cluster.token: Forbidden: cannot be combined with tokenFile`},
		{name: "CA data and CA file", cluster: Cluster{Name: "m", Server: "https://x", Token: "t", CAFile: "testdata/clusters/ca.crt", CAData: []byte("x")},
			want: `cluster.caData: Forbidden: cannot be combined with caFile`},
		{name: "CA data not PEM", cluster: Cluster{Name: "m", Server: "https://x", Token: "t", CAData: []byte("not a PEM")},
			want: `cluster.caData: Invalid value`},
		{name: "proxy not a URL of a proxy", cluster: Cluster{Name: "m", Server: "https://x", Token: "t", InsecureSkipTLSVerify: true, ProxyURL: "ftp://p"},
			want: `cluster.proxyURL: Invalid value: "ftp://p": must be an http, https or socks5 URL`},
		{name: "in-memory token beside a kubeconfig", cluster: Cluster{Name: "m", Kubeconfig: "testdata/clusters/kubeconfig", Token: "t"},
			want: `cluster.token: Forbidden: cannot be combined with kubeconfig`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cluster.RESTConfig()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RESTConfig error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestRESTConfigReachesServer makes a request with each kind of configuration to a TLS server that
// checks the bearer token, proving the CA and token files are used as intended.
func TestRESTConfigReachesServer(t *testing.T) {
	const token = "s3cret-token"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"gitVersion":"v1.37.2"}`)
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	tokenFile := filepath.Join(dir, "token")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	for name, content := range map[string]string{
		caFile:    string(caPEM),
		tokenFile: token + "\n",
		kubeconfig: fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- {name: test, cluster: {server: %q, certificate-authority: ca.crt}}
users:
- {name: reader, user: {tokenFile: token}}
contexts:
- {name: test, context: {cluster: test, user: reader}}
`, srv.URL),
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []Cluster{
		{Name: "direct", Server: srv.URL, CAFile: caFile, TokenFile: tokenFile},
		{Name: "through-kubeconfig", Kubeconfig: kubeconfig, Context: "test"},
	} {
		t.Run(c.Name, func(t *testing.T) {
			if err := getVersion(t, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// getVersion asks the cluster for /version with the client its RESTConfig makes.
func getVersion(t *testing.T, c Cluster) error {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+"/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

// A member behind a forward proxy that requires headers: the CONNECT carries spec.proxyHeader's
// headers (values split at commas, as Karmada does) and the member never sees them; without them the
// proxy's 407 is the error.
func TestRESTConfigThroughProxy(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get("X-Tenant") != "" {
			http.Error(w, "the proxy's headers reached the member", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"gitVersion":"v1.37.2"}`)
	}))
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	required := http.Header{"Proxy-Authorization": {"Basic a2FybWFkYTpzM2NyZXQ="}, "X-Tenant": {"blue", "green"}}
	proxy := testproxy.New(t, required)

	member := Cluster{Name: "m", Server: srv.URL, CAData: caPEM, Token: "t", ProxyURL: proxy.URL}
	if err := getVersion(t, member); err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
		t.Fatalf("without the headers: %v, want the proxy's 407", err)
	}
	member.ProxyHeader = required.Clone()
	if err := getVersion(t, member); err != nil {
		t.Fatalf("with the headers: %v", err)
	}
	connects, refused := proxy.Connects()
	if len(connects) != 2 || refused != 1 {
		t.Fatalf("%d CONNECTs, %d refused; want 2, 1", len(connects), refused)
	}
	if got := connects[1]; got.Get("Proxy-Authorization") != required.Get("Proxy-Authorization") || !slices.Equal(got.Values("X-Tenant"), []string{"blue", "green"}) {
		t.Errorf("CONNECT headers %v", got)
	}
}

func TestRESTConfigProxyHeaderErrors(t *testing.T) {
	base := Cluster{Name: "m", Server: "https://x", Token: "t", InsecureSkipTLSVerify: true}
	tests := []struct {
		name  string
		edit  func(c *Cluster)
		want  string
		never string // a value the error must not echo
	}{
		{"without a proxy", func(c *Cluster) { c.ProxyHeader = http.Header{"X-A": {"1"}} },
			"cluster.proxyHeader: Forbidden: needs proxyURL", ""},
		{"socks5", func(c *Cluster) { c.ProxyURL, c.ProxyHeader = "socks5://p:1080", http.Header{"X-A": {"1"}} },
			"cluster.proxyHeader: Forbidden: a socks5 proxy takes no headers", ""},
		{"bad name", func(c *Cluster) { c.ProxyURL, c.ProxyHeader = "http://p:3128", http.Header{"Bad Name": {"1"}} },
			`cluster.proxyHeader[Bad Name]: Invalid value: "(value hidden)": not a valid HTTP header name`, ""},
		{"line break in a value", func(c *Cluster) {
			c.ProxyURL, c.ProxyHeader = "http://p:3128", http.Header{"Proxy-Authorization": {"Basic s3cr3t\r\nX-Injected: 1"}}
		}, "cluster.proxyHeader[Proxy-Authorization]: Invalid value: \"(value hidden)\": a value holds a character", "s3cr3t"},
		{"beside a kubeconfig", func(c *Cluster) {
			*c = Cluster{Name: "m", Kubeconfig: "testdata/clusters/kubeconfig", ProxyHeader: http.Header{"X-A": {"1"}}}
		}, "cluster.proxyHeader: Forbidden: cannot be combined with kubeconfig", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			_, err := c.RESTConfig()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("RESTConfig error = %v, want one containing %q", err, tt.want)
			}
			if tt.never != "" && strings.Contains(err.Error(), tt.never) {
				t.Errorf("the error echoes the header's value: %v", err)
			}
		})
	}
}

// A proxy URL (or a server URL) that does not parse, or a server URL refused for its scheme, is
// named without its password. Unparsed, a URL is named without its text: its userinfo is
// often the proxy's password, and a password with a bare "%" is enough to fail the parse. The
// error ends up in logs and, for a Karmada Cluster, in the collector's status.
func TestRESTConfigUnparsedURLsHideCredentials(t *testing.T) {
	base := Cluster{Name: "m", Server: "https://x", Token: "t", InsecureSkipTLSVerify: true}
	for _, c := range []struct {
		name string
		edit func(c *Cluster)
		want string
	}{
		{"proxy URL", func(c *Cluster) { c.ProxyURL = "http://kube:pa%ss@proxy:3128" }, "cluster.proxyURL: Invalid value"},
		{"server", func(c *Cluster) { c.Server = "https://kube:pa%ss@x" }, "cluster.server: Invalid value"},
		{"plain http server", func(c *Cluster) { c.Server = "http://kube:pa%25ss@x" }, "cluster.server: Invalid value: \"http://kube:xxxxx@x\": must be an https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := base
			c.edit(&cl)
			_, err := cl.RESTConfig()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("RESTConfig error = %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "pa%ss") || strings.Contains(err.Error(), "pa%25ss") {
				t.Errorf("the error echoes the URL's password: %v", err)
			}
		})
	}
}

// A member whose proxy headers changed is reached another way: its clients, which carry the
// headers in their transports, are rebuilt (ClusterChange.Reconnect).
func TestSameConnectionProxyHeader(t *testing.T) {
	a := Cluster{Name: "m", Server: "https://x", Token: "t", InsecureSkipTLSVerify: true, ProxyURL: "http://p:3128",
		ProxyHeader: http.Header{"Proxy-Authorization": {"Basic YQ=="}, "X-Tenant": {"blue", "green"}}}
	for _, c := range []struct {
		name string
		h    http.Header
		same bool
	}{
		{"the same", http.Header{"X-Tenant": {"blue", "green"}, "Proxy-Authorization": {"Basic YQ=="}}, true},
		{"a value rotated", http.Header{"Proxy-Authorization": {"Basic Yg=="}, "X-Tenant": {"blue", "green"}}, false},
		{"values reordered", http.Header{"Proxy-Authorization": {"Basic YQ=="}, "X-Tenant": {"green", "blue"}}, false},
		{"a header removed", http.Header{"Proxy-Authorization": {"Basic YQ=="}}, false},
		{"none", nil, false},
	} {
		b := a
		b.ProxyHeader = c.h
		if got := sameConnection(a, b); got != c.same {
			t.Errorf("%s: sameConnection %v, want %v", c.name, got, c.same)
		}
	}
}
