package packaging

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/testpki"
)

// testCA issues certificates into a folder (testpki's, written as the flags read them).
type testCA struct {
	*testpki.CA
	file string // the CA certificate, PEM
	dir  string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	ca := testpki.NewCA(t, name)
	return &testCA{CA: ca, file: writeTestFile(t, filepath.Join(dir, name+".crt"), ca.PEM), dir: dir}
}

// issue writes a certificate for cn, with usage, and its key.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	cert, key := testpki.PEM(t, ca.Issue(t, pkix.Name{CommonName: cn}, usage))
	return writeTestFile(t, filepath.Join(ca.dir, cn+".crt"), cert), writeTestFile(t, filepath.Join(ca.dir, cn+".key"), key)
}

func writeTestFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The Karmada mode's query API, run by the real binary with the config.yaml the chart renders (its
// files written where the test can: the same flags and values, other paths; Kafka and OpenSearch
// unreachable, which the API's authentication does not need), trusts the control plane's front
// proxy as the values say: a certificate of the front-proxy CA with an allowed name is the user its
// headers name, one of the same CA with another name is a 401, as is a request without one.
func TestChartKarmadaFrontProxy(t *testing.T) {
	bin := kubesearchBinary(t)
	objs := splitManifests(t, renderChart(t, karmadaValues()...))
	q := component(t, objs, "queryapi")
	data, problem := configFile(objs, q.pod, configMount+"/config.yaml")
	if problem != "" {
		t.Fatal(problem)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	frontProxy := newTestCA(t, dir, "front-proxy-ca")
	proxyCert, proxyKey := frontProxy.issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	otherCert, otherKey := frontProxy.issue(t, "not-the-front-proxy", x509.ExtKeyUsageClientAuth)
	serving := newTestCA(t, dir, "serving-ca")
	tlsCert, tlsKey := serving.issue(t, "queryapi", x509.ExtKeyUsageServerAuth) // for 127.0.0.1
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// The files of the mounts, here; what the control plane is never contacted for (the registries
	// are forwarded per request), and the backends out of reach.
	kubeconfig := filepath.Join(dir, "karmada.kubeconfig")
	writeKubeconfig(t, kubeconfig, "https://127.0.0.1:1")
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("a-direct-client-token,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	statusToken := filepath.Join(dir, "status-token")
	if err := os.WriteFile(statusToken, []byte("status"), 0o600); err != nil {
		t.Fatal(err)
	}
	for key, path := range map[string]string{"requestheader-client-ca-file": frontProxy.file, "tls-cert-file": tlsCert, "tls-private-key-file": tlsKey,
		"karmada-kubeconfig": kubeconfig, "token-auth-file": tokens, "collector-status-token-file": statusToken} {
		if _, ok := cfg[key]; !ok {
			t.Fatalf("rendered config.yaml has no %s", key)
		}
		cfg[key] = path
	}
	cfg["listen"] = addr
	cfg["kafka-brokers"] = []string{"127.0.0.1:1"}
	cfg["opensearch-addresses"] = []string{"http://127.0.0.1:1"}
	cfg["collector-status-urls"] = []string{"http://127.0.0.1:1/status"}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	cmd := exec.CommandContext(t.Context(), bin, "queryapi", "--config="+file)
	cmd.Env = []string{"HOME=" + dir}
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("kubesearch queryapi:\n%.4000s", log.String())
		}
	})

	pool := x509.NewCertPool()
	pool.AddCert(serving.Cert)
	client := func(certFile, keyFile string) *http.Client {
		c := &tls.Config{RootCAs: pool}
		if certFile != "" {
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			c.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
	}
	get := func(c *http.Client, path string, header map[string]string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Serving (over HTTPS, so with the rendered certificate flags) within a few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := get(client("", ""), "/healthz", nil)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz over HTTPS: %d, %v", code, err)
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("kubesearch queryapi --config <the rendered config.yaml> exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}

	proxied := map[string]string{"X-Remote-User": "alice", "X-Remote-Group": "sre"}
	for _, tc := range []struct {
		name      string
		cert, key string
		header    map[string]string
		want      int
	}{
		{"the front proxy naming a user", proxyCert, proxyKey, proxied, http.StatusOK},
		{"another certificate of the front-proxy CA", otherCert, otherKey, proxied, http.StatusUnauthorized},
		{"no certificate, the same headers", "", "", proxied, http.StatusUnauthorized},
		{"a direct client's token", "", "", map[string]string{"Authorization": "Bearer a-direct-client-token"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, err := get(client(tc.cert, tc.key), "/apis", tc.header)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("GET /apis: %d, want %d", code, tc.want)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig of one cluster at server, with a token.
func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	data := "apiVersion: v1\nkind: Config\nclusters:\n- name: karmada\n  cluster: {server: " + server + ", insecure-skip-tls-verify: true}\n" +
		"users:\n- name: kubesearch\n  user: {token: not-used}\ncontexts:\n- name: karmada\n  context: {cluster: karmada, user: kubesearch}\ncurrent-context: karmada\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
