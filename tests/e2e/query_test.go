//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// queryCorpus is what TestQueryAPI seeds: in every member the same two namespaces, ConfigMaps with
// the same names (cm-00000…), label keys with dots and slashes, and a few Deployments with Running
// Pods plus Pods that stay Pending. member3 holds fewer ConfigMaps, and label values differ by
// cluster, so per-cluster answers differ.
type queryCorpus struct {
	namespaces []string
	configMaps map[string]int // per cluster, per namespace
}

func configMapsPerNamespace(cluster string) int {
	if cluster == "member3" {
		return 1500
	}
	return 1800
}

func corpusConfigMap(cluster, ns string, i int) *corev1.ConfigMap {
	labels := map[string]string{
		"app.kubernetes.io/name":    []string{"web", "api", "db", "cache", "queue", "worker"}[i%6],
		"app.kubernetes.io/part-of": []string{"shop", "payments"}[i%2],
		"app.kubernetes.io/version": "v" + strings.TrimPrefix(cluster, "member"),
		"team.example.com/owner":    fmt.Sprintf("team-%d", i%5),
	}
	if i%10 != 0 {
		labels["env"] = []string{"prod", "staging", "dev"}[i%3]
	}
	switch i % 4 {
	case 0:
		labels["tier"] = "frontend"
	case 1:
		labels["tier"] = "backend"
	}
	if i%17 == 0 {
		labels["canary"] = "true"
	}
	data := map[string]string{
		"settings.yaml": strings.Repeat(fmt.Sprintf("key-%d: value of a setting of %s\n", i, cluster), 30),
	}
	switch i % 5 {
	case 0:
		data["mode"] = "fast"
	case 1:
		data["mode"] = "safe"
	case 2:
		data["mode"] = "" // empty: "mode=" matches it, like a missing one
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: ns, Labels: labels,
			Annotations: map[string]string{"example.com/owner": fmt.Sprintf("team-%d", i%3), "example.com/ticket": fmt.Sprintf("OPS-%d", i)}},
		Data: data,
	}
}

func seedQueryCorpus(t *testing.T, env *testbed.Env) queryCorpus {
	t.Helper()
	c := queryCorpus{namespaces: []string{uniqueName("qa"), uniqueName("qb")}, configMaps: map[string]int{}}
	var wg sync.WaitGroup
	errs := make(chan error, len(env.Clusters))
	for _, cluster := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
		for _, ns := range c.namespaces {
			createNamespace(t, cs, ns)
		}
		c.configMaps[cluster] = configMapsPerNamespace(cluster)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := createConfigMaps(cs, cluster, c.namespaces, configMapsPerNamespace(cluster)); err != nil {
				errs <- fmt.Errorf("%s: %w", cluster, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, cluster := range env.Clusters {
		var b strings.Builder
		for _, app := range []string{"web", "api"} {
			fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: %[1]s, app.kubernetes.io/name: %[1]s}}
spec:
  replicas: 4
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, app.kubernetes.io/name: %[1]s}}
    spec:
      containers:
      - {name: main, image: "nginx:1.27"}
      - {name: envoy, image: "envoyproxy/envoy:v1.31"}
`, app, c.namespaces[0])
		}
		for i := range 2 {
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: stuck-%d, namespace: %s, labels: {app: stuck}}
spec:
  nodeSelector: {example.com/no-such-node: "true"}
  containers: [{name: main, image: "busybox:1.36"}]
`, i, c.namespaces[0])
		}
		env.KubectlRun(t, cluster, []byte(b.String()), "apply", "-f", "-")
	}
	for _, cluster := range env.Clusters {
		for _, d := range []string{"web", "api"} {
			env.KubectlRun(t, cluster, nil, "-n", c.namespaces[0], "rollout", "status", "deployment/"+d, "--timeout=180s")
		}
	}
	t.Cleanup(func() {
		for _, cluster := range env.Clusters {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
			for _, ns := range c.namespaces {
				_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
			}
		}
	})
	return c
}

