//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestSecurity locks `kubesearch standalone` down (no anonymous access, tokens from a file, a
// policy) over two members, and checks that a user allowed one namespace of one cluster sees
// exactly that through REST search, facets, totals, the fleet status, discovery and kubectl in every
// view, watch included — and that a request wholly outside the scope is a 403, whether or not
// anything exists there.
func TestSecurity(t *testing.T) {
	env := testbed.Get(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	nsA, nsB := "sec-a-"+suffix, "sec-b-"+suffix
	members := env.Clusters[:2]
	seedSettings(t, env, members, nsA, nsB)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, "alice-token-"+suffix+",alice,1001,\"shop-team\"\nbob-token-"+suffix+",bob,1002,\ncarol-token-"+suffix+",carol,1004,\ndave-token-"+suffix+",dave,1005,\nadmin-token-"+suffix+",root,1003,\"sre\"\n")
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, fmt.Sprintf(`rules:
- subjects: [{kind: User, name: alice}, {kind: User, name: bob}, {kind: User, name: dave}]
  clusters: [%s]
  namespaces: [%s]
  resources: [configmaps, deployments.apps]
  verbs: [get, list, watch]
- subjects: [{kind: ServiceAccount, namespace: %[2]s, name: reader}]
  clusters: [%[3]s]
  namespaces: [%[2]s]
  resources: [configmaps]
  verbs: [list]
- subjects: [{kind: Group, name: sre}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verbs: ["*"]
`, members[0], nsA, members[1]))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, members)
	// member1's TokenReview API checks the tokens the file does not know: its ServiceAccounts'.
	reviewer := filepath.Join(dir, "reviewer.kubeconfig")
	writeKubeconfig(t, env, reviewer, members[:1])
	// HTTPS: kubectl sends no bearer token over plain HTTP.
	caFile, certFile, keyFile, pool := servingCertificate(t, dir)
	// Client certificates: alice's (CN alice, O shop-team) from the CA the server trusts, and one
	// for alice from a CA it does not.
	clientCA, aliceCert, aliceKey := clientCertificate(t, filepath.Join(dir, "clients"), "alice", "shop-team")
	_, strangerCert, strangerKey := clientCertificate(t, filepath.Join(dir, "strangers"), "alice", "shop-team")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--anonymous=false", "--token-auth-file", tokens, "--authorization-policy-file", policy,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--rate-limit", "20", "--rate-burst", "20",
		"--authentication-kubeconfig", reviewer, "--client-ca-file", clientCA)
	waitReadyz(t, client, base)

	as := func(token string) func(path string, params url.Values) (int, answer) {
		return authedGet(t, client, base, token)
	}
	alice, bob, carol, root := as("alice-token-"+suffix), as("bob-token-"+suffix), as("carol-token-"+suffix), as("admin-token-"+suffix)
	both := url.Values{"resources": {"configmaps"}, "namespaces": {nsA + "," + nsB}, "facets": {"cluster,namespace"}}
	eventually(t, "every member's ConfigMaps indexed", 2*time.Minute, func() bool {
		_, a := root("/v1alpha1/search", both)
		return a.code == 200 && a.result.Total == 2*2*3 // settings, flags, kube-root-ca.crt
	})

	t.Run("credentials", func(t *testing.T) {
		if code, a := as("")("/v1alpha1/search", both); code != 401 || a.status.Reason != "Unauthorized" {
			t.Errorf("no token: %d %s, want a 401 Status", code, a.raw)
		}
		if code, _ := as("forged-"+suffix)("/v1alpha1/search", both); code != 401 {
			t.Errorf("forged token: %d, want 401", code)
		}
		if code, _ := as("")("/api/v1/configmaps", nil); code != 401 {
			t.Errorf("facade without a token: %d, want 401", code)
		}
	})

	t.Run("REST search, facets and totals in scope", func(t *testing.T) {
		code, a := alice("/v1alpha1/search", both)
		if code != 200 || a.result.Total != 3 {
			t.Fatalf("alice: %d, total %d, want 200 and her namespace's 3 ConfigMaps: %.300s", code, a.result.Total, a.raw)
		}
		for _, raw := range a.result.Items {
			if it := itemOf(t, raw); it.cluster != members[0] || it.namespace != nsA {
				t.Errorf("alice sees %s/%s/%s", it.cluster, it.namespace, it.name)
			}
		}
		for _, f := range a.result.Facets {
			for _, b := range f.Buckets {
				if b.Value != members[0] && b.Value != nsA {
					t.Errorf("facet %s has bucket %v (%d) outside alice's scope", f.Name, b.Value, b.Count)
				}
			}
		}
		// A page boundary is the scope's: limit 1 pages through her 3 objects only.
		page := url.Values{"resources": {"configmaps"}, "limit": {"1"}}
		_, first := alice("/v1alpha1/search", page)
		if first.result.Total != 3 || first.result.Metadata.Continue == "" {
			t.Fatalf("alice's first page: total %d, continue %q", first.result.Total, first.result.Metadata.Continue)
		}
		next := url.Values{"resources": {"configmaps"}, "limit": {"1"}, "continue": {first.result.Metadata.Continue}}
		// Bob has the same grants as alice: her token is still not his.
		if code, a := bob("/v1alpha1/search", next); code != 400 {
			t.Errorf("bob with alice's continue token: %d %s, want 400", code, a.raw)
		}
		if code, _ := alice("/v1alpha1/search", next); code != 200 {
			t.Errorf("alice with her own token: %d", code)
		}
		// Carol has no rule: a request naming what she may not see is a 403, and one naming
		// nothing finds nothing.
		if _, a := carol("/v1alpha1/search", url.Values{"resources": {"configmaps"}}); a.code != 403 {
			t.Errorf("carol, resources=configmaps: %d, want 403", a.code)
		}
		if _, a := carol("/v1alpha1/search", url.Values{"q": {"settings"}}); a.code != 200 || a.result.Total != 0 {
			t.Errorf("carol, q=settings: %d, total %d, want 200 and nothing", a.code, a.result.Total)
		}
	})

	t.Run("a member's ServiceAccount token through TokenReview", func(t *testing.T) {
		env.KubectlRun(t, members[0], nil, "create", "serviceaccount", "reader", "-n", nsA)
		token := strings.TrimSpace(string(env.KubectlRun(t, members[0], nil, "create", "token", "reader", "-n", nsA)))
		reader := as(token)
		code, a := reader("/v1alpha1/search", url.Values{"resources": {"configmaps"}})
		if code != 200 || a.result.Total != 3 {
			t.Fatalf("the ServiceAccount's search: %d, total %d: %.300s", code, a.result.Total, a.raw)
		}
		for _, raw := range a.result.Items {
			if it := itemOf(t, raw); it.cluster != members[1] || it.namespace != nsA {
				t.Errorf("the ServiceAccount sees %s/%s/%s", it.cluster, it.namespace, it.name)
			}
		}
		// Expired: the same claims with exp in the past, signed with the member's own key, are
		// refused; re-signed with exp in the future they are accepted (so it is the expiry).
		if env.Dir != "" {
			resigned := func(exp time.Time) string {
				return resignToken(t, filepath.Join(env.Dir, members[0], "sa.key"), token, exp)
			}
			if code, a := as(resigned(time.Now().Add(time.Hour)))("/v1alpha1/search", url.Values{"resources": {"configmaps"}}); code != 200 {
				t.Errorf("the token re-signed with a later expiry: %d %.200s, want 200 (the test's signing is wrong)", code, a.raw)
			}
			if code, _ := as(resigned(time.Now().Add(-time.Minute)))("/v1alpha1/search", url.Values{"resources": {"configmaps"}}); code != 401 {
				t.Errorf("an expired ServiceAccount token: %d, want 401", code)
			}
		}
		// Deleting the ServiceAccount revokes its token: after the positive cache (10 s), 401.
		env.KubectlRun(t, members[0], nil, "delete", "serviceaccount", "reader", "-n", nsA)
		eventually(t, "the revoked token refused", 30*time.Second, func() bool {
			code, _ := reader("/v1alpha1/search", url.Values{"resources": {"configmaps"}})
			return code == 401
		})
	})

	t.Run("client certificates through kubectl", func(t *testing.T) {
		k := facadeKubectlWithCert(t, env, base, caFile, aliceCert, aliceKey)
		got := rows(k.mustRun(t, "get", "configmaps", "-A", "--no-headers"))
		if len(got) != 3 {
			t.Errorf("kubectl get configmaps -A with alice's certificate: %v, want her 3", got)
		}
		for _, r := range got {
			if r[0] != nsA || r[1] != members[0] {
				t.Errorf("alice's certificate sees %v", r)
			}
		}
		// The same subject from a CA the server does not trust: the TLS handshake fails.
		stranger := &facadeKubectl{env: env, kubeconfig: k.kubeconfig}
		out, err := stranger.run(t.Context(), "--client-certificate", strangerCert, "--client-key", strangerKey, "get", "configmaps", "-n", nsA)
		if err == nil || !strings.Contains(err.Error(), "tls:") {
			t.Errorf("kubectl with a certificate of another CA: %v %s, want a TLS failure", err, out)
		}
	})

	t.Run("wholly outside the scope is 403, existing or not", func(t *testing.T) {
		for _, q := range []url.Values{
			{"namespaces": {nsB}},
			{"namespaces": {"no-such-namespace-" + suffix}},
			{"clusters": {members[1]}},
			{"clusters": {"no-such-cluster"}},
			{"resources": {"pods"}},
		} {
			code, a := alice("/v1alpha1/search", q)
			if code != 403 || a.status.Reason != "Forbidden" {
				t.Errorf("alice ?%s: %d %.200s, want a 403 Status", q.Encode(), code, a.raw)
			}
		}
	})

	t.Run("fleet status", func(t *testing.T) {
		_, a := alice("/v1alpha1/fleet", nil)
		var fleet struct {
			Items []struct{ Cluster, Group, Resource string } `json:"items"`
		}
		if err := json.Unmarshal(a.raw, &fleet); err != nil || len(fleet.Items) == 0 {
			t.Fatalf("alice's fleet status: %v %.300s", err, a.raw)
		}
		for _, p := range fleet.Items {
			if p.Cluster != members[0] || (p.Resource != "configmaps" && p.Resource != "deployments") {
				t.Errorf("alice's fleet status shows %s/%s/%s", p.Cluster, p.Group, p.Resource)
			}
		}
	})

	t.Run("429 for a subject past its rate, while another is served", func(t *testing.T) {
		codes := make(chan int, 60)
		var wg sync.WaitGroup
		for range 60 {
			wg.Go(func() {
				code, _ := carol("/v1alpha1/search", url.Values{"q": {"settings"}})
				codes <- code
			})
		}
		wg.Wait()
		close(codes)
		n := map[int]int{}
		for c := range codes {
			n[c]++
		}
		if n[429] < 30 || n[200]+n[429] != 60 {
			t.Errorf("60 requests at once from carol: %v, want at least 30 of 429 and the rest 200", n)
		}
		if code, _ := alice("/v1alpha1/search", url.Values{"resources": {"configmaps"}}); code != 200 {
			t.Errorf("alice while carol is throttled: %d, want 200", code)
		}
	})

	t.Run("a client-go informer across namespaces holds the scope", func(t *testing.T) {
		caPEM, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &rest.Config{Host: base, BearerToken: "alice-token-" + suffix, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
		factory := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0)
		inf := factory.ForResource(gvrConfigMaps).Informer()
		ctx, cancel := context.WithCancel(t.Context())
		defer func() {
			cancel()
			factory.Shutdown()
		}()
		factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("alice's informer never synced")
		}
		keys := inf.GetStore().ListKeys()
		slices.Sort(keys)
		want := []string{nsA + "/flags", nsA + "/kube-root-ca.crt", nsA + "/settings"}
		if !slices.Equal(keys, want) {
			t.Errorf("alice's informer holds %v, want %v", keys, want)
		}
	})

	t.Run("kubectl auth can-i and whoami answer the subject's reads, and no writes", func(t *testing.T) {
		k := facadeKubectlAs(t, env, base, caFile, "alice-token-"+suffix)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "configmaps", "-n", nsA}, "yes"},
			{[]string{"watch", "deployments.apps", "-n", nsA}, "yes"},
			{[]string{"list", "configmaps", "-n", nsB}, "no"},
			{[]string{"get", "pods", "-n", nsA}, "no"},
			{[]string{"delete", "configmaps", "-n", nsA}, "no - kubesearch serves a read-only copy of the fleet; change objects in their member cluster"},
			{[]string{"--server", base + "/clusters/" + members[1], "list", "configmaps", "-n", nsA}, "no"},
		} {
			// can-i exits 1 for "no": the answer is what it prints.
			out, _ := k.run(t.Context(), append([]string{"auth", "can-i"}, c.args...)...)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("kubectl auth can-i %s as alice: %q, want %q", strings.Join(c.args, " "), got, c.want)
			}
		}
		list := k.mustRun(t, "auth", "can-i", "--list", "-n", nsA)
		if !strings.Contains(list, "configmaps ") || !strings.Contains(list, "[get list watch]") || strings.Contains(list, "pods") {
			t.Errorf("kubectl auth can-i --list -n %s as alice:\n%s", nsA, list)
		}
		who := k.mustRun(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if who != "alice" {
			t.Errorf("kubectl auth whoami: %q, want alice", who)
		}
		root := facadeKubectlAs(t, env, base, caFile, "admin-token-"+suffix)
		if out, _ := root.run(t.Context(), "auth", "can-i", "create", "deployments.apps", "-n", nsA); !strings.HasPrefix(out, "no - kubesearch serves a read-only copy") {
			t.Errorf("kubectl auth can-i create as root on a read-only facade: %q, want no", out)
		}
	})

	t.Run("kubectl in every view", func(t *testing.T) {
		k := facadeKubectlAs(t, env, base, caFile, "alice-token-"+suffix)
		if got := rows(k.mustRun(t, "get", "configmaps", "-A", "--no-headers")); len(got) != 3 {
			t.Errorf("kubectl get configmaps -A as alice: %v, want her 3", got)
		} else {
			for _, r := range got {
				if r[0] != nsA || r[1] != members[0] { // NAMESPACE, CLUSTER, NAME
					t.Errorf("alice's fleet list has %v", r)
				}
			}
		}
		if out, err := k.run(t.Context(), "get", "configmaps", "-n", nsB); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("kubectl get configmaps -n %s as alice: %v %s, want Forbidden", nsB, err, out)
		}
		// Her kubeconfig has no context for a cluster she may not see; its view is a 403.
		if _, err := k.run(t.Context(), "--context", "kubesearch-"+members[1], "get", "configmaps"); err == nil {
			t.Errorf("alice's kubeconfig has a context for %s", members[1])
		}
		if out, err := k.run(t.Context(), "--server", base+"/clusters/"+members[1], "get", "configmaps", "-n", nsA); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("kubectl in %s's view as alice: %v %s, want Forbidden", members[1], err, out)
		}
		if out, err := k.run(t.Context(), "get", "pods", "-n", nsA); err == nil {
			t.Errorf("kubectl get pods as alice: %s, want an error (pods are outside her scope)", out)
		}
		got := rows(k.mustRun(t, "--context", "kubesearch-qualified", "get", "configmaps", "-n", nsA, "--no-headers", "-o", "name"))
		for _, r := range got {
			if !strings.HasSuffix(r[0], "_"+members[0]) {
				t.Errorf("qualified view as alice: %v", r)
			}
		}
		if len(got) != 3 {
			t.Errorf("qualified view as alice: %d objects, want 3", len(got))
		}
		// Discovery shows only what she may see.
		res := rows(k.mustRun(t, "api-resources", "--no-headers", "-o", "name"))
		var names []string
		for _, r := range res {
			names = append(names, r[0])
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"configmaps", "deployments.apps"}) {
			t.Errorf("kubectl api-resources as alice: %v, want configmaps and deployments.apps", names)
		}
		// A watch delivers her namespace's changes and nothing of another cluster.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		watched := make(chan string, 1)
		go func() {
			out, _ := k.run(ctx, "get", "configmaps", "-A", "--watch-only", "-o", "name", "--request-timeout", "0")
			watched <- out
		}()
		time.Sleep(3 * time.Second)
		env.KubectlRun(t, members[1], nil, "create", "configmap", "hidden", "-n", nsA)
		env.KubectlRun(t, members[0], nil, "create", "configmap", "shown", "-n", nsA)
		eventually(t, "both new ConfigMaps indexed", 45*time.Second, func() bool {
			_, a := root("/v1alpha1/search", url.Values{"resources": {"configmaps"}, "names": {"hidden,shown"}})
			return a.result.Total == 2
		})
		time.Sleep(2 * time.Second)
		cancel()
		out := <-watched
		if !strings.Contains(out, "configmap/shown") || strings.Contains(out, "hidden") {
			t.Errorf("alice's watch printed %q: want configmap/shown and not the other cluster's", out)
		}
	})
	// raw is a GET with a bearer token: the status, the headers and the body as they came.
	raw := func(t *testing.T, token, path string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body
	}
	t.Run("answers name no cluster the subject cannot see", func(t *testing.T) {
		// members[1] holds ConfigMaps in nsA too, and changes; alice sees only members[0]'s.
		env.KubectlRun(t, members[1], nil, "create", "configmap", "churn-"+suffix, "-n", nsA)
		alice := "alice-token-" + suffix
		for _, path := range []string{"/api/v1/configmaps", "/api/v1/namespaces/" + nsA + "/configmaps", "/qualified/api/v1/configmaps",
			"/api/v1/namespaces/" + nsA + "/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=2"} {
			code, h, body := raw(t, alice, path)
			if code != 200 {
				t.Errorf("%s as alice: %d %s", path, code, body)
				continue
			}
			if w := strings.Join(h.Values("Warning"), "; "); strings.Contains(w, members[1]) {
				t.Errorf("%s as alice warns of %s: %s", path, members[1], w)
			}
			var rvs []string
			if strings.Contains(path, "watch=1") {
				for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
					if gjson.Get(line, "type").Str == "BOOKMARK" {
						rvs = append(rvs, gjson.Get(line, "object.metadata.resourceVersion").Str)
					}
				}
			} else {
				rvs = append(rvs, gjson.GetBytes(body, "metadata.resourceVersion").Str)
			}
			if len(rvs) == 0 {
				t.Errorf("%s as alice: no resourceVersion in %.300s", path, body)
			}
			// A fleet view's resourceVersion is sealed (queryapi/position.go): it names no cluster, and
			// the stream offsets inside it, which count every cluster's records, stay unread.
			for _, rv := range rvs {
				if !strings.HasPrefix(rv, "~") || strings.Contains(rv, members[1]) {
					t.Errorf("%s as alice: resourceVersion %s, want a sealed one", path, rv)
				}
				if raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(rv, "~")); err != nil || strings.Contains(string(raw), members[1]) {
					t.Errorf("%s as alice: resourceVersion %s opens without the key (%v)", path, rv, err)
				}
			}
		}
		// The control: alice's position is hers. She lists from it; the admin, whose view holds
		// members[1] too, cannot (410), and lists from his own.
		_, _, body := raw(t, alice, "/api/v1/configmaps")
		rv := gjson.GetBytes(body, "metadata.resourceVersion").Str
		from := "/api/v1/configmaps?resourceVersionMatch=NotOlderThan&resourceVersion="
		if code, _, body := raw(t, alice, from+rv); code != 200 {
			t.Errorf("alice lists from her own resourceVersion: %d %.300s", code, body)
		}
		if code, _, body := raw(t, "admin-token-"+suffix, from+rv); code != 410 {
			t.Errorf("the admin lists from alice's resourceVersion: %d %.300s, want 410", code, body)
		}
		_, _, body = raw(t, "admin-token-"+suffix, "/api/v1/configmaps")
		if code, _, body := raw(t, "admin-token-"+suffix, from+gjson.GetBytes(body, "metadata.resourceVersion").Str); code != 200 {
			t.Errorf("the admin lists from his own resourceVersion: %d %.300s", code, body)
		}
		// /metrics names every member: the admin, who sees everything, reads it; alice may not.
		if code, _, body := raw(t, alice, "/metrics"); code != 403 {
			t.Errorf("/metrics as alice: %d %.200s, want 403", code, body)
		}
		if code, _, _ := raw(t, "admin-token-"+suffix, "/metrics"); code != 200 {
			t.Errorf("/metrics as the admin: %d, want 200", code)
		}
	})

	// Last: it rewrites the token file.
	t.Run("a revoked subject loses its open watch", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/namespaces/"+nsA+"/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=600", nil)
		req.Header.Set("Authorization", "Bearer dave-token-"+suffix)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("dave's watch: %v %v", resp, err)
		}
		defer resp.Body.Close()
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		revoked := time.Now()
		old, err := os.ReadFile(tokens)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, l := range strings.Split(string(old), "\n") {
			if !strings.HasPrefix(l, "dave-token-") {
				kept = append(kept, l)
			}
		}
		writeFile(t, tokens, strings.Join(kept, "\n"))
		// The token file is re-read within 5 s and open watches recheck every 5 s: a minute
		// leaves room for a loaded machine, while the watch itself would run 10.
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("dave's watch ended without an ERROR event after %s", time.Since(revoked))
				}
				if gjson.Get(l, "type").Str != "ERROR" {
					continue
				}
				if gjson.Get(l, "object.code").Int() != 401 {
					t.Fatalf("dave's watch ended with %s, want a 401", l)
				}
				t.Logf("dave's watch ended %s after his token was removed", time.Since(revoked).Round(time.Millisecond))
				if code, _, _ := raw(t, "dave-token-"+suffix, "/api/v1/namespaces/"+nsA+"/configmaps"); code != 401 {
					t.Errorf("dave's new request: %d, want 401", code)
				}
				return
			case <-deadline:
				t.Fatalf("dave's watch still open a minute after his token was removed")
			}
		}
	})
}

