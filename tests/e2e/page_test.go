//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestSearchPage drives the search page (/ui/) in Debian's Chromium, headless, against a real
// `kubesearch standalone` over two test bed members, locked down with tokens and a policy: sign
// in with a token, search, filter by a facet, page through 1,000 results, open an object (YAML,
// owners, owned objects, the same name in the other member), a shared URL, a ConfigMap created in
// a member appearing without a reload, a restricted user seeing on the page exactly what the API
// shows it, and the fleet strip rendering 1,000 clusters. Screenshots of each step are kept in
// $KUBESEARCH_E2E_LOGDIR (else a temporary folder the log names).
func TestSearchPage(t *testing.T) {
	chromium := installChromium(t)
	env := testbed.Get(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	members := env.Clusters[:2]
	ns, nsAlice := "page-"+suffix, "page-alice-"+suffix
	seedSettings(t, env, members, nsAlice)
	// 500 ConfigMaps in each member (cm-0000 … cm-0499, the same names in both), and a Deployment
	// web in each: its ReplicaSet and Pods are owned objects with the same names in both members.
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	for i := range 500 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%04d, namespace: %s, labels: {tier: t%d}}\ndata: {k: v}\n", i, ns, i%3)
	}
	fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
`, ns)
	for _, c := range members {
		env.KubectlRun(t, c, []byte(b.String()), "create", "-f", "-")
		t.Cleanup(func() {
			_, _ = env.KubectlOutput(context.Background(), c, nil, "delete", "namespace", ns, "--wait=false")
		})
	}

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	adminToken, aliceToken := "page-admin-"+suffix, "page-alice-"+suffix
	writeFile(t, tokens, fmt.Sprintf("%s,root,1003,\"sre\"\n%s,alice,1001,\n", adminToken, aliceToken))
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, fmt.Sprintf(`rules:
- subjects: [{kind: User, name: alice}]
  clusters: [%s]
  namespaces: [%s]
  resources: [configmaps]
  verbs: [get, list, watch]