func createConfigMaps(cs kubernetes.Interface, cluster string, namespaces []string, perNamespace int) error {
	type job struct {
		ns string
		i  int
	}
	jobs := make(chan job)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				_, err := cs.CoreV1().ConfigMaps(j.ns).Create(context.Background(), corpusConfigMap(cluster, j.ns, j.i), metav1.CreateOptions{})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, ns := range namespaces {
		for i := range perNamespace {
			jobs <- job{ns, i}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func (c queryCorpus) registries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var sel strings.Builder
	for _, ns := range c.namespaces {
		fmt.Fprintf(&sel, "  - {apiVersion: v1, kind: ConfigMap, namespace: %s}\n  - {apiVersion: v1, kind: Pod, namespace: %[1]s}\n  - {apiVersion: apps/v1, kind: Deployment, namespace: %[1]s}\n", ns)
	}
	writeFile(t, filepath.Join(dir, "query.yaml"), "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: query-corpus}\nspec:\n  resourceSelectors:\n"+sel.String())
	return dir
}

// queryPipeline is a collector, an indexer and a query API over indices of their own.
type queryPipeline struct {
	// owner is the test that started the pipeline: a component it restarts from a subtest lives as
	// long as the pipeline, not as the subtest (whose end would stop it for the tests after).
	owner              *testing.T
	env                *testbed.Env
	registries         string
	topic, prefix      string
	collector, indexer *process
	collectorStatus    string
	indexerBase        string // the indexer's /metrics and probes
	base               string // the query API
}

func startQueryPipeline(t *testing.T, env *testbed.Env, registries string, indexerArgs ...string) *queryPipeline {
	t.Helper()
	p := startIngest(t, env, registries, indexerArgs...)
	p.base = p.startQueryAPI(t, "--stale-after", "3s", "--poll-interval", "500ms")
	return p
}

// startIngest starts the pipeline's collector and indexer, and no query API: for a test that starts
// its own.
func startIngest(t *testing.T, env *testbed.Env, registries string, indexerArgs ...string) *queryPipeline {
	t.Helper()
	p := &queryPipeline{owner: t, env: env, registries: registries, topic: uniqueName("query"), prefix: uniqueName("qe2e")}
	tailTopic(t, env.KafkaBrokers, p.topic) // creates the topic
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", p.topic + "-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", p.prefix, "--listen", addr, "--batch-interval", "100ms", "--watermark-interval", "500ms"}, indexerArgs...)
	p.indexer, p.indexerBase = startProcess(t, "indexer", args...), "http://"+addr
	waitHTTP(t, p.indexerBase+"/readyz", 2*time.Minute)
	var collectorBase string
	p.collector, collectorBase = startCollector(t, env, registries, p.topic, "--page-size", "500")
	p.collectorStatus = collectorBase + "/status"
	waitHTTP(t, collectorBase+"/readyz", 3*time.Minute)
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+p.prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return p
}

// restartCollector kills the pipeline's collector (-9), runs meanwhile, and starts another on the
// same address, so the query APIs' status URL stays right: it lists every member again, in a new
// epoch.
func (p *queryPipeline) restartCollector(t *testing.T, meanwhile func()) {
	t.Helper()
	p.collector.kill()
	meanwhile()
	addr := strings.TrimSuffix(strings.TrimPrefix(p.collectorStatus, "http://"), "/status")
	p.collector, _ = startCollector(p.owner, p.env, p.registries, p.topic, "--page-size", "500", "--listen", addr)
	waitHTTP(t, "http://"+addr+"/readyz", 3*time.Minute)
}

// startQueryAPI starts a query API on the pipeline's indices and returns its base URL.
func (p *queryPipeline) startQueryAPI(t *testing.T, extra ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.startQueryAPIAt(t, addr, extra...)
	return "http://" + addr
}

// startQueryAPIAt starts a query API on addr and waits until it is ready.
func (p *queryPipeline) startQueryAPIAt(t *testing.T, addr string, extra ...string) *process {
	t.Helper()
	args := append([]string{"queryapi", "--anonymous", "--listen", addr, "--opensearch-addresses", p.env.OpenSearchURL,
		"--index-prefix", p.prefix, "--collector-status-urls", p.collectorStatus,
		"--kafka-brokers", strings.Join(p.env.KafkaBrokers, ","), "--topic", p.topic,
		"--indexer-group", p.topic + "-indexer"}, extra...)
	proc := startProcess(t, "queryapi", args...)
	waitHTTP(t, "http://"+addr+"/readyz", 2*time.Minute)
	return proc
}

// answer is a decoded search response.
type answer struct {
	code     int
	warnings []string
	result   queryapi.SearchResult
	status   metav1.Status
	raw      []byte
}

func get(t *testing.T, base, path string, params url.Values) answer {
	t.Helper()
	_, a := timedGet(t, base+path+"?"+params.Encode())
	return a
}

// timedGet fetches a URL and decodes the answer; the duration covers sending the request and reading
// the whole answer, not decoding it (the query benchmark times it like a direct OpenSearch search).
func timedGet(t *testing.T, url string) (time.Duration, answer) {
	t.Helper()
	d, resp, body := timedFetch(t, url, "")
	a := answer{code: resp.StatusCode, warnings: resp.Header.Values("Warning"), raw: body}
	target := any(&a.result)
	if resp.StatusCode != http.StatusOK {
		target = &a.status
	}
	if err := json.Unmarshal(body, target); err != nil {
		t.Fatalf("GET %s: %d, undecodable: %v\n%.500s", url, resp.StatusCode, err, body)
	}
	return d, a
}

// timedFetch GETs a URL, with token as its bearer token unless empty, and reads the whole answer;
// the duration covers sending the request and reading the answer.
func timedFetch(t *testing.T, url, token string) (time.Duration, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil) // no test context: tests fetch from Cleanup too
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	return d, resp, body
}

// item is what the tests read of a returned object.
type item struct {
	cluster, namespace, name, uid string
	obj                           map[string]any
}

func itemOf(t *testing.T, raw json.RawMessage) item {
	t.Helper()
	var u unstructured.Unstructured
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return item{cluster: u.GetAnnotations()[document.CachedFromClusterAnnotation], namespace: u.GetNamespace(),
		name: u.GetName(), uid: string(u.GetUID()), obj: u.Object}
}

// searchAll walks every page of a search and returns the items and the first page's answer.
func searchAll(t *testing.T, base string, params url.Values, between func(page int)) ([]item, answer) {
	t.Helper()
	params = maps.Clone(params)
	var (
		items []item
		first answer
	)
	for page := 0; ; page++ {
		a := get(t, base, queryapi.PathSearch, params)
		if a.code != http.StatusOK {
			t.Fatalf("search %s page %d: %d %s", params.Encode(), page, a.code, a.status.Message)
		}
		if page == 0 {
			first = a
		}
		for _, raw := range a.result.Items {
			items = append(items, itemOf(t, raw))
		}
		if a.result.Metadata.Continue == "" {
			return items, first
		}
		if between != nil {
			between(page)
		}
		params.Set("continue", a.result.Metadata.Continue)
	}
}

// memberTruth lists objects of one resource in the corpus namespaces of every member with kubectl,
// with a label and field selector when given, keyed by uid.
func memberTruth(t *testing.T, env *testbed.Env, namespaces []string, resource, labelSel, fieldSel string) map[string]item {
	t.Helper()
	out := map[string]item{}
	for _, cluster := range env.Clusters {
		for _, ns := range namespaces {
			args := []string{"get", resource, "-n", ns, "-o", "json"}
			if labelSel != "" {
				args = append(args, "-l", labelSel)
			}
			if fieldSel != "" {
				args = append(args, "--field-selector", fieldSel)
			}
			var list struct {
				Items []map[string]any `json:"items"`
			}
			if err := json.Unmarshal(env.KubectlRun(t, cluster, nil, args...), &list); err != nil {
				t.Fatal(err)
			}
			for _, obj := range list.Items {
				u := unstructured.Unstructured{Object: obj}
				out[string(u.GetUID())] = item{cluster: cluster, namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), obj: obj}
			}
		}
	}
	return out
}

