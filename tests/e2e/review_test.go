//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestSubjectAccessReview runs `kubesearch standalone` in the SubjectAccessReview mode over two
// members: a member1 Role granting a ServiceAccount one namespace gives that ServiceAccount's token
// (checked by member1's TokenReview) the same view through kubesearch — REST search, facets,
// discovery and kubectl — and nothing else; a binding added in member2 or removed in member1
// changes the view within the cache's TTLs, as the member's RBAC says.
func TestSubjectAccessReview(t *testing.T) {
	env := testbed.Get(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	nsA, nsB := "sar-a-"+suffix, "sar-b-"+suffix
	members := env.Clusters[:2]
	seedSettings(t, env, members, nsA, nsB)
	// member1: the ServiceAccount, and a Role of its namespace granting it ConfigMaps.
	env.KubectlRun(t, members[0], []byte(fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmap-reader, namespace: %[1]s}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-reader}
subjects:
- {kind: ServiceAccount, name: viewer, namespace: %[1]s}
`, nsA)), "apply", "-f", "-")
	token := strings.TrimSpace(string(env.KubectlRun(t, members[0], nil, "create", "token", "viewer", "-n", nsA, "--duration", "1h")))

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, "admin-token-"+suffix+",root,1003,\"system:masters\"\n")
	// /metrics names every member: in this mode only a policy rule grants it (the members are not
	// asked about the query API's own paths). The rule grants no object: what root sees of the
	// members is still their RBAC's.
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, "rules:\n- subjects: [{kind: User, name: root}]\n  nonResourceURLs: [/metrics]\n  verbs: [get]\n")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, members)
	reviewer := filepath.Join(dir, "reviewer.kubeconfig")
	writeKubeconfig(t, env, reviewer, members[:1])
	caFile, certFile, keyFile, pool := servingCertificate(t, dir)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--anonymous=false", "--token-auth-file", tokens,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--authentication-kubeconfig", reviewer,
		"--subject-access-review-kubeconfig", kubeconfig, "--authorization-policy-file", policy,
		"--subject-access-review-allowed-ttl", "4s", "--subject-access-review-denied-ttl", "2s")
	waitReadyz(t, client, base)
	viewer, root := authedGet(t, client, base, token), authedGet(t, client, base, "admin-token-"+suffix)
	both := url.Values{"resources": {"configmaps"}, "namespaces": {nsA + "," + nsB}, "facets": {"cluster,namespace"}}
	eventually(t, "every member's ConfigMaps indexed, seen by system:masters", 2*time.Minute, func() bool {
		_, a := root("/v1alpha1/search", both)
		return a.code == 200 && a.result.Total == 2*2*3 // settings, flags, kube-root-ca.crt
	})
	// sees lists what the viewer's search finds, as cluster/namespace/name.
	sees := func(q url.Values) (int, []string) {
		code, a := viewer("/v1alpha1/search", q)
		var got []string
		for _, raw := range a.result.Items {
			it := itemOf(t, raw)
			got = append(got, it.cluster+"/"+it.namespace+"/"+it.name)
		}
		slices.Sort(got)
		return code, got
	}
	inA := func(cluster string) []string {
		return []string{cluster + "/" + nsA + "/flags", cluster + "/" + nsA + "/kube-root-ca.crt", cluster + "/" + nsA + "/settings"}
	}

	// What the mode costs: the first search over every resource asks each member about every
	// cached resource, and per namespace where no ClusterRoleBinding allows it; the next is cached.
	every := url.Values{"labelSelector": {"app.kubernetes.io/name=shop"}}
	start := time.Now()
	sees(every)
	cold := time.Since(start)
	start = time.Now()
	sees(every)
	warm := time.Since(start)
	_, m := root("/metrics", nil)
	reviews := metricSum(string(m.raw), "kubesearch_queryapi_subject_access_reviews_total")
	if reviews == 0 {
		t.Error("kubesearch_queryapi_subject_access_reviews_total counts no review")
	}
	t.Logf("a search over every resource: %s with %.0f reviews asked (cold), %s cached", cold.Round(time.Millisecond), reviews, warm.Round(time.Millisecond))

	t.Run("the member's Role is the view", func(t *testing.T) {
		code, got := sees(both)
		if code != 200 || !slices.Equal(got, inA(members[0])) {
			t.Fatalf("the ServiceAccount's search: %d %v, want %v", code, got, inA(members[0]))
		}
		_, a := viewer("/v1alpha1/search", both)
		for _, f := range a.result.Facets {
			for _, b := range f.Buckets {
				if b.Value != members[0] && b.Value != nsA {
					t.Errorf("facet %s has bucket %v outside the Role", f.Name, b.Value)
				}
			}
		}
		// Across every resource the view is the same: a search naming nothing finds only them.
		if code, got := sees(url.Values{"labelSelector": {"app.kubernetes.io/name=shop"}}); code != 200 || len(got) != 2 {
			t.Errorf("a search of every resource: %d %v, want the Role's 2 labelled ConfigMaps", code, got)
		}
		for _, q := range []url.Values{
			{"namespaces": {nsB}},
			{"clusters": {members[1]}},
			{"resources": {"pods"}},
			{"namespaces": {"no-such-namespace-" + suffix}},
		} {
			if code, a := viewer("/v1alpha1/search", q); code != 403 || a.status.Reason != "Forbidden" {
				t.Errorf("?%s: %d %.200s, want a 403 Status", q.Encode(), code, a.raw)
			}
		}
	})

	t.Run("kubectl and discovery", func(t *testing.T) {
		k := facadeKubectlAs(t, env, base, caFile, token)
		got := rows(k.mustRun(t, "get", "configmaps", "-A", "--no-headers"))
		if len(got) != 3 {
			t.Errorf("kubectl get configmaps -A: %v, want the Role's 3", got)
		}
		for _, r := range got {
			if r[0] != nsA || r[1] != members[0] {
				t.Errorf("kubectl get configmaps -A has %v", r)
			}
		}
		if out, err := k.run(t.Context(), "get", "configmaps", "-n", nsB); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("kubectl get configmaps -n %s: %v %s, want Forbidden", nsB, err, out)
		}
		if out := k.mustRun(t, "get", "configmap", "settings", "-n", nsA, "-o", "jsonpath={.metadata.name}"); out != "settings" {
			t.Errorf("kubectl get configmap settings: %q", out)
		}
		var names []string
		for _, r := range rows(k.mustRun(t, "api-resources", "--no-headers", "-o", "name")) {
			names = append(names, r[0])
		}
		if !slices.Equal(names, []string{"configmaps"}) {
			t.Errorf("kubectl api-resources: %v, want configmaps only", names)
		}
	})

	t.Run("bindings changed in the members", func(t *testing.T) {
		// member2 binds the same ServiceAccount name in nsB: the deny expires, the grant shows.
		env.KubectlRun(t, members[1], nil, "create", "role", "configmap-reader", "-n", nsB, "--verb=get,list,watch", "--resource=configmaps")
		env.KubectlRun(t, members[1], nil, "create", "rolebinding", "viewer", "-n", nsB, "--role=configmap-reader", "--serviceaccount="+nsA+":viewer")
		want := append(inA(members[0]), members[1]+"/"+nsB+"/flags", members[1]+"/"+nsB+"/kube-root-ca.crt", members[1]+"/"+nsB+"/settings")
		slices.Sort(want)
		var got []string
		eventually(t, "member2's RoleBinding honoured", 30*time.Second, func() bool {
			_, got = sees(both)
			return slices.Equal(got, want)
		})
		// member1 removes its binding: within the allowed TTL, member1 is gone from the view.
		env.KubectlRun(t, members[0], nil, "delete", "rolebinding", "viewer", "-n", nsA)
		eventually(t, "member1's removed RoleBinding no longer honoured", 30*time.Second, func() bool {
			_, got = sees(both)
			return slices.Equal(got, want[3:])
		})
		if code, a := viewer("/v1alpha1/search", url.Values{"namespaces": {nsA}, "clusters": {members[0]}}); code != 403 {
			t.Errorf("member1's namespace after the RoleBinding went: %d %.200s, want 403", code, a.raw)
		}
	})
}
