//go:build e2e

package e2e

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestKafkaTLSAndSASL runs the whole pipeline through the test bed broker's SASL_SSL listener, each
// component with another mechanism — the collector with PLAIN, the indexer with SCRAM-SHA-512, the
// query API with SCRAM-SHA-256 — every credential from a file, the broker's certificate checked
// against the test bed's CA: objects are searchable (collector → indexer), the facade discovers them
// (the query API reads the ledger) and a watch delivers a change (it follows the topic). A wrong
// password is refused by the broker and said so in the component's log, without the password.
func TestKafkaTLSAndSASL(t *testing.T) {
	env := testbed.Get(t)
	if len(env.KafkaSecure) == 0 {
		t.Skip("the test bed's Kafka has no SASL_SSL listener (external services)")
	}
	dir := t.TempDir()
	scram := func(mechanism kafka.ScramMechanism, h func() hash.Hash, size int) (userFile, passwordFile string) {
		user := uniqueName(fmt.Sprintf("ks-scram-%d", mechanism))
		password, salt := make([]byte, 16), make([]byte, 16)
		_, _ = rand.Read(password)
		_, _ = rand.Read(salt)
		secret := hex.EncodeToString(password)
		salted, err := pbkdf2.Key(h, secret, salt, 4096, size)
		if err != nil {
			t.Fatal(err)
		}
		client := &kafka.Client{Addr: kafka.TCP(env.KafkaBrokers...), Timeout: 30 * time.Second}
		resp, err := client.AlterUserScramCredentials(t.Context(), &kafka.AlterUserScramCredentialsRequest{
			Upsertions: []kafka.UserScramCredentialsUpsertion{{Name: user, Mechanism: mechanism, Iterations: 4096, Salt: salt, SaltedPassword: salted}}})
		if err == nil && len(resp.Results) == 1 {
			err = resp.Results[0].Error
		}
		if err != nil {
			t.Fatalf("create SCRAM user %s: %v", user, err)
		}
		userFile, passwordFile = filepath.Join(dir, user+".user"), filepath.Join(dir, user+".password")
		writeFile(t, userFile, user)
		writeFile(t, passwordFile, secret)
		return userFile, passwordFile
	}
	user512, pass512 := scram(kafka.ScramMechanismSha512, sha512.New, sha512.Size)
	user256, pass256 := scram(kafka.ScramMechanismSha256, sha256.New, sha256.Size)
	secure := func(mechanism, userFile, passwordFile string) []string {
		return []string{"--kafka-brokers", strings.Join(env.KafkaSecure, ","), "--kafka-ca-file", env.KafkaCAFile,
			"--kafka-sasl-mechanism", mechanism, "--kafka-username-file", userFile, "--kafka-password-file", passwordFile}
	}

	member := env.Clusters[0]
	ns := uniqueName("kafka-sasl")
	env.KubectlRun(t, member, []byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %[1]s}\ndata: {k: v}\n", ns)), "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = env.KubectlOutput(context.Background(), member, nil, "delete", "namespace", ns, "--wait=false")
	})
	registry := filepath.Join(dir, "registry.yaml")
	writeFile(t, registry, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: sasl}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap, namespace: %s}
`, member, ns))
	topic, prefix := uniqueName("sasl"), uniqueName("sasl")
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})

	indexerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "indexer", append([]string{"indexer", "--topic", topic, "--group", topic + "-indexer",
		"--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix, "--listen", indexerAddr,
		"--batch-interval", "100ms", "--watermark-interval", "500ms"}, secure("scram-sha-512", user512, pass512)...)...)
	collectorAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "collector", append([]string{"collector", "--registry", registry, "--kubeconfig", env.Kubeconfig,
		"--topic", topic, "--listen", collectorAddr, "--name", topic},
		secure("plain", env.KafkaPlainUsernameFile, env.KafkaPlainPasswordFile)...)...)
	waitHTTP(t, "http://"+collectorAddr+"/readyz", 2*time.Minute)
	waitHTTP(t, "http://"+indexerAddr+"/readyz", 2*time.Minute)
	queryAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "queryapi", append([]string{"queryapi", "--anonymous", "--listen", queryAddr,
		"--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix, "--topic", topic,
		"--indexer-group", topic + "-indexer"}, secure("scram-sha-256", user256, pass256)...)...)
	base := "http://" + queryAddr
	waitHTTP(t, base+"/readyz", 2*time.Minute)

	eventually(t, "the ConfigMap searchable (collector and indexer over SASL_SSL)", time.Minute, func() bool {
		a := get(t, base, "/v1alpha1/search", url.Values{"resources": {"configmaps"}, "namespaces": {ns}, "names": {"settings"}})
		return a.code == 200 && a.result.Total == 1
	})
	dyn := dynamic.NewForConfigOrDie(&rest.Config{Host: base})
	var list string
	eventually(t, "the facade lists the ConfigMap (the query API read the ledger over SASL_SSL)", time.Minute, func() bool {
		l, err := dyn.Resource(gvrConfigMaps).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 2 { // settings and kube-root-ca.crt
			return false
		}
		list = l.GetResourceVersion()
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := dyn.Resource(gvrConfigMaps).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list})
	if err != nil {
		t.Fatalf("watch through the facade: %v", err)
	}
	defer w.Stop()
	env.KubectlRun(t, member, nil, "create", "configmap", "later", "-n", ns)
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Added && o.GetName() == "later" {
			cancel()
			break
		}
	}
	if ctx.Err() != context.Canceled {
		t.Fatal("the watch (the query API following the topic over SASL_SSL) never delivered the new ConfigMap")
	}

	// A wrong password: the broker refuses it, and the log says so without the password.
	wrong := filepath.Join(dir, "wrong-password")
	writeFile(t, wrong, "not-the-password-"+topic)
	bad := startProcess(t, "indexer", append([]string{"indexer", "--topic", topic, "--group", topic + "-bad",
		"--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t))},
		secure("scram-sha-512", user512, wrong)...)...)
	eventually(t, "the refused SASL authentication logged", 45*time.Second, func() bool {
		out := strings.ToLower(bad.output())
		return strings.Contains(out, "sasl") && strings.Contains(out, "auth")
	})
	if strings.Contains(bad.output(), "not-the-password-"+topic) {
		t.Error("the indexer logged the password it was given")
	}
}