// fieldMatches evaluates one field selector term client-side, with kubesearch's documented
// semantics: a path through arrays matches if any element matches; "" means missing or empty.
func fieldMatches(obj map[string]any, path, op, value string) bool {
	vals := leaves(obj, strings.Split(path, "."))
	has := slices.Contains(vals, value)
	if value == "" && len(vals) == 0 {
		has = true
	}
	if op == "!=" {
		return !has
	}
	return has
}

// leaves returns the string forms of the values at path (keys may hold dots: the rest of the path
// is tried as one key too).
func leaves(v any, path []string) []string {
	if len(path) == 0 {
		switch x := v.(type) {
		case string:
			return []string{x}
		case bool, float64, int64:
			return []string{fmt.Sprint(x)}
		case []any:
			var out []string
			for _, e := range x {
				out = append(out, leaves(e, nil)...)
			}
			return out
		}
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		var out []string
		for n := 1; n <= len(path); n++ {
			if child, ok := x[strings.Join(path[:n], ".")]; ok {
				out = append(out, leaves(child, path[n:])...)
			}
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e, path)...)
		}
		return out
	}
	return nil
}

func uidSet(items []item) map[string]item {
	out := map[string]item{}
	for _, it := range items {
		out[it.uid] = it
	}
	return out
}

