//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// cachedTool is a client the e2e drives the facade with, built or installed by a tests/testbed
// script into its version-keyed cache folder the first time a test needs it, and reused after.
type cachedTool struct {
	script string // in tests/testbed; prints the tool's path
	once   sync.Once
	path   string
	err    error
}

var (
	pythonClient      = &cachedTool{script: "build-python-client.sh"}
	controllerRuntime = &cachedTool{script: "build-controller-runtime.sh"}
	k9sTool           = &cachedTool{script: "build-k9s.sh"}
)

func (c *cachedTool) get(t *testing.T) string {
	t.Helper()
	c.once.Do(func() {
		start := time.Now()
		cmd := exec.Command("bash", filepath.Join(testbed.Root(), "tests/testbed", c.script))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			c.err = fmt.Errorf("%s: %w\n%s", c.script, err, stderr.String())
			return
		}
		c.path = strings.TrimSpace(string(out))
		t.Logf("%s: %s in %s", c.script, c.path, time.Since(start).Round(time.Second))
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.path
}

// clientRun is a client program printing one JSON line per thing it saw.
type clientRun struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []json.RawMessage
	stderr strings.Builder
	done   chan struct{}
	err    error
}

// startClient runs a client program until the test ends (SIGTERM, then SIGKILL); its standard
// error is logged if the test fails.
func startClient(t *testing.T, name string, env []string, argv ...string) *clientRun {
	t.Helper()
	c := &clientRun{name: name, done: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &lockedWriter{mu: &c.mu, w: &c.stderr}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, json.RawMessage(slices.Clone(sc.Bytes())))
			c.mu.Unlock()
		}
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			c.mu.Lock()
			t.Logf("---- %s: standard error ----\n%s", name, tail(c.stderr.String(), 4000))
			c.mu.Unlock()
		}
	})
	return c
}

func (c *clientRun) snapshot() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

// waitLine waits until a line satisfies cond and returns it; it fails at once if the program ended.
func (c *clientRun) waitLine(t *testing.T, what string, timeout time.Duration, cond func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	var found json.RawMessage
	pollUntil(t, c.name+": "+what, timeout, func(context.Context) (bool, error) {
		for _, l := range c.snapshot() {
			if cond(l) {
				found = l
				return true, nil
			}
		}
		select {
		case <-c.done:
			return false, fmt.Errorf("%s ended (%v) first: %s", c.name, c.err, tail(c.stderr.String(), 2000))
		default:
			return false, nil
		}
	})
	return found
}

// exited waits for the program's end and fails unless it exited 0.
func (c *clientRun) exited(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("%s still runs after %s", c.name, timeout)
	}
	if c.err != nil {
		t.Fatalf("%s: %v\n%s", c.name, c.err, tail(c.stderr.String(), 4000))
	}
}

// memberPod is a Pod as its member has it.
type memberPod struct {
	cluster, namespace, name, uid string
	labels                        map[string]string
}

func (p memberPod) qualified() string { return p.name + "_" + p.cluster }

// memberPods lists ns's Pods in every member, asked of the members themselves.
func memberPods(t *testing.T, env *testbed.Env, ns string) []memberPod {
	t.Helper()
	var out []memberPod
	for _, c := range env.Clusters {
		list, err := kubernetes.NewForConfigOrDie(env.RESTConfig(t, c)).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list pods of %s in %s: %v", ns, c, err)
		}
		for _, p := range list.Items {
			out = append(out, memberPod{cluster: c, namespace: ns, name: p.Name, uid: string(p.UID), labels: p.Labels})
		}
	}
	return out
}

// clientPod is a Pod as a client program reports it.
type clientPod struct {
	Namespace, Name, Cluster string
	Labels                   map[string]string
}

func clientPodKeys(ps []clientPod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Cluster + "/" + p.Name
	}
	slices.Sort(out)
	return out
}

// podKeys are cluster/name of the pods whose labels match sel (nil: all); qualified names them as
// the qualified view does.
func podKeys(ps []memberPod, qualified bool, sel func(map[string]string) bool) []string {
	var out []string
	for _, p := range ps {
		if sel != nil && !sel(p.labels) {
			continue
		}
		name := p.name
		if qualified {
			name = p.qualified()
		}
		out = append(out, p.cluster+"/"+name)
	}
	slices.Sort(out)
	return out
}