// resignToken returns a ServiceAccount token's claims with another expiry (iat and nbf an hour
// before it), signed RS256 with the member's signing key, as kube-apiserver signs them.
func resignToken(t *testing.T, keyFile, token string, exp time.Time) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["exp"], claims["iat"], claims["nbf"] = exp.Unix(), exp.Add(-time.Hour).Unix(), exp.Add(-time.Hour).Unix()
	payload, _ = json.Marshal(claims)
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("%s: no PEM", keyFile)
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	} else if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		t.Fatalf("%s: %v", keyFile, err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// seedSettings makes each namespace in each member, with two ConfigMaps labelled
// app.kubernetes.io/name=shop (settings and flags; kube-root-ca.crt comes with the namespace), and
// deletes the namespaces when the test ends.
func seedSettings(t *testing.T, env *testbed.Env, members []string, namespaces ...string) {
	t.Helper()
	for _, c := range members {
		for _, ns := range namespaces {
			env.KubectlRun(t, c, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s, labels: {app.kubernetes.io/name: shop}}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: flags, namespace: %[1]s, labels: {app.kubernetes.io/name: shop}}
data: {k: v}
`, ns)), "apply", "-f", "-")
			t.Cleanup(func() {
				_, _ = env.KubectlOutput(context.Background(), c, nil, "delete", "namespace", ns, "--wait=false")
			})
		}
	}
}

// waitReadyz waits until base/readyz answers 200 without credentials.
func waitReadyz(t *testing.T, client *http.Client, base string) {
	t.Helper()
	eventually(t, "/readyz answers without credentials", 2*time.Minute, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// authedGet returns a GET of base with a bearer token ("" for none): the answer decoded as a
// search result when 200, as a Status otherwise.
func authedGet(t *testing.T, client *http.Client, base, token string) func(path string, params url.Values) (int, answer) {
	return func(path string, params url.Values) (int, answer) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path+"?"+params.Encode(), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		a := answer{code: resp.StatusCode, raw: body}
		if resp.StatusCode == http.StatusOK {
			_ = json.Unmarshal(body, &a.result)
		} else {
			_ = json.Unmarshal(body, &a.status)
		}
		return resp.StatusCode, a
	}
}

// facadeKubectlAs is facadeKubectl with a bearer token written into the kubeconfig.
func facadeKubectlAs(t *testing.T, env *testbed.Env, base, caFile, token string) *facadeKubectl {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, token)
	out, err := exec.Command(kubesearchBinary(t), "kubeconfig", "--server", base, "--token-file", tokenFile, "--certificate-authority", caFile).Output()
	if err != nil {
		t.Fatalf("kubesearch kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, string(out))
	return &facadeKubectl{env: env, kubeconfig: path}
}

// facadeKubectlWithCert is facadeKubectl with a client certificate written into the kubeconfig.
func facadeKubectlWithCert(t *testing.T, env *testbed.Env, base, caFile, certFile, keyFile string) *facadeKubectl {
	t.Helper()
	out, err := exec.Command(kubesearchBinary(t), "kubeconfig", "--server", base, "--certificate-authority", caFile,
		"--client-certificate", certFile, "--client-key", keyFile).Output()
	if err != nil {
		t.Fatalf("kubesearch kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, string(out))
	return &facadeKubectl{env: env, kubeconfig: path}
}

// clientCertificate makes a CA in dir and a client certificate signed by it (CN = user, O =
// groups, as Kubernetes reads them).
func clientCertificate(t *testing.T, dir, user string, groups ...string) (caFile, certFile, keyFile string) {
	t.Helper()
	caFile, certFile, keyFile, _ = issueCertificate(t, dir, "client", &x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return caFile, certFile, keyFile
}

// servingCertificate makes a CA and a serving certificate for 127.0.0.1 signed by it, in dir.
func servingCertificate(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	return issueCertificate(t, dir, "tls", &x509.Certificate{Subject: pkix.Name{CommonName: "kubesearch"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// issueCertificate makes a CA (ca.crt in dir) and a certificate of leaf's subject, names and
// usages signed by it (<name>.crt, <name>.key), valid for a day; pool trusts the CA.
func issueCertificate(t *testing.T, dir, name string, leaf *x509.Certificate) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, key := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubesearch-e2e-" + name + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf.SerialNumber, leaf.NotBefore, leaf.NotAfter, leaf.KeyUsage = big.NewInt(2), now.Add(-time.Hour), now.Add(24*time.Hour), x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return caFile, certFile, keyFile, pool
}

// TestSecretsNeverLeak selects Secrets (without the registry's opt-in) in `kubesearch standalone`
// and looks for a Secret's value — plain and base64, from data, stringData, the
// last-applied-configuration kubectl apply leaves and the manifest kapp keeps in
// kapp.k14s.io/original — everywhere it could surface: REST search, a field selector on kapp's
// annotation, kubectl get -o yaml and as a table, a watch through the facade, /metrics and the
// process log at debug level. An allow-listed annotation (meta.helm.sh/release-name) survives.
func TestSecretsNeverLeak(t *testing.T) {
	env := testbed.Get(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	ns := "leak-" + suffix
	secret := "hunter2-" + suffix + "-do-not-leak"
	member := env.Clusters[0]
	// kapp's own copy of what it applied, values included: no deny-list of known copies names it.
	// The control ConfigMap carries one too, so the searches for it are shown to find one.
	kappSecret := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"labels":{"kapp.k14s.io/app":"1767000000000000000"},"name":"db","namespace":"%s"},"stringData":{"password":"%s"}}`, ns, secret)
	kappControl := fmt.Sprintf(`{"apiVersion":"v1","data":{"plain":"control-%s"},"kind":"ConfigMap","metadata":{"name":"control","namespace":"%s"}}`, secret, ns)
	env.KubectlRun(t, member, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: %[1]s, labels: {app.kubernetes.io/name: shop}, annotations: {kapp.k14s.io/original: %[4]q, meta.helm.sh/release-name: shop}}
stringData: {password: %[2]s}
data: {token: %[3]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: control, namespace: %[1]s, annotations: {kapp.k14s.io/original: %[5]q}}
data: {plain: control-%[2]s}
`, ns, secret, base64.StdEncoding.EncodeToString([]byte(secret+"-token")), kappSecret, kappControl)), "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = env.KubectlOutput(context.Background(), member, nil, "delete", "namespace", ns, "--wait=false")
	})

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, []string{member})
	registry := filepath.Join(dir, "registry.yaml")
	writeFile(t, registry, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: secrets}
spec:
  targetCluster: {}
  resourceSelectors:
  - {apiVersion: v1, kind: Secret, namespace: %[1]s}
  - {apiVersion: v1, kind: ConfigMap, namespace: %[1]s}
`, ns))
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--registry", registry, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "debug")
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	var items []item
	eventually(t, "the Secret indexed", time.Minute, func() bool {
		items, _ = searchAll(t, base, url.Values{"resources": {"secrets"}, "namespaces": {ns}}, nil)
		return len(items) == 1
	})
	ann, _ := lookup(items[0].obj, "metadata.annotations").(map[string]any)
	if ann["kubesearch.io/data-redacted"] != "true" {
		t.Errorf("the indexed Secret does not say it was redacted: annotations %v", ann)
	}
	if ann["meta.helm.sh/release-name"] != "shop" {
		t.Errorf("the allow-listed annotation meta.helm.sh/release-name did not survive redaction: annotations %v", ann)
	}
	if _, ok := ann["kapp.k14s.io/original"]; ok {
		t.Errorf("kapp's copy of the Secret was indexed: annotations %v", ann)
	}
	if v := lookup(items[0].obj, "data.password"); v != "" {
		t.Errorf("data.password is %v, want the key kept with an empty value", v)
	}

	// A watch open while the Secret changes, so a watch event carries it.
	k := newFacadeKubectl(t, env, base)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	watched := make(chan string, 1)
	go func() {
		out, _ := k.run(ctx, "get", "secrets", "-n", ns, "--watch-only", "-o", "json", "--request-timeout", "0")
		watched <- out
	}()
	time.Sleep(3 * time.Second)
	env.KubectlRun(t, member, nil, "label", "secret", "db", "-n", ns, "changed=yes")
	eventually(t, "the relabelled Secret indexed", 45*time.Second, func() bool {
		items, _ := searchAll(t, base, url.Values{"resources": {"secrets"}, "namespaces": {ns}, "labelSelector": {"changed=yes"}}, nil)
		return len(items) == 1
	})
	time.Sleep(2 * time.Second)
	cancel()
	watchOut := <-watched
	if !strings.Contains(watchOut, `"changed": "yes"`) {
		t.Errorf("the watch did not deliver the change: %.300s", watchOut)
	}

	surfaces := map[string]string{
		"REST search":            string(get(t, base, "/v1alpha1/search", url.Values{"resources": {"secrets"}, "namespaces": {ns}}).raw),
		"kubectl get -o yaml":    k.mustRun(t, "get", "secret", "db", "-n", ns, "-o", "yaml"),
		"kubectl get as a table": k.mustRun(t, "get", "secrets", "-n", ns),
		"a watch event":          watchOut,
		"/metrics":               string(httpGetBody(t, base+"/metrics")),
		"the process log":        p.output(),
	}
	needles := []string{secret, secret + "-token", base64.StdEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret + "-token"))}
	for where, text := range surfaces {
		for _, n := range needles {
			if strings.Contains(text, n) {
				t.Errorf("the Secret's value %q appears in %s", n, where)
			}
		}
	}
	// The control: a ConfigMap's value, not redacted, is found by the same search in an answer, so
	// a leaked Secret value would have been too. (The index files on disk are compressed: a grep
	// there proves nothing. Nothing downstream can leak what the collector blanked before
	// publishing; TestCollector checks the Kafka topic itself.)
	control := "control-" + secret
	if cm := string(get(t, base, "/v1alpha1/search", url.Values{"resources": {"configmaps"}, "namespaces": {ns}}).raw); !strings.Contains(cm, control) {
		t.Errorf("the unredacted control value is not in the ConfigMap's answer: the search for leaks would miss one")
	}

	// Nor is kapp's copy searchable: a field selector on its annotation, present or holding the
	// Secret's manifest, matches no Secret, while the same selectors find the control ConfigMap.
	escape := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `=`, `\=`) // as fields.EscapeValue
	const kappField = "metadata.annotations.kapp.k14s.io/original"
	for _, c := range []struct {
		resource, selector string
		want               int
	}{
		{"secrets", kappField + "!=", 0},
		{"secrets", kappField + "=" + escape.Replace(kappSecret), 0},
		{"configmaps", kappField + "!=", 1},
		{"configmaps", kappField + "=" + escape.Replace(kappControl), 1},
	} {
		found, _ := searchAll(t, base, url.Values{"resources": {c.resource}, "namespaces": {ns}, "fieldSelector": {c.selector}}, nil)
		if len(found) != c.want {
			t.Errorf("%s with fieldSelector %.80s...: %d found, want %d", c.resource, c.selector, len(found), c.want)
		}
	}
}

func httpGetBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