// diff describes how got differs from want, or "" when they are equal.
func diff(got []item, want map[string]item) string {
	gotSet := uidSet(got)
	var extra, missing []string
	for uid, it := range gotSet {
		if _, ok := want[uid]; !ok {
			extra = append(extra, it.cluster+"/"+it.namespace+"/"+it.name)
		}
	}
	for uid, it := range want {
		if _, ok := gotSet[uid]; !ok {
			missing = append(missing, it.cluster+"/"+it.namespace+"/"+it.name)
		}
	}
	if len(got) != len(gotSet) {
		extra = append(extra, fmt.Sprintf("(%d items returned twice)", len(got)-len(gotSet)))
	}
	if len(extra)+len(missing) == 0 {
		return ""
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("got %d, want %d; %d extra %v; %d missing %v", len(got), len(want),
		len(extra), extra[:min(5, len(extra))], len(missing), missing[:min(5, len(missing))])
}

// waitCaughtUp waits until the fleet endpoint shows every pair of the corpus Running, listed, not
// lagging, with as many documents as the members hold, and a watermark no lower than the
// resourceVersion of any object the member lists.
func (p *queryPipeline) waitCaughtUp(t *testing.T, c queryCorpus, timeout time.Duration) {
	t.Helper()
	truth := map[string]map[string]int64{} // cluster/resource → count, max rv
	for _, res := range []string{"configmaps", "pods", "deployments"} {
		for _, it := range memberTruth(t, p.env, c.namespaces, res, "", "") {
			k := it.cluster + "/" + res
			if truth[k] == nil {
				truth[k] = map[string]int64{}
			}
			truth[k]["count"]++
			rv, _ := strconv.ParseInt(unstructuredRV(it.obj), 10, 64)
			truth[k]["rv"] = max(truth[k]["rv"], rv)
		}
	}
	var last string
	deadline := time.Now().Add(timeout)
	for {
		a := get(t, p.base, queryapi.PathFleet, nil)
		var fleet queryapi.FleetStatus
		if err := json.Unmarshal(a.raw, &fleet); err != nil {
			t.Fatal(err)
		}
		var problems []string
		for k, want := range truth {
			cluster, res, _ := strings.Cut(k, "/")
			i := slices.IndexFunc(fleet.Items, func(s queryapi.PairStatus) bool { return s.Cluster == cluster && s.Resource == res })
			if i < 0 {
				problems = append(problems, k+": not in the fleet status")
				continue
			}
			s := fleet.Items[i]
			switch {
			case s.State != "Running" || s.Listing:
				problems = append(problems, fmt.Sprintf("%s: state %s listing %v", k, s.State, s.Listing))
			case s.LagSeconds == nil || *s.LagSeconds != 0:
				problems = append(problems, fmt.Sprintf("%s: lag %v", k, s.LagSeconds))
			case s.Documents == nil || *s.Documents != want["count"]:
				problems = append(problems, fmt.Sprintf("%s: %v documents, member has %d", k, s.Documents, want["count"]))
			case s.IndexedResourceVersion < want["rv"]:
				problems = append(problems, fmt.Sprintf("%s: watermark %d below the member's newest object %d", k, s.IndexedResourceVersion, want["rv"]))
			}
		}
		if len(problems) == 0 {
			return
		}
		slices.Sort(problems)
		last = strings.Join(problems, "\n")
		if time.Now().After(deadline) {
			t.Fatalf("index did not catch up with the members in %s:\n%s", timeout, last)
		}
		time.Sleep(time.Second)
	}
}

// setPITLimit sets OpenSearch's search.max_open_pit_context for the test, and back to the default
// after it, whatever happens.
func setPITLimit(t *testing.T, env *testbed.Env, limit string) {
	t.Helper()
	put := func(ctx context.Context, value string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, env.OpenSearchURL+"/_cluster/settings",
			strings.NewReader(`{"transient":{"search.max_open_pit_context":`+value+`}}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("PUT _cluster/settings: %s", resp.Status)
		}
		return nil
	}
	if err := put(t.Context(), limit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := put(context.Background(), "null"); err != nil {
			t.Errorf("reset search.max_open_pit_context: %v", err)
		}
	})
}

func unstructuredRV(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	return u.GetResourceVersion()
}

// TestQueryAPI runs the REST search on a pipeline (collector → Kafka → indexer → OpenSearch) fed by
// the three members, over a corpus of more than 10,000 objects, and compares every answer with what
// kubectl says on each member.
func TestQueryAPI(t *testing.T) {
	env := testbed.Get(t)
	start := time.Now()
	c := seedQueryCorpus(t, env)
	t.Logf("seeded the corpus in %s", time.Since(start).Round(time.Second))
	p := startQueryPipeline(t, env, c.registries(t))
	p.waitCaughtUp(t, c, 10*time.Minute)
	t.Logf("corpus indexed and caught up %s after start", time.Since(start).Round(time.Second))
	inCorpus := func(resource string) url.Values {
		return url.Values{"resources": {resource}, "namespaces": {strings.Join(c.namespaces, ",")}, "limit": {"1000"}}
	}

	t.Run("corpus size", func(t *testing.T) {
		a := get(t, p.base, queryapi.PathSearch, url.Values{"namespaces": {strings.Join(c.namespaces, ",")}, "limit": {"1"}})
		if a.result.Total <= 10000 {
			t.Fatalf("the corpus holds %d objects; the test wants more than 10,000", a.result.Total)
		}
		t.Logf("%d objects", a.result.Total)
	})

	t.Run("label selectors match kubectl", func(t *testing.T) {
		for _, sel := range []string{
			"app.kubernetes.io/name=web",
			"app.kubernetes.io/name==api",
			"env!=prod",
			"env in (prod,staging)",
			"env notin (dev)",
			"tier",
			"!tier",
			"app.kubernetes.io/name in (web,db),env!=dev,!canary",
			"team.example.com/owner=team-1,tier in (frontend),canary",
			"app.kubernetes.io/version=v2,app.kubernetes.io/part-of notin (shop)",
		} {
			params := inCorpus("configmaps")
			params.Set("labelSelector", sel)
			got, _ := searchAll(t, p.base, params, nil)
			if d := diff(got, memberTruth(t, env, c.namespaces, "configmaps", sel, "")); d != "" {
				t.Errorf("labelSelector %q: %s", sel, d)
			}
		}
	})

	t.Run("field selectors the members serve match kubectl", func(t *testing.T) {
		for _, tc := range []struct{ resource, labels, fields string }{
			{"configmaps", "", "metadata.name=cm-00042"},
			{"configmaps", "app.kubernetes.io/name=web", "metadata.name!=cm-00006"},
			{"configmaps", "tier=backend", "metadata.namespace=" + c.namespaces[1]},
			{"pods", "", "status.phase=Running"},
			{"pods", "", "status.phase!=Running"},
			{"pods", "", "spec.nodeName="},
			{"pods", "app=web", "spec.nodeName!=,status.phase=Running"},
		} {
			params := inCorpus(tc.resource)
			params.Set("fieldSelector", tc.fields)
			if tc.labels != "" {
				params.Set("labelSelector", tc.labels)
			}
			got, _ := searchAll(t, p.base, params, nil)
			want := memberTruth(t, env, c.namespaces, tc.resource, tc.labels, tc.fields)
			if len(want) == 0 {
				t.Errorf("%s %q %q: kubectl finds nothing; the case proves nothing", tc.resource, tc.labels, tc.fields)
			}
			if d := diff(got, want); d != "" {
				t.Errorf("%s labelSelector %q fieldSelector %q: %s", tc.resource, tc.labels, tc.fields, d)
			}
		}
	})

	t.Run("field selectors on any path match a client-side evaluation", func(t *testing.T) {
		all := map[string]map[string]item{}
		for _, res := range []string{"configmaps", "pods"} {
			all[res] = memberTruth(t, env, c.namespaces, res, "", "")
		}
		for _, tc := range []struct{ resource, labels, path, op, value string }{
			{"configmaps", "", "data.mode", "=", "fast"},
			{"configmaps", "", "data.mode", "!=", "fast"},
			{"configmaps", "", "data.mode", "=", ""},
			{"configmaps", "", "data.mode", "!=", ""},
			{"configmaps", "tier=frontend", "metadata.annotations.example.com/owner", "=", "team-2"},
			{"configmaps", "", "metadata.labels.app.kubernetes.io/name", "==", "queue"},
			{"pods", "", "spec.containers.image", "=", "nginx:1.27"},
			{"pods", "", "spec.containers.name", "!=", "envoy"},
			{"pods", "app=api", "status.containerStatuses.ready", "=", "true"},
		} {
			var labelFilter map[string]item
			if tc.labels != "" {
				labelFilter = memberTruth(t, env, c.namespaces, tc.resource, tc.labels, "")
			}
			want := map[string]item{}
			for uid, it := range all[tc.resource] {
				if labelFilter != nil {
					if _, ok := labelFilter[uid]; !ok {
						continue
					}
				}
				if fieldMatches(it.obj, tc.path, strings.TrimPrefix(tc.op, "="), tc.value) {
					want[uid] = it
				}
			}
			if len(want) == 0 || len(want) == len(all[tc.resource]) {
				t.Errorf("%s %s%s%s selects %d of %d: the case proves nothing", tc.resource, tc.path, tc.op, tc.value, len(want), len(all[tc.resource]))
			}
			params := inCorpus(tc.resource)
			params.Set("fieldSelector", tc.path+tc.op+tc.value)
			if tc.labels != "" {
				params.Set("labelSelector", tc.labels)
			}
			got, _ := searchAll(t, p.base, params, nil)
			if d := diff(got, want); d != "" {
				t.Errorf("%s fieldSelector %s%s%s: %s", tc.resource, tc.path, tc.op, tc.value, d)
			}
		}
	})

	t.Run("name prefix, owner and sort", func(t *testing.T) {
		params := inCorpus("configmaps")
		params.Set("namePrefix", "cm-001")
		params.Set("sort", "name:desc,cluster")
		got, _ := searchAll(t, p.base, params, nil)
		want := map[string]item{}
		for uid, it := range memberTruth(t, env, c.namespaces, "configmaps", "", "") {
			if strings.HasPrefix(it.name, "cm-001") {
				want[uid] = it
			}
		}
		if d := diff(got, want); d != "" {
			t.Errorf("namePrefix cm-001: %s", d)
		}
		sorted := slices.IsSortedFunc(got, func(a, b item) int {
			return cmp.Or(-cmp.Compare(a.name, b.name), cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.uid, b.uid))
		})
		if !sorted {
			t.Error("items not in name:desc,cluster order")
		}

		pods := memberTruth(t, env, c.namespaces, "pods", "app=web", "")
		var owner string
		want = map[string]item{}
		for _, it := range pods {
			u := unstructured.Unstructured{Object: it.obj}
			if refs := u.GetOwnerReferences(); len(refs) == 1 {
				owner = refs[0].Kind + "/" + refs[0].Name
			}
		}
		for uid, it := range pods {
			u := unstructured.Unstructured{Object: it.obj}
			if refs := u.GetOwnerReferences(); len(refs) == 1 && refs[0].Kind+"/"+refs[0].Name == owner {
				want[uid] = it
			}
		}
		params = inCorpus("pods")
		params.Set("owner", owner)
		got, _ = searchAll(t, p.base, params, nil)
		if d := diff(got, want); d != "" || len(want) < len(env.Clusters) {
			t.Errorf("owner %s (%d pods on the members): %s", owner, len(want), d)
		}
	})

	t.Run("facets equal the members' counts", func(t *testing.T) {
		params := inCorpus("configmaps")
		params.Set("facets", "cluster,namespace,label:app.kubernetes.io/name,labels")
		params.Set("facetSize", "100")
		params.Set("limit", "1")
		a := get(t, p.base, queryapi.PathSearch, params)
		if a.code != http.StatusOK {
			t.Fatalf("%d %s", a.code, a.status.Message)
		}
		want := map[string]map[string]int64{"cluster": {}, "namespace": {}, "label:app.kubernetes.io/name": {}, "labels": {}}
		for _, it := range memberTruth(t, env, c.namespaces, "configmaps", "", "") {
			want["cluster"][it.cluster]++
			want["namespace"][it.namespace]++
			u := unstructured.Unstructured{Object: it.obj}
			for k, v := range u.GetLabels() {
				want["labels"][k+"="+v]++
				if k == "app.kubernetes.io/name" {
					want["label:app.kubernetes.io/name"][v]++
				}
			}
		}
		for _, f := range a.result.Facets {
			got := map[string]int64{}
			for _, b := range f.Buckets {
				got[b.Value] = b.Count
			}
			if !maps.Equal(got, want[f.Name]) || f.Other != 0 || f.ErrorBound != 0 {
				t.Errorf("facet %s = %v (other %d, error bound %d); members say %v", f.Name, got, f.Other, f.ErrorBound, want[f.Name])
			}
			delete(want, f.Name)
		}
		if len(want) > 0 {
			t.Errorf("facets missing from the answer: %v", slices.Collect(maps.Keys(want)))
		}
	})

	t.Run("answers carry freshness", func(t *testing.T) {
		a := get(t, p.base, queryapi.PathSearch, inCorpus("configmaps"))
		if len(a.warnings) > 0 {
			t.Errorf("caught-up answer carries warnings: %q", a.warnings)
		}
		var names []string
		for _, cl := range a.result.Clusters {
			names = append(names, cl.Name)
			if cl.State != "Running" || cl.Listing || cl.LagSeconds == nil || *cl.LagSeconds != 0 {
				t.Errorf("cluster %+v: want Running, listed, no lag", cl)
			}
		}
		if !slices.Equal(names, env.Clusters) {
			t.Errorf("clusters %v, want %v", names, env.Clusters)
		}
		params := inCorpus("configmaps")
		params.Set("clusters", "member1,member9")
		a = get(t, p.base, queryapi.PathSearch, params)
		if len(a.warnings) != 1 || !strings.Contains(a.warnings[0], "member9") {
			t.Errorf("a search naming an unknown cluster has warnings %q, want one naming member9", a.warnings)
		}
	})

	t.Run("bad input gets a Status naming the parameter", func(t *testing.T) {
		for _, tc := range []struct{ query, field string }{
			{"labelSelector=app%3D%3D%3Dweb", "labelSelector"},
			{"labelSelector=replicas>3", "labelSelector"},
			{"fieldSelector=status.phase", "fieldSelector"},
			{"sort=size", "sort"},
			{"limit=100000", "limit"},
			{"facets=owners", "facets"},
			{"labelselector=app%3Dweb", "labelselector"},
			{"continue=bm90LWEtdG9rZW4", "continue"},
		} {
			params, _ := url.ParseQuery(tc.query)
			a := get(t, p.base, queryapi.PathSearch, params)
			if a.code != http.StatusBadRequest || a.status.Kind != "Status" || a.status.Reason != metav1.StatusReasonBadRequest ||
				a.status.Details == nil || len(a.status.Details.Causes) != 1 || a.status.Details.Causes[0].Field != tc.field {
				t.Errorf("?%s: %d %s; want a 400 Status with one cause for %s", tc.query, a.code, a.raw, tc.field)
			}
		}
		resp, err := http.Post(p.base+queryapi.PathSearch, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST search: %d, want 405", resp.StatusCode)
		}
	})

	t.Run("tokens are bound to their query", func(t *testing.T) {
		params := inCorpus("configmaps")
		params.Set("limit", "10")
		first := get(t, p.base, queryapi.PathSearch, params)
		tok := first.result.Metadata.Continue
		if tok == "" {
			t.Fatal("no continue token on a 10-item page of thousands")
		}
		tampered := tok[:len(tok)/2] + string(rune('A'+(tok[len(tok)/2]-'A'+1)%26)) + tok[len(tok)/2+1:]
		foreign := maps.Clone(params)
		foreign.Set("labelSelector", "tier")
		foreign.Set("continue", tok)
		params.Set("continue", tampered)
		for name, q := range map[string]url.Values{"tampered": params, "foreign": foreign} {
			a := get(t, p.base, queryapi.PathSearch, q)
			if a.code != http.StatusBadRequest || a.status.Details == nil || a.status.Details.Causes[0].Field != "continue" {
				t.Errorf("%s token: %d %s; want 400 naming continue", name, a.code, a.raw)
			}
		}
	})

	t.Run("an expired token gets 410", func(t *testing.T) {
		short := p.startQueryAPI(t, "--page-keep-alive", "1s")
		params := inCorpus("configmaps")
		params.Set("limit", "10")
		first := get(t, short, queryapi.PathSearch, params)
		if first.result.Metadata.Continue == "" {
			t.Fatal("no continue token")
		}
		time.Sleep(3 * time.Second) // the snapshot's keep-alive is 1s
		params.Set("continue", first.result.Metadata.Continue)
		a := get(t, short, queryapi.PathSearch, params)
		if a.code != http.StatusGone || a.status.Reason != metav1.StatusReasonExpired {
			t.Errorf("expired token: %d %s; want 410 Expired", a.code, a.raw)
		}
	})

	t.Run("OpenSearch unreachable gets 503", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		startProcess(t, "queryapi-dead", "queryapi", "--anonymous", "--listen", addr, "--opensearch-addresses",
			fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "--request-timeout", "5s")
		waitHTTP(t, "http://"+addr+"/healthz", time.Minute)
		a := get(t, "http://"+addr, queryapi.PathSearch, url.Values{"labelSelector": {"app=web"}})
		if a.code != http.StatusServiceUnavailable || a.status.Reason != metav1.StatusReasonServiceUnavailable || a.status.Message == "" {
			t.Errorf("%d %s; want a 503 Status with the reason", a.code, a.raw)
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz %d without OpenSearch, want 503", resp.StatusCode)
		}
	})

	t.Run("paging goes on without a snapshot when OpenSearch allows no more, and says so", func(t *testing.T) {
		setPITLimit(t, env, "0")
		params := inCorpus("configmaps")
		params.Set("labelSelector", "tier")
		params.Set("limit", "400")
		var pages int
		var warned []string
		got, first := searchAll(t, p.base, params, func(int) { pages++ })
		warned = first.warnings
		if pages == 0 {
			t.Fatal("a single page")
		}
		if !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, "not one snapshot") }) {
			t.Errorf("first page warnings %q, want one saying the pages are not one snapshot", warned)
		}
		if d := diff(got, memberTruth(t, env, c.namespaces, "configmaps", "tier", "")); d != "" {
			t.Errorf("pages without a snapshot: %s", d)
		}
	})

	// Paging last: it changes the corpus.
	t.Run("pages form one snapshot while objects change", func(t *testing.T) {
		params := inCorpus("configmaps")
		params.Set("limit", "500")
		before := memberTruth(t, env, c.namespaces, "configmaps", "", "")
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "member1"))
		const changes = 150
		churned := false
		got, first := searchAll(t, p.base, params, func(page int) {
			if page != 0 {
				return
			}
			// After the first page: create and delete objects, and let the index show them.
			for i := range changes {
				cm := corpusConfigMap("member1", c.namespaces[0], 90000+i)
				cm.Name = fmt.Sprintf("churn-%03d", i)
				if _, err := cs.CoreV1().ConfigMaps(c.namespaces[0]).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := cs.CoreV1().ConfigMaps(c.namespaces[1]).Delete(context.Background(), fmt.Sprintf("cm-%05d", i), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			p.waitCaughtUp(t, c, 2*time.Minute)
			churned = true
		})
		if !churned {
			t.Fatal("the walk had a single page; nothing changed during it")
		}
		if len(first.warnings) > 0 {
			t.Errorf("first page warnings: %q", first.warnings)
		}
		if d := diff(got, before); d != "" {
			t.Errorf("pages differ from the snapshot at the first page: %s", d)
		}
		if int64(len(got)) != first.result.Total {
			t.Errorf("%d items over all pages, total said %d", len(got), first.result.Total)
		}
		now, a := searchAll(t, p.base, params, nil)
		if want := int64(len(before)); a.result.Total != want || int64(len(now)) != want {
			t.Errorf("after the walk: total %d, %d items; want %d (as many created as deleted)", a.result.Total, len(now), want)
		}
		if d := diff(now, memberTruth(t, env, c.namespaces, "configmaps", "", "")); d != "" {
			t.Errorf("a new search does not show the changes: %s", d)
		}
	})

	// Last: stopping the indexer makes answers stale, and they say so.
	t.Run("a stopped indexer makes answers carry a staleness warning", func(t *testing.T) {
		p.indexer.signal(syscall.SIGSTOP)
		t.Cleanup(func() { p.indexer.signal(syscall.SIGCONT) })
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "member2"))
		cm := corpusConfigMap("member2", c.namespaces[0], 99999)
		if _, err := cs.CoreV1().ConfigMaps(c.namespaces[0]).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, "a staleness warning", time.Minute, func(context.Context) (bool, error) {
			a := get(t, p.base, queryapi.PathSearch, inCorpus("configmaps"))
			return slices.ContainsFunc(a.warnings, func(w string) bool {
				return strings.Contains(w, "cluster member2: configmaps: index") && strings.Contains(w, "behind collection")
			}), nil
		})
		p.indexer.signal(syscall.SIGCONT)
		pollUntil(t, "the warning to clear", time.Minute, func(context.Context) (bool, error) {
			return len(get(t, p.base, queryapi.PathSearch, inCorpus("configmaps")).warnings) == 0, nil
		})
	})
}