- subjects: [{kind: Group, name: sre}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verbs: ["*"]
`, members[0], nsAlice))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, members)
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--anonymous=false", "--token-auth-file", tokens,
		"--authorization-policy-file", policy)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	waitReadyz(t, client, base)
	admin, alice := authedGet(t, client, base, adminToken), authedGet(t, client, base, aliceToken)
	eventually(t, "1,000 ConfigMaps and both ReplicaSets indexed", 3*time.Minute, func() bool {
		_, cms := admin("/v1alpha1/search", url.Values{"resources": {"configmaps"}, "namespaces": {ns}, "namePrefix": {"cm-"}, "limit": {"1"}})
		_, rs := admin("/v1alpha1/search", url.Values{"resources": {"replicasets"}, "namespaces": {ns}, "limit": {"1"}})
		return cms.result.Total == 1000 && rs.result.Total == 2
	})

	shots := os.Getenv("KUBESEARCH_E2E_LOGDIR")
	if shots == "" {
		shots = t.TempDir()
	}
	shots = filepath.Join(shots, "search-page")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)

	br := newBrowser(t, chromium, shots)
	tab := br.tab(t)

	t.Run("the page asks for a token, then searches", func(t *testing.T) {
		tab.do(t, chromedp.Navigate(base+"/"))
		tab.wait(t, `document.getElementById("signin").open`)
		tab.shot(t, "01-sign-in")
		tab.do(t, chromedp.SendKeys("#token", adminToken+kb.Enter))
		tab.wait(t, `document.getElementById("fleet").dataset.clusters === "2"`)
		// Keyboard first: / focuses the box, Enter searches.
		tab.search(t, "kind:configmaps ns:"+ns+" tier=t1")
		tab.waitSummary(t, "334 objects")
		if got := tab.eval(t, `[...document.querySelectorAll("#rows tr td:nth-child(4)")].slice(0, 2).map((td) => td.textContent).join(",")`); got != "cm-0001,cm-0004" {
			t.Errorf("first rows %q, want cm-0001,cm-0004 (tier=t1, in name order)", got)
		}
		if loc := tab.eval(t, `location.search`); !strings.Contains(loc, "tier%3Dt1") || strings.Contains(loc, adminToken) {
			t.Errorf("URL %q: want the search in it, and never the token", loc)
		}
		tab.shot(t, "02-search")
		// Completion: kinds and label keys from the facets.
		tab.do(t, chromedp.KeyEvent(kb.Escape), slash(), chromedp.SendKeys("#box", kb.End+" ti"))
		tab.wait(t, `[...document.querySelectorAll("#suggest li")].some((li) => li.textContent.startsWith("tier="))`)
		tab.do(t, chromedp.SendKeys("#box", kb.Backspace+kb.Backspace+"kind:conf"))
		tab.wait(t, `[...document.querySelectorAll("#suggest li")].some((li) => li.textContent.startsWith("kind:configmaps"))`)
		tab.shot(t, "02-completion")
		tab.do(t, chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent(kb.Escape))
	})

	t.Run("filter by a facet", func(t *testing.T) {
		tab.click(t, fmt.Sprintf(`#facet-cluster label[data-value=%q] input`, members[1]))
		tab.waitSummary(t, "167 objects")
		if got := tab.eval(t, `[...new Set([...document.querySelectorAll("#rows tr td:first-child")].map((td) => td.textContent))].join(",")`); got != members[1] {
			t.Errorf("clusters on the page after filtering: %q, want %s", got, members[1])
		}
		if box := tab.eval(t, `document.getElementById("box").value`); !strings.Contains(box, "cluster:"+members[1]) {
			t.Errorf("the box says %q: the facet's filter belongs in it", box)
		}
		tab.shot(t, "03-facet")
	})

	t.Run("page through 1,000 results", func(t *testing.T) {
		tab.do(t, chromedp.Navigate(base+"/ui/?"+url.Values{"q": {"kind:configmaps ns:" + ns}}.Encode()))
		tab.waitSummary(t, "1,002 objects") // 500 ConfigMaps and the namespace's kube-root-ca.crt per member
		seen := map[string]bool{}
		for page := 1; ; page++ {
			rows := tab.eval(t, `[...document.querySelectorAll("#rows tr")].map((tr) => tr.dataset.key).join("\n")`)
			for _, k := range strings.Split(rows, "\n") {
				if seen[k] {
					t.Fatalf("page %d repeats %s", page, k)
				}
				seen[k] = true
			}
			if tab.eval(t, `String(document.getElementById("next").disabled)`) == "true" {
				break
			}
			if page > 20 {
				t.Fatal("more than 20 pages of 100")
			}
			ready := tab.eval(t, `document.body.dataset.ready`)
			tab.do(t, chromedp.KeyEvent(kb.ArrowRight))
			tab.wait(t, fmt.Sprintf(`document.body.dataset.ready !== %q`, ready))
		}
		if len(seen) != 1002 {
			t.Errorf("paged through %d objects, want 1,002 (500 ConfigMaps and kube-root-ca.crt in each member)", len(seen))
		}
		if r := tab.eval(t, `document.getElementById("range").textContent`); r != "1,001–1,002 of 1,002" {
			t.Errorf("last page's range %q", r)
		}
		tab.shot(t, "04-last-page")
	})

	t.Run("open an object: YAML, owners, owned, other clusters", func(t *testing.T) {
		tab.search(t, "kind:replicasets ns:"+ns)
		tab.waitSummary(t, "2 objects")
		tab.do(t, chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
		tab.wait(t, `(document.body.dataset.panel || "").startsWith("`+members[0]+`/")`)
		yaml := tab.eval(t, `document.getElementById("yaml").textContent`)
		for _, want := range []string{"kind: ReplicaSet", "namespace: " + ns, "kind: Deployment", "name: web"} {
			if !strings.Contains(yaml, want) {
				t.Errorf("the panel's YAML lacks %q:\n%.600s", want, yaml)
			}
		}
		if got := tab.eval(t, `document.getElementById("owners").textContent`); !strings.Contains(got, members[0]+" · "+ns+" · Deployment/web") {
			t.Errorf("owners: %q, want the Deployment web of %s", got, members[0])
		}
		tab.wait(t, `document.getElementById("owned").textContent.includes("Pod/web-")`)
		if got := tab.eval(t, `document.getElementById("repeats").textContent`); !strings.Contains(got, members[1]+" · "+ns+" · ReplicaSet/web-") {
			t.Errorf("same name in other clusters: %q, want the ReplicaSet of %s", got, members[1])
		}
		tab.shot(t, "05-object")
		// The URL opens the same object on another page.
		shared := tab.eval(t, `location.href`)
		other := br.tab(t)
		other.do(t, chromedp.Navigate(shared))
		other.wait(t, `document.getElementById("signin").open`)
		other.do(t, chromedp.SendKeys("#token", adminToken+kb.Enter))
		other.wait(t, `(document.body.dataset.panel || "").startsWith("`+members[0]+`/")`)
		// Owners are links: following one opens the Deployment.
		tab.click(t, `#owners a`)
		tab.wait(t, `document.getElementById("yaml").textContent.includes("kind: Deployment")`)
		tab.do(t, chromedp.KeyEvent(kb.Escape))
		tab.wait(t, `document.getElementById("panel").hidden`)
	})

	t.Run("a kind's own column sorts on the server", func(t *testing.T) {
		// 130 ConfigMaps per member in a namespace of their own, beside its kube-root-ca.crt: 120
		// of one key and ten of 3 to 12 keys, named so that neither name order nor text order
		// ("10" before "3") is the order of DATA. Sorted by DATA descending, the first page holds
		// the ten of most keys of both members, which a page sorting its 100 rows itself would not.
		nsSort := "page-sort-" + suffix
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", nsSort)
		for i := range 130 {
			keys := 1
			if i%13 == 7 {
				keys = 3 + (i/13*7)%10 // 3…12, in no order of the names
			}
			var data []string
			for k := range keys {
				data = append(data, fmt.Sprintf("k%d: v", k))
			}
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: s-%03d, namespace: %s}\ndata: {%s}\n", i, nsSort, strings.Join(data, ", "))
		}
		for _, c := range members {
			env.KubectlRun(t, c, []byte(b.String()), "create", "-f", "-")
			t.Cleanup(func() {
				_, _ = env.KubectlOutput(context.Background(), c, nil, "delete", "namespace", nsSort, "--wait=false")
			})
		}
		eventually(t, "262 ConfigMaps of the sort namespace indexed", 3*time.Minute, func() bool {
			_, cms := admin("/v1alpha1/search", url.Values{"resources": {"configmaps"}, "namespaces": {nsSort}, "limit": {"1"}})
			return cms.result.Total == 262
		})
		tab.do(t, chromedp.Navigate(base+"/ui/?"+url.Values{"q": {"kind:configmaps ns:" + nsSort}}.Encode()))
		tab.waitSummary(t, "262 objects")
		const data = `[...document.querySelectorAll("#rows tr td:nth-child(7)")].map((td) => td.textContent)`
		if h := tab.eval(t, `document.querySelector("#head th:nth-child(7)").textContent + " " + document.querySelector("#head th:nth-child(7)").dataset.sort`); h != "DATA columns.data" {
			t.Fatalf("the seventh header is %q, want DATA sorting by columns.data", h)
		}
		// The first click sorts ascending: ones first, over every page.
		ready := tab.eval(t, `document.body.dataset.ready`)
		tab.click(t, `#head th[data-sort="columns.data"]`)
		tab.wait(t, fmt.Sprintf(`document.body.dataset.ready !== %q && location.search.includes("sort=columns.data%%3Aasc")`, ready))
		if got := tab.eval(t, data+`.slice(0, 100).every((d) => d === "1")`); got != "true" {
			t.Errorf("DATA ascending: the first page is not all ones: %s", tab.eval(t, data+`.join(",")`))
		}
		// The second, descending: the ten of most keys of each member lead, as numbers.
		ready = tab.eval(t, `document.body.dataset.ready`)
		tab.click(t, `#head th[data-sort="columns.data"]`)
		tab.wait(t, fmt.Sprintf(`document.body.dataset.ready !== %q && location.search.includes("sort=columns.data%%3Adesc")`, ready))
		want := "12,12,11,11,10,10,9,9,8,8,7,7,6,6,5,5,4,4,3,3,1,1"
		if got := tab.eval(t, data+`.slice(0, 22).join(",")`); got != want {
			t.Errorf("DATA descending: first rows %s, want %s", got, want)
		}
		if got := tab.eval(t, `document.querySelector("#head th[data-sort='columns.data']").getAttribute("aria-sort")`); got != "descending" {
			t.Errorf("the DATA header's aria-sort is %q", got)
		}
		// The page's rows are the REST search's, asked with that sort.
		_, api := admin("/v1alpha1/search", url.Values{"resources": {"configmaps"}, "namespaces": {nsSort}, "sort": {"columns.data:desc"}, "limit": {"22"}})
		var apiKeys []string
		for _, raw := range api.result.Items {
			it := itemOf(t, raw)
			apiKeys = append(apiKeys, it.cluster+"/"+it.name)
		}
		if got := tab.eval(t, `[...document.querySelectorAll("#rows tr")].slice(0, 22).map((tr) => tr.children[0].textContent + "/" + tr.children[3].textContent).join(",")`); got != strings.Join(apiKeys, ",") {
			t.Errorf("the page shows %s, the API %s", got, strings.Join(apiKeys, ","))
		}
		tab.shot(t, "05b-sort-own-column")
		// The shared URL sorts alike.
		shared := tab.eval(t, `location.href`)
		other := br.tab(t)
		other.do(t, chromedp.Navigate(shared))
		other.wait(t, `document.getElementById("signin").open`)
		other.do(t, chromedp.SendKeys("#token", adminToken+kb.Enter))
		other.waitSummary(t, "262 objects")
		if got := other.eval(t, data+`.slice(0, 22).join(",")`); got != want {
			t.Errorf("the shared URL's first rows %s, want %s", got, want)
		}
		// Another kind in the box: the column sort, meaningless there, is dropped.
		tab.search(t, "kind:pods ns:"+nsSort)
		tab.wait(t, `!location.search.includes("columns.data") && document.getElementById("error").hidden`)
	})

	t.Run("the kind's -o wide columns, shown with w, sort on the server", func(t *testing.T) {
		// The Deployment web's Pod in each member: kwok gives each an IP and a node.
		tab.do(t, chromedp.Navigate(base+"/ui/?"+url.Values{"q": {"kind:pods ns:" + ns}}.Encode()))
		tab.waitSummary(t, "2 objects")
		const heads = `[...document.querySelectorAll("#head th")].map((th) => th.textContent).join(",")`
		if got := tab.eval(t, heads); strings.Contains(got, "NODE") || strings.Contains(got, "IP") {
			t.Fatalf("headers without wide: %s, want no IP or NODE (kubectl shows them with -o wide)", got)
		}
		// w, as kubectl's -o wide: the rows hold every cell, so no request is needed.
		tab.do(t, chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent("w"))
		tab.wait(t, `document.getElementById("wide").checked && location.search.includes("wide=1")`)
		if got := tab.eval(t, heads); !strings.Contains(got, ",IP,NODE,") {
			t.Fatalf("headers with wide: %s, want IP and NODE", got)
		}
		node, err := strconv.Atoi(tab.eval(t, `[...document.querySelectorAll("#head th")].findIndex((th) => th.textContent === "NODE")`))
		if err != nil {
			t.Fatal(err)
		}
		cells := fmt.Sprintf(`[...document.querySelectorAll("#rows tr td:nth-child(%d)")].map((td) => td.textContent)`, node+1)
		if got := tab.eval(t, cells+`.every((n) => n !== "" && n !== "<none>")`); got != "true" {
			t.Errorf("NODE cells %s, want a node in each", tab.eval(t, cells+`.join(",")`))
		}
		ready := tab.eval(t, `document.body.dataset.ready`)
		tab.click(t, `#head th[data-sort="columns.node"]`)
		tab.wait(t, fmt.Sprintf(`document.body.dataset.ready !== %q && location.search.includes("sort=columns.node%%3Aasc") && document.getElementById("error").hidden`, ready))
		_, api := admin("/v1alpha1/search", url.Values{"resources": {"pods"}, "namespaces": {ns}, "sort": {"columns.node:asc"}})
		var want []string
		for _, raw := range api.result.Items {
			var p struct {
				Spec struct{ NodeName string } `json:"spec"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p.Spec.NodeName)
		}
		if got := tab.eval(t, cells+`.join(",")`); got != strings.Join(want, ",") || !slices.IsSorted(want) {
			t.Errorf("NODE ascending: the page shows %s, the API %v", got, want)
		}
		tab.shot(t, "05c-wide-columns")
		// Unticked, they go, and so does wide=1 from the URL.
		tab.click(t, "#wide")
		tab.wait(t, `!document.getElementById("wide").checked && !location.search.includes("wide=1")`)
		if got := tab.eval(t, heads); strings.Contains(got, "NODE") {
			t.Errorf("headers after unticking wide: %s", got)
		}
	})

	t.Run("live: a ConfigMap created in a member appears without a reload", func(t *testing.T) {
		tab.do(t, chromedp.Navigate(base+"/ui/?"+url.Values{"q": {"kind:configmaps ns:" + ns + " cluster:" + members[1]}}.Encode()))
		tab.waitSummary(t, "501 objects")
		tab.eval(t, `window.notReloaded = "yes"`)
		env.KubectlRun(t, members[1], []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-live, namespace: %s}\ndata: {k: v}\n", ns)), "create", "-f", "-")
		start := time.Now()
		tab.waitFor(t, `document.querySelector('#rows tr td:nth-child(4)').textContent === "a-live"`, time.Minute)
		t.Logf("the new ConfigMap was on the page %v after kubectl create", time.Since(start).Round(100*time.Millisecond))
		if tab.eval(t, `window.notReloaded`) != "yes" {
			t.Error("the page was reloaded")
		}
		tab.waitSummary(t, "502 objects")
		tab.shot(t, "06-live")
	})

	t.Run("a restricted user sees what the API shows it", func(t *testing.T) {
		at := br.tab(t)
		at.do(t, chromedp.Navigate(base+"/ui/?"+url.Values{"q": {"kind:configmaps"}}.Encode()))
		at.wait(t, `document.getElementById("signin").open`)
		at.do(t, chromedp.SendKeys("#token", aliceToken+kb.Enter))
		_, api := alice("/v1alpha1/search", url.Values{"resources": {"configmaps"}})
		if api.code != 200 || api.result.Total != 3 {
			t.Fatalf("alice through the API: %d, %d objects: %.300s", api.code, api.result.Total, api.raw)
		}
		at.waitSummary(t, "3 objects")
		var want []string
		for _, raw := range api.result.Items {
			it := itemOf(t, raw)
			want = append(want, it.cluster+"/"+it.namespace+"/"+it.name)
		}
		got := at.eval(t, `[...document.querySelectorAll("#rows tr")].map((tr) => [...tr.children].slice(0, 4).map((td) => td.textContent)).map(([c, n, k, m]) => c + "/" + n + "/" + m).join(",")`)
		if got != strings.Join(want, ",") {
			t.Errorf("alice's page shows %s, the API %s", got, strings.Join(want, ","))
		}
		if f := at.eval(t, `[...document.querySelectorAll("#filters label")].map((l) => l.dataset.value).join(",")`); f != "configmaps,"+members[0]+","+nsAlice {
			t.Errorf("alice's facets: %s, want only configmaps, %s and %s", f, members[0], nsAlice)
		}
		at.wait(t, `document.getElementById("fleet").dataset.clusters === "1"`)
		// Everything else: a search of another namespace shows the API's 403, no object.
		at.search(t, "kind:configmaps ns:"+ns)
		at.wait(t, `!document.getElementById("error").hidden && document.getElementById("error").textContent.includes("forbidden")`)
		if n := at.eval(t, `String(document.querySelectorAll("#rows tr").length)`); n != "0" {
			t.Errorf("alice sees %s rows of a namespace she may not list", n)
		}
		at.shot(t, "07-restricted")
	})

	t.Run("the fleet strip at 1,000 clusters", func(t *testing.T) {
		// The page's own renderer, fed the fleet status of 1,000 clusters × 14 resources with
		// 7 failing and 20 listing: it must stay a compact strip, with the failing ones named.
		tab.eval(t, `(() => {
			const items = [];
			for (let i = 0; i < 1000; i++) {
				const cluster = "cluster-" + String(i).padStart(4, "0");
				for (let r = 0; r < 14; r++) {
					items.push({cluster, group: "", resource: "r" + r, state: i % 143 === 5 && r === 0 ? "Failed" : "Running",
						reason: i % 143 === 5 && r === 0 ? "Unauthorized" : "", listing: i % 50 === 7, lagSeconds: i % 10 ? 0 : 2.5});
				}
			}
			const t0 = performance.now();
			renderFleet(items);
			window.fleetMillis = performance.now() - t0;
			return "";
		})()`)
		counts := tab.eval(t, `document.querySelector("#fleet .counts").textContent`)
		for _, want := range []string{"1,000 clusters", "973 synced", "20 listing", "7 failing"} {
			if !strings.Contains(counts, want) {
				t.Errorf("fleet strip %q lacks %q", counts, want)
			}
		}
		if n := tab.eval(t, `String(document.querySelectorAll("#fleet .failing-list li").length)`); n != "7" {
			t.Errorf("%s failing clusters listed, want 7", n)
		}
		if h := tab.eval(t, `String(document.getElementById("fleet").getBoundingClientRect().height <= 200)`); h != "true" {
			t.Errorf("the fleet strip is %s px high at 1,000 clusters; it must stay a strip (200 px at most)",
				tab.eval(t, `String(document.getElementById("fleet").getBoundingClientRect().height)`))
		}
		t.Logf("rendered 1,000 clusters in %s ms", tab.eval(t, `window.fleetMillis.toFixed(1)`))
		tab.shot(t, "08-fleet-1000")
	})
}

// installChromium runs tests/browser/install-chromium.sh (idempotent) and returns the browser's
// path. A missing browser fails the test: CI must run it, not skip it.
func installChromium(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(testbed.Root(), "tests/browser/install-chromium.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install-chromium.sh: %v\n%s", err, out)
	}
	path := os.Getenv("KUBESEARCH_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return path
}

// browser is one headless Chromium for a test; each tab has its own sessionStorage, so a token
// given in one is not in another.
type browser struct {
	ctx   context.Context
	shots string
}

func newBrowser(t *testing.T, path, shots string) *browser {
	t.Helper()
	// The flags this machine needs (README "Search page"): no sandbox as root, and no background
	// connections, which the closed network refuses.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{ctx: ctx, shots: shots}
}

type tab struct {
	ctx   context.Context
	shots string
}

// tab opens a new tab in the browser.
func (b *browser) tab(t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new tab: %v", err)
	}
	return &tab{ctx: ctx, shots: b.shots}
}

// slash presses / as a keyboard does: one keyDown carrying the text, which the page's handler
// prevents from typing a "/" once it has moved the focus to the box. chromedp's KeyEvent sends the
// text as a separate char event, which no keydown handler can prevent.
func slash() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "/", Code: "Slash", Text: "/", UnmodifiedText: "/",
			WindowsVirtualKeyCode: 191, NativeVirtualKeyCode: 191}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
				return fmt.Errorf("press /: %w", err)
			}
		}
		return nil
	})
}

// search types text into the search box as a user does: Escape (twice: the first may only close
// the box's suggestions) leaves whatever has the focus, /
// focuses the box with its text selected, the typed text replaces it, Enter searches.
func (p *tab) search(t *testing.T, text string) {
	t.Helper()
	p.do(t, chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent(kb.Escape), slash(), chromedp.SendKeys("#box", text+kb.Enter))
}

func (p *tab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.shot(t, "failed-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		t.Fatal(err)
	}
}

// click clicks the element sel finds, as a user would. The page re-renders its facets and panels as
// answers arrive, so the node found may be replaced before the click lands (CDP: "Could not find
// node with given id"): it is then found again, as a user's second try would.
func (p *tab) click(t *testing.T, sel string) {
	t.Helper()
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
		err := chromedp.Do(ctx, chromedp.Click(sel))
		cancel()
		if err == nil {
			return
		}
		if try == 5 || !strings.Contains(err.Error(), "Could not find node with given id") {
			p.shot(t, "failed-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
			t.Fatalf("click %s: %v", sel, err)
		}
		t.Logf("click %s: the node was replaced (%v); finding it again", sel, err)
	}
}

// eval evaluates a JavaScript expression and returns its value as a string.
func (p *tab) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func (p *tab) wait(t *testing.T, predicate string) {
	t.Helper()
	p.waitFor(t, predicate, 30*time.Second)
}

// waitFor waits until predicate is true on the page; a timeout fails the test with a screenshot.
func (p *tab) waitFor(t *testing.T, predicate string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(timeout))); err != nil {
		p.shot(t, "failed-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		t.Fatalf("waiting for %s: %v (summary %q, error %q)", predicate, err,
			p.evalQuiet(`document.getElementById("summary").textContent`), p.evalQuiet(`document.getElementById("error").textContent`))
	}
}

// waitSummary waits until the result count reads want ("1,000 objects").
func (p *tab) waitSummary(t *testing.T, want string) {
	t.Helper()
	p.wait(t, fmt.Sprintf(`document.getElementById("summary").textContent.startsWith(%q)`, want+" "))
}

func (p *tab) evalQuiet(expr string) string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	return fmt.Sprint(v)
}

// shot keeps a PNG of the tab's viewport as name.png in the screenshot folder.
func (p *tab) shot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}
