package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KarmadaPlane is the test bed's "Karmada control plane" (karmada.sh): a kube-apiserver with
// the aggregation layer configured, whose front proxy presents a certificate of FrontProxyCA
// (common name front-proxy-client) to the aggregated API servers an APIService names.
type KarmadaPlane struct {
	// Kubeconfig reaches it as admin (system:masters), context karmada; Server is its URL.
	Kubeconfig, Server string
	// FrontProxyCA signs the aggregation layer's client certificate: an aggregated server's
	// --requestheader-client-ca-file.
	FrontProxyCA string
	// pki is the test bed's CA, whose client certificates the control plane authenticates.
	pki string
}

// Karmada starts the Karmada control plane on the test bed unless it runs already (a few
// seconds), and returns it.
func (e *Env) Karmada(t testing.TB) *KarmadaPlane {
	t.Helper()
	if e.Dir == "" {
		t.Fatal("testbed: the Karmada control plane needs the project's own test bed (tests/testbed/up.sh)")
	}
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(e.root, "tests/testbed/karmada.sh"))
	cmd.Env = append(os.Environ(), "KUBESEARCH_TESTBED_DIR="+e.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbed: karmada.sh: %v\n%s", err, out)
	}
	loaded, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	e.karmadaKubeconfig, e.karmadaFrontProxyCA = loaded.karmadaKubeconfig, loaded.karmadaFrontProxyCA
	cfg, err := clientcmd.LoadFromFile(e.karmadaKubeconfig)
	if err != nil {
		t.Fatalf("testbed: the Karmada control plane's kubeconfig: %v", err)
	}
	return &KarmadaPlane{Kubeconfig: e.karmadaKubeconfig, Server: cfg.Clusters["karmada"].Server,
		FrontProxyCA: e.karmadaFrontProxyCA, pki: filepath.Join(e.Dir, "pki")}
}

// UserKubeconfig writes a kubeconfig that reaches the control plane as user (groups its
// groups) with a client certificate of the test bed's CA, and returns its path.
func (p *KarmadaPlane) UserKubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(p.pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(p.pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if caBlock == nil || keyBlock == nil {
		t.Fatalf("testbed: %s holds no CA certificate and key", p.pki)
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()),
		Subject: pkix.Name{CommonName: user, Organization: groups}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["karmada"] = &clientcmdapi.Cluster{Server: p.Server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
	cfg.Contexts["karmada"] = &clientcmdapi.Context{Cluster: "karmada", AuthInfo: user}
	cfg.CurrentContext = "karmada"
	path := filepath.Join(t.TempDir(), fmt.Sprintf("karmada-%s.kubeconfig", user))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