func clientPodSpec(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}},
			TerminationGracePeriodSeconds: ptr(int64(0))},
	}
}

// TestRealClients drives the facade with clients nobody here wrote — kubectl's describe, events
// and logs, the Python kubernetes client, a controller-runtime manager and k9s — through a
// kubeconfig of `kubesearch kubeconfig`, over one namespace of Pods in every member where `twin` is
// in every member (a name repeated across clusters) and the other Pods are in one each. One
// pipeline serves them all but k9s, which needs Events of the other API group (testK9s). Every
// subtest compares what the client shows with the members' own Pods. The clients are built or
// installed into version-keyed caches by tests/testbed/build-{python-client,controller-runtime,k9s}.sh
// the first time (minutes cold, see the scripts).
func TestRealClients(t *testing.T) {
	env := testbed.Get(t)
	ns := uniqueName("clients")
	members := map[string]kubernetes.Interface{}
	for _, c := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, c))
		members[c] = cs
		createNamespace(t, cs, ns)
		for _, p := range []*corev1.Pod{
			clientPodSpec("api-"+c, map[string]string{"tier": "api"}),
			clientPodSpec("db-"+c, map[string]string{"tier": "db"}),
			clientPodSpec("twin", map[string]string{"tier": "twin"}),
		} {
			if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod %s in %s: %v", p.Name, c, err)
			}
		}
	}
	t.Cleanup(func() {
		for _, cs := range members {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	// Running first (kwok), so the lists and watches below race no status change.
	waitPodsRunning(t, ns, slices.Collect(maps.Values(members))...)
	registries := t.TempDir()
	writeFile(t, filepath.Join(registries, "clients.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: real-clients}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Pod, namespace: %[1]s}
  - {apiVersion: v1, kind: Event, namespace: %[1]s}
`, ns))
	p := startQueryPipeline(t, env, registries)
	k := newFacadeKubectl(t, env, p.base)
	want := len(memberPods(t, env, ns))
	pollUntil(t, "every seeded pod through the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := k.run(ctx, "--context", "kubesearch-qualified", "get", "pods", "-n", ns, "-o", "name")
		return err == nil && len(strings.Fields(out)) == want, nil
	})

	t.Run("kubectl describe, events and logs", func(t *testing.T) { testKubectlDescribeEventsLogs(t, env, ns, k) })
	t.Run("python", func(t *testing.T) { testPythonClient(t, env, members, ns, k.kubeconfig) })
	t.Run("controller-runtime", func(t *testing.T) { testControllerRuntime(t, env, members, ns, k.kubeconfig) })
	t.Run("k9s", func(t *testing.T) { testK9s(t, env, ns, k.kubeconfig) })
}

// testPythonClient runs tests/clients/python/facade.py: lists in the fleet and the qualified view,
// gets, selectors, a refused create, and a watch that sees a Pod created in member2.
func testPythonClient(t *testing.T, env *testbed.Env, members map[string]kubernetes.Interface, ns, kubeconfig string) {
	python := pythonClient.get(t)
	truth := memberPods(t, env, ns)
	added := uniqueName("py-added")
	run := startClient(t, "facade.py", nil, python, filepath.Join(testbed.Root(), "tests/clients/python/facade.py"),
		"--kubeconfig", kubeconfig, "--namespace", ns, "--unique", "api-member1", "--twin", "twin",
		"--label-selector", "tier in (api, db)", "--watch-for", added, "--timeout", "90")
	step := func(name string) func(json.RawMessage) bool {
		return func(l json.RawMessage) bool {
			var s struct{ Step string }
			return json.Unmarshal(l, &s) == nil && s.Step == name
		}
	}
	run.waitLine(t, "its watch about to open", 2*time.Minute, step("watching"))
	if _, err := members["member2"].CoreV1().Pods(ns).Create(t.Context(), clientPodSpec(added, map[string]string{"tier": "added"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run.exited(t, 2*time.Minute)
	steps := map[string]json.RawMessage{}
	for _, l := range run.snapshot() {
		var s struct{ Step string }
		if err := json.Unmarshal(l, &s); err != nil {
			t.Fatalf("facade.py printed %s: %v", l, err)
		}
		steps[s.Step] = l
	}
	pods := func(name string) []string {
		t.Helper()
		var s struct{ Pods []clientPod }
		if err := json.Unmarshal(steps[name], &s); err != nil {
			t.Fatalf("step %s: %q: %v", name, steps[name], err)
		}
		return clientPodKeys(s.Pods)
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: the Python client got\n%v\nwant (the members' own)\n%v", what, got, want)
		}
	}
	tier := func(values ...string) func(map[string]string) bool {
		return func(l map[string]string) bool { return slices.Contains(values, l["tier"]) }
	}
	check("list_pod_for_all_namespaces (fleet)", pods("fleet-list"), podKeys(truth, false, nil))
	check("list_namespaced_pod (qualified)", pods("qualified-list"), podKeys(truth, true, nil))
	check("read_namespaced_pod of each twin (qualified)", pods("qualified-get"), podKeys(truth, true, tier("twin")))
	check("label_selector 'tier in (api, db)'", pods("label-selector"), podKeys(truth, false, tier("api", "db")))
	check("field_selector metadata.name=twin (fleet)", pods("field-selector"), podKeys(truth, false, tier("twin")))
	check("field_selector metadata.name=twin_member3 (qualified)", pods("qualified-field-selector"), []string{"member3/twin_member3"})

	var got struct{ Pod clientPod }
	if err := json.Unmarshal(steps["get"], &got); err != nil || got.Pod.Name != "api-member1" || got.Pod.Cluster != "member1" {
		t.Errorf("read_namespaced_pod api-member1 (fleet): %s", steps["get"])
	}
	type refusal struct {
		Status          int
		Reason, Message string
	}
	var conflict, write refusal
	if err := json.Unmarshal(steps["get-twin"], &conflict); err != nil || conflict.Status != 409 || conflict.Reason != "Conflict" ||
		!containsAll(conflict.Message, env.Clusters) {
		t.Errorf("read_namespaced_pod twin (fleet, in every member): %s, want a 409 naming %v", steps["get-twin"], env.Clusters)
	}
	if err := json.Unmarshal(steps["create"], &write); err != nil || write.Status != 405 || write.Reason != "MethodNotAllowed" ||
		!strings.Contains(write.Message, "read-only") {
		t.Errorf("create_namespaced_pod: %s, want a 405 MethodNotAllowed saying the facade is read-only", steps["create"])
	}
	t.Logf("create_namespaced_pod through the facade: %d %s", write.Status, write.Message)
	type event struct {
		Type string
		clientPod
	}
	var watched struct{ Events []event }
	if err := json.Unmarshal(steps["watch"], &watched); err != nil {
		t.Fatalf("watch: %s: %v", steps["watch"], err)
	}
	if !slices.ContainsFunc(watched.Events, func(e event) bool {
		return e.Type == "ADDED" && e.Name == added && e.Cluster == "member2" && e.Labels["tier"] == "added"
	}) {
		t.Errorf("the watch from the list's resourceVersion: %s, want the ADDED of %s from member2", steps["watch"], added)
	}
}

// crReport is a line of tests/clients/controllerruntime.
type crReport struct {
	Kind, Key, Cluster, UID, Text string
	Labels                        map[string]string
	Gone                          bool
	Keys                          []string
}

func crLine(l json.RawMessage) crReport {
	var r crReport
	_ = json.Unmarshal(l, &r)
	return r
}

// testControllerRuntime runs a controller-runtime manager with a Pod reconciler against the
// qualified view, where its cache holds every member's Pods and follows changes in members, and two
// against the fleet view (the cache streaming its list, as client-go 0.37 does, and listing), where
// names repeat and the server says so in a Warning.
func testControllerRuntime(t *testing.T, env *testbed.Env, members map[string]kubernetes.Interface, ns, kubeconfig string) {
	bin := controllerRuntime.get(t)
	truth := memberPods(t, env, ns)
	qualified := startClient(t, "controller-runtime (qualified)", nil, bin, "--kubeconfig", kubeconfig, "--context", "kubesearch-qualified")
	streaming := startClient(t, "controller-runtime (fleet, streaming list)", nil, bin, "--kubeconfig", kubeconfig, "--context", "kubesearch")
	listing := startClient(t, "controller-runtime (fleet, list)", []string{"KUBE_FEATURE_WatchListClient=false"}, bin, "--kubeconfig", kubeconfig, "--context", "kubesearch")

	kind := func(k string) func(json.RawMessage) bool {
		return func(l json.RawMessage) bool { return crLine(l).Kind == k }
	}
	var want []string
	for _, p := range truth {
		want = append(want, ns+"/"+p.qualified())
	}
	slices.Sort(want)
	if got := crLine(qualified.waitLine(t, "its cache synced", time.Minute, kind("synced"))).Keys; !slices.Equal(got, want) {
		t.Errorf("the qualified view's cache holds\n%v\nwant every member's pod\n%v", got, want)
	}
	// reconciled waits for a reconcile of the pod as its member has it.
	reconciled := func(p memberPod, what string, cond func(crReport) bool) {
		t.Helper()
		qualified.waitLine(t, what, time.Minute, func(l json.RawMessage) bool {
			r := crLine(l)
			return r.Kind == "reconcile" && r.Key == ns+"/"+p.qualified() && cond(r)
		})
	}
	for _, p := range truth {
		reconciled(p, "a reconcile of "+p.qualified(), func(r crReport) bool {
			return r.Cluster == p.cluster && r.UID == p.uid && maps.Equal(r.Labels, p.labels)
		})
	}

	t.Run("changes in a member reach the reconciler", func(t *testing.T) {
		cs := members["member3"]
		created, err := cs.CoreV1().Pods(ns).Create(t.Context(), clientPodSpec(uniqueName("cr-added"), map[string]string{"tier": "added"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := memberPod{cluster: "member3", namespace: ns, name: created.Name, uid: string(created.UID)}
		reconciled(p, "the created pod", func(r crReport) bool { return r.UID == p.uid && r.Labels["tier"] == "added" })
		patch := []byte(`{"metadata":{"labels":{"tier":"relabelled"}}}`)
		if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), p.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		reconciled(p, "the relabelled pod", func(r crReport) bool { return r.UID == p.uid && r.Labels["tier"] == "relabelled" })
		if err := cs.CoreV1().Pods(ns).Delete(t.Context(), p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		reconciled(p, "the deleted pod gone", func(r crReport) bool { return r.Gone })
	})

	t.Run("the fleet view warns that names repeat", func(t *testing.T) {
		distinct := map[string]bool{}
		for _, p := range truth {
			distinct[ns+"/"+p.name] = true
		}
		for _, run := range []*clientRun{streaming, listing} {
			w := crLine(run.waitLine(t, "a Warning of repeated names", time.Minute, func(l json.RawMessage) bool {
				r := crLine(l)
				return r.Kind == "warning" && strings.Contains(r.Text, "names repeat across clusters")
			}))
			if !strings.Contains(w.Text, ns+"/twin in member1 and member2") || !strings.Contains(w.Text, "kubesearch-qualified") {
				t.Errorf("%s: Warning %q, want it to name %s/twin and the qualified context", run.name, w.Text, ns)
			}
			// What the Warning is about: the cache keeps one twin of three.
			keys := crLine(run.waitLine(t, "its cache synced", time.Minute, kind("synced"))).Keys
			if len(keys) != len(distinct) || len(distinct) >= len(truth) {
				t.Errorf("%s: the cache holds %d pods %v, want the %d distinct names of the members' %d pods", run.name, len(keys), keys, len(distinct), len(truth))
			}
			t.Logf("%s: Warning: %s", run.name, w.Text)
		}
	})
}

// tmux is a private tmux server (its own socket) with one session of a fixed size.
type tmux struct {
	socket, session string
}

func newTmux(t *testing.T, width, height int, env []string, argv ...string) *tmux {
	t.Helper()
	dir := t.TempDir()
	tm := &tmux{socket: filepath.Join(dir, "tmux.sock"), session: "client"}
	// No status line (the pane is the whole window); a pane whose program ended stays, so its last
	// screen can be read.
	conf := filepath.Join(dir, "tmux.conf")
	writeFile(t, conf, "set -g status off\nset -g remain-on-exit on\nset -g history-limit 0\n")
	cmd := append([]string{"env"}, env...)
	cmd = append(cmd, argv...)
	args := append([]string{"-f", conf, "new-session", "-d", "-s", tm.session, "-x", fmt.Sprint(width), "-y", fmt.Sprint(height)}, cmd...)
	tm.run(t, args...)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmux) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (tm *tmux) keys(t *testing.T, keys ...string) {
	t.Helper()
	tm.run(t, append([]string{"send-keys", "-t", tm.session}, keys...)...)
}

// k9sPrompt is k9s' command prompt (":"), a box whose line starts with its icon and ">".
var k9sPrompt = regexp.MustCompile(`(?m)^│ [^ │]*> `)

// command types a k9s command: ":", the prompt, the command, Enter, and waits for the prompt to go.
func (tm *tmux) command(t *testing.T, cmd string) {
	t.Helper()
	tm.keys(t, ":")
	tm.waitPane(t, "k9s' command prompt", 30*time.Second, k9sPrompt.MatchString)
	tm.keys(t, cmd, "Enter")
	tm.waitPane(t, "k9s' command prompt closed after "+cmd, 30*time.Second, func(p string) bool { return !k9sPrompt.MatchString(p) })
}

// keysUntil sends keys, and again every few seconds, until cond holds on the pane.
func (tm *tmux) keysUntil(t *testing.T, what string, timeout time.Duration, keys []string, cond func(pane string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		tm.keys(t, keys...)
		var pane string
		err := pollErr(t.Context(), 3*time.Second, func() bool {
			pane = tm.pane(t)
			return cond(pane)
		})
		if err == nil {
			return pane
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v; the screen:\n%s", what, err, pane)
		}
	}
}

func (tm *tmux) pane(t *testing.T) string {
	t.Helper()
	return tm.run(t, "capture-pane", "-p", "-t", tm.session)
}

// waitPane polls the pane until cond holds and returns it; the last pane is shown if it never does.
func (tm *tmux) waitPane(t *testing.T, what string, timeout time.Duration, cond func(pane string) bool) string {
	t.Helper()
	var pane string
	err := pollErr(t.Context(), timeout, func() bool {
		pane = tm.pane(t)
		return cond(pane)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; the screen:\n%s", what, err, pane)
	}
	return pane
}

func pollErr(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// k9sNotWanted is what k9s shows when it cannot use a context: its contexts view (where it falls
// back when listing is refused) and its error flashes.
var k9sNotWanted = []string{"contexts(", "Access denied", "Boom!", "ERR", "no connection", "Dial K8s"}

// startK9s runs k9s read-only in a tmux session of its own, against one context of kubeconfig, with
// its configuration, state and log in a fresh folder (its log is shown if the test fails).
func startK9s(t *testing.T, bin, kubeconfig, kubeContext string) *tmux {
	t.Helper()
	home := t.TempDir()
	// No look for a newer k9s on the internet.
	if err := os.MkdirAll(filepath.Join(home, "k9s"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "k9s", "config.yaml"), "k9s:\n  skipLatestRevCheck: true\n")
	tm := newTmux(t, 220, 60, []string{"HOME=" + home, "K9S_CONFIG_DIR=" + filepath.Join(home, "k9s"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "TERM=xterm-256color"},
		bin, "--kubeconfig", kubeconfig, "--context", kubeContext, "--readonly", "--logoless", "--logFile", filepath.Join(home, "k9s.log"))
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(home, "k9s.log"))
			t.Logf("---- k9s.log ----\n%s", tail(string(log), 6000))
		}
	})
	tm.waitPane(t, "k9s' first view", time.Minute, func(p string) bool { return strings.Contains(p, "pods(") })
	return tm
}

// testK9s drives k9s in tmux against the facade, read-only: pods of all namespaces, then events,
// in the qualified view (every member's Pod, named <name>_<cluster>) and in the fleet view (one row
// per namespace/name, as k9s keys them). k9s lists events from events.k8s.io/v1 only (it drops core
// v1 Events from its resources as deprecated); the pipeline selects core v1 Events (what kubectl
// describe and kubectl events read), which the facade serves in both groups.
func testK9s(t *testing.T, env *testbed.Env, ns, kubeconfig string) {
	bin := k9sTool.get(t)
	truth := memberPods(t, env, ns)
	for _, c := range []struct {
		context   string
		qualified bool
	}{{"kubesearch-qualified", true}, {"kubesearch", false}} {
		t.Run(c.context, func(t *testing.T) {
			names := map[string]bool{}
			for _, p := range truth {
				if c.qualified {
					names[p.qualified()] = true
				} else {
					names[p.name] = true
				}
			}
			tm := startK9s(t, bin, kubeconfig, c.context)
			tm.command(t, "pods")
			// 0 selects all namespaces; a key that came while the view was being switched is
			// lost, so it is pressed again until the view says so (pressing it twice is harmless).
			// The title counts the rows: every member's Pod in the qualified view, one per name in
			// the fleet view.
			title := fmt.Sprintf("pods(all)[%d]", len(names))
			pane := tm.keysUntil(t, title+" with every member's pod", time.Minute, []string{"0"}, func(p string) bool {
				return strings.Contains(p, title) && containsAll(p, slices.Collect(maps.Keys(names)))
			})
			if !containsNone(pane, k9sNotWanted) {
				t.Errorf("k9s shows one of %q:\n%s", k9sNotWanted, pane)
			}
			t.Logf("k9s --context %s, pods of all namespaces:\n%s", c.context, pane)
			tm.command(t, "events")
			pane = tm.waitPane(t, "the pods' events", time.Minute, func(p string) bool {
				return strings.Contains(p, "events(all)") && strings.Contains(p, "Scheduled") && strings.Contains(p, "pod/"+truth[0].name)
			})
			if !containsNone(pane, k9sNotWanted) {
				t.Errorf("k9s shows one of %q:\n%s", k9sNotWanted, pane)
			}
			t.Logf("k9s --context %s, events:\n%s", c.context, pane)
		})
	}
}

// testKubectlDescribeEventsLogs: kubectl describe and kubectl events show a Pod's events (the
// scheduler's) in both fleet views, describe of a repeated name is the fleet's 409, and kubectl logs
// (what stern reads too) is not served, saying to ask the member.
func testKubectlDescribeEventsLogs(t *testing.T, env *testbed.Env, ns string, k *facadeKubectl) {
	scheduled := func(name string) string {
		return "Successfully assigned " + ns + "/" + name + " to kwok-node-"
	}
	for _, c := range []struct{ context, pod, cluster string }{
		{"kubesearch", "api-member2", "member2"},
		{"kubesearch-qualified", "twin_member3", "member3"},
	} {
		var out string
		pollUntil(t, "kubectl describe pod "+c.pod+" with its events", time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, "--context", c.context, "describe", "pod", c.pod, "-n", ns)
			return strings.Contains(out, "Scheduled") && strings.Contains(out, scheduled(strings.TrimSuffix(c.pod, "_"+c.cluster))), nil
		})
		if !strings.Contains(out, "resource.karmada.io/cached-from-cluster: "+c.cluster) {
			t.Errorf("kubectl --context %s describe pod %s does not name its cluster:\n%s", c.context, c.pod, out)
		}
		events := k.mustRun(t, "--context", c.context, "events", "-n", ns, "--for", "pod/"+c.pod)
		if !strings.Contains(events, "Scheduled") || !strings.Contains(events, "Pod/"+c.pod) {
			t.Errorf("kubectl --context %s events --for pod/%s:\n%s", c.context, c.pod, events)
		}
	}
	all := k.mustRun(t, "events", "-n", ns)
	for _, c := range env.Clusters {
		if !strings.Contains(all, scheduled("api-"+c)) {
			t.Errorf("kubectl events -n %s lacks %s's Scheduled event:\n%s", ns, "api-"+c, all)
		}
	}
	if _, err := k.run(t.Context(), "describe", "pod", "twin", "-n", ns); err == nil || !containsAll(err.Error(), env.Clusters) {
		t.Errorf("kubectl describe pod twin (in every member) in the fleet view: %v, want the 409 naming %v", err, env.Clusters)
	}
	for _, c := range []struct{ context, pod string }{{"kubesearch", "api-member1"}, {"kubesearch-qualified", "twin_member1"}, {"kubesearch-member1", "twin"}} {
		_, err := k.run(t.Context(), "--context", c.context, "logs", c.pod, "-n", ns)
		if err == nil || !strings.Contains(err.Error(), "ask the member cluster") {
			t.Errorf("kubectl --context %s logs %s: %v, want the subresource's \"ask the member cluster\"", c.context, c.pod, err)
		}
	}
}

// waitPodsRunning waits until kwok has moved every Pod of ns in the members to Running: until then
// it writes their status, so reads after it race no status change, and a benchmark started
// meanwhile measures no apiserver busy with those writes.
func waitPodsRunning(t *testing.T, ns string, members ...kubernetes.Interface) {
	t.Helper()
	pollUntil(t, "every Pod of "+ns+" Running", 10*time.Minute, func(ctx context.Context) (bool, error) {
		for _, cs := range members {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 1})
			if err != nil || len(l.Items) > 0 {
				return false, nil // an apiserver restarting in a test is waited for too
			}
		}
		return true, nil
	})
}
