//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// watchListGate turns client-go's streaming lists (WatchListClient) on or off for the reflectors
// made after it is set: client-go reads the gate when it makes a reflector.
type watchListGate struct {
	mu   sync.Mutex
	base clientfeatures.Gates
	on   bool
}

func (g *watchListGate) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.on
	}
	return g.base.Enabled(f)
}

func (g *watchListGate) set(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = on
}

var watchList = &watchListGate{base: clientfeatures.FeatureGates(), on: true}

func init() { clientfeatures.ReplaceFeatureGates(watchList) }

// cmKey is what an informer must agree with the member on, per ConfigMap.
func cmKeys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName()+" "+string(o.GetUID())+" "+strings.Join(labelPairs(o.GetLabels()), ","))
	}
	slices.Sort(out)
	return out
}

func labelPairs(l map[string]string) []string {
	var out []string
	for k, v := range l {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// memberConfigMaps are the keys of a namespace's ConfigMaps in the members; qualified names them
// <name>_<cluster>, else only cluster's are listed.
func memberConfigMaps(t *testing.T, env *testbed.Env, ns, cluster string, qualified bool) []string {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, c := range env.Clusters {
		if !qualified && c != cluster {
			continue
		}
		list, err := dynamic.NewForConfigOrDie(env.RESTConfig(t, c)).Resource(gvrConfigMaps).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if qualified {
				o.SetName(o.GetName() + "_" + c)
			}
			out = append(out, o)
		}
	}
	return cmKeys(out)
}

func facadeConfig(base, path string) *rest.Config {
	return &rest.Config{Host: base + path, QPS: 100, Burst: 200}
}

func testFacadeWatch(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline, k *facadeKubectl) {
	cs := func(cluster string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
	}
	createCM := func(cluster, name string, labels map[string]string) {
		t.Helper()
		_, err := cs(cluster).CoreV1().ConfigMaps(f.shop).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("kubectl get pods --watch sees a Pod created in a member", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cmd := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", k.kubeconfig, "get", "pods", "-n", f.shop, "--watch", "--output-watch-events", "--no-headers")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		pod := benchPod(f.shop, 90000+rand.IntN(9999))
		name := pod.Name
		time.Sleep(2 * time.Second) // the watch is open; the list's rows come first
		if _, err := cs("member2").CoreV1().Pods(f.shop).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl --watch ended: %s", stderr.String())
				}
				if c := strings.Fields(l); len(c) >= 3 && c[0] == "ADDED" && c[1] == "member2" && c[2] == name {
					return
				}
			case <-deadline:
				t.Fatalf("no ADDED row for %s within 30s; stderr: %s", name, stderr.String())
			}
		}
	})

	t.Run("informers converge and stay converged", func(t *testing.T) {
		for _, streaming := range []bool{true, false} {
			for _, view := range []struct {
				name, path, cluster string
				qualified           bool
			}{{"member1 view", "/clusters/member1", "member1", false}, {"qualified view", "/qualified", "", true}} {
				t.Run(fmt.Sprintf("%s streaming=%v", view.name, streaming), func(t *testing.T) {
					watchList.set(streaming)
					dyn := dynamic.NewForConfigOrDie(facadeConfig(p.base, view.path))
					factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, f.shop, nil)
					inf := factory.ForResource(gvrConfigMaps).Informer()
					stop := make(chan struct{})
					defer close(stop)
					factory.Start(stop)
					if !cache.WaitForCacheSync(stop, inf.HasSynced) {
						t.Fatal("informer never synced")
					}
					converged := func(what string) {
						t.Helper()
						pollUntil(t, what, time.Minute, func(ctx context.Context) (bool, error) {
							var objs []*unstructured.Unstructured
							for _, o := range inf.GetStore().List() {
								objs = append(objs, o.(*unstructured.Unstructured))
							}
							got, want := cmKeys(objs), memberConfigMaps(t, env, f.shop, view.cluster, view.qualified)
							if !slices.Equal(got, want) {
								t.Logf("informer:\n%s\nmembers:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
								return false, nil
							}
							return true, nil
						})
					}
					converged("the informer holds the members' ConfigMaps")
					// Churn in every member: a create, a relabel, a delete.
					name := uniqueName("churn")
					for _, c := range env.Clusters {
						createCM(c, name, map[string]string{"churn.example.com/step": "created"})
						cm, err := cs(c).CoreV1().ConfigMaps(f.shop).Get(t.Context(), "web-config-1", metav1.GetOptions{})
						if err != nil {
							t.Fatal(err)
						}
						cm.Labels["churn.example.com/step"] = name
						if _, err := cs(c).CoreV1().ConfigMaps(f.shop).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
							t.Fatal(err)
						}
					}
					converged("the informer follows creates and relabels")
					for _, c := range env.Clusters {
						if err := cs(c).CoreV1().ConfigMaps(f.shop).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
					}
					converged("the informer follows deletes")
				})
			}
		}
	})

	t.Run("informers survive query API and member restarts", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		api := p.startQueryAPIAt(t, addr)
		base := "http://" + addr
		type view struct {
			path, cluster string
			qualified     bool
			inf           cache.SharedIndexInformer
		}
		views := []*view{{path: "/clusters/member1", cluster: "member1"}, {path: "/qualified", qualified: true}}
		stop := make(chan struct{})
		defer close(stop)
		for _, v := range views {
			factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(facadeConfig(base, v.path)), 0, f.shop, nil)
			v.inf = factory.ForResource(gvrConfigMaps).Informer()
			factory.Start(stop)
			if !cache.WaitForCacheSync(stop, v.inf.HasSynced) {
				t.Fatal("informer never synced")
			}
		}
		converged := func(what string) {
			t.Helper()
			for _, v := range views {
				pollUntil(t, what+" ("+v.path+")", 2*time.Minute, func(ctx context.Context) (bool, error) {
					var objs []*unstructured.Unstructured
					for _, o := range v.inf.GetStore().List() {
						objs = append(objs, o.(*unstructured.Unstructured))
					}
					got, want := cmKeys(objs), memberConfigMaps(t, env, f.shop, v.cluster, v.qualified)
					if !slices.Equal(got, want) {
						t.Logf("%s: informer:\n%s\nmembers:\n%s", v.path, strings.Join(got, "\n"), strings.Join(want, "\n"))
						return false, nil
					}
					return true, nil
				})
			}
		}
		converged("informers synced")
		// The query API is killed; the members change meanwhile; a new one starts on the same address.
		api.kill()
		before := uniqueName("while-down")
		createCM("member1", before, nil)
		createCM("member2", before, nil)
		p.startQueryAPIAt(t, addr)
		converged("informers converge after a query API kill -9 and restart")
		// member1's kube-apiserver restarts: the collector re-lists it (a new epoch).
		env.Restart(t, "member1-apiserver")
		after := uniqueName("after-restart")
		createCM("member1", after, nil)
		if err := cs("member1").CoreV1().ConfigMaps(f.shop).Delete(t.Context(), before, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		converged("informers converge after member1's kube-apiserver restarted")
	})

	t.Run("watch semantics", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(facadeConfig(p.base, ""))
		list, err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name := uniqueName("resume")
		createCM("member3", name, map[string]string{"tier": "watched"})
		// Resumed from the list's resourceVersion: exactly the later change, with bookmarks.
		events := watchEvents(t, p.base+"/api/v1/namespaces/"+f.shop+"/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion="+list.GetResourceVersion(),
			20*time.Second, func(evs []watchEvent) bool {
				return slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "BOOKMARK" }) &&
					slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "ADDED" && e.name() == name })
			})
		for _, e := range events {
			if e.Type != "BOOKMARK" && e.name() != name {
				t.Errorf("resumed watch sent %s %s, which the list already had", e.Type, e.name())
			}
		}
		// A position the window no longer holds is 410 Gone: a query API with a window of 20 events
		// has dropped the events of the seeded fleet; one ahead of the stream is 504, never 410.
		small := p.startQueryAPI(t, "--watch-window", "20", "--resource-version-wait", "2s")
		for _, c := range []struct {
			rv   string
			want int
		}{{"1", http.StatusGone}, {"999999999", http.StatusGatewayTimeout}} {
			resp, err := http.Get(small + "/clusters/member1/api/v1/namespaces/" + f.shop + "/configmaps?watch=1&resourceVersion=" + c.rv)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("watch from resourceVersion %s: %d %s, want %d", c.rv, resp.StatusCode, body, c.want)
			}
		}
		// A label selector: entering is ADDED, leaving is DELETED.
		list, err = dyn.Resource(gvrConfigMaps).Namespace(f.shop).List(t.Context(), metav1.ListOptions{LabelSelector: "tier=watched"})
		if err != nil {
			t.Fatal(err)
		}
		moved := uniqueName("moved")
		createCM("member1", moved, map[string]string{"tier": "watched"})
		go func() {
			time.Sleep(3 * time.Second)
			cm, err := cs("member1").CoreV1().ConfigMaps(f.shop).Get(context.Background(), moved, metav1.GetOptions{})
			if err == nil {
				cm.Labels["tier"] = "elsewhere"
				_, err = cs("member1").CoreV1().ConfigMaps(f.shop).Update(context.Background(), cm, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Error(err)
			}
		}()
		watchEvents(t, p.base+"/api/v1/namespaces/"+f.shop+"/configmaps?watch=1&labelSelector=tier%3Dwatched&resourceVersion="+list.GetResourceVersion(),
			30*time.Second, func(evs []watchEvent) bool {
				return slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "ADDED" && e.name() == moved }) &&
					slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "DELETED" && e.name() == moved })
			})
	})

	t.Run("positions inside a re-list and past a lagging indexer", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(facadeConfig(p.base, "/clusters/member1"))
		view := "/clusters/member1/api/v1/namespaces/" + f.shop + "/configmaps"
		u := uniqueName("relist")
		names := []string{u + "-a", u + "-b", u + "-c"}
		for _, n := range names {
			createCM("member1", n, nil)
		}
		var listRV string
		// Listed, and at a position past their creation: a LIST may show an object the watch cache
		// has not read yet, and then reports a position below it (a watch from it repeats the
		// ADDED, never skips), which is not the position this test needs.
		pollUntil(t, "the three ConfigMaps listed at a position past them", time.Minute, func(ctx context.Context) (bool, error) {
			l, err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			listRV = l.GetResourceVersion()
			mine := slices.DeleteFunc(l.Items, func(o unstructured.Unstructured) bool { return !slices.Contains(names, o.GetName()) })
			covered := !slices.ContainsFunc(mine, func(o unstructured.Unstructured) bool {
				return mustInt(t, o.GetResourceVersion()) > mustInt(t, listRV)
			})
			return len(mine) == 3 && covered, nil
		})
		// The collector misses three changes, made in reverse key order, and re-lists after its
		// restart: the list publishes them in key order, so member1's view sends them with falling
		// resourceVersions. A client resuming from the first must still get the two others.
		p.restartCollector(t, func() {
			for _, n := range slices.Backward(names) {
				cm, err := cs("member1").CoreV1().ConfigMaps(f.shop).Get(t.Context(), n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["k"] = "changed while the collector was down"
				if _, err := cs("member1").CoreV1().ConfigMaps(f.shop).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		})
		modified := func(want ...string) func([]watchEvent) bool {
			return func(evs []watchEvent) bool {
				return !slices.ContainsFunc(want, func(n string) bool {
					return !slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "MODIFIED" && e.name() == n })
				})
			}
		}
		evs := watchEvents(t, p.base+view+"?watch=1&resourceVersion="+listRV, time.Minute, modified(names...))
		evs = slices.DeleteFunc(evs, func(e watchEvent) bool { return !slices.Contains(names, e.name()) })
		if evs[0].name() != names[0] || evs[0].rv() <= evs[1].rv() {
			t.Fatalf("the re-list did not publish the changes in key order with falling resourceVersions: %v", evs)
		}
		resumed := watchEvents(t, p.base+view+"?watch=1&resourceVersion="+strconv.FormatInt(evs[0].rv(), 10), 20*time.Second, modified(names[1:]...))
		if slices.ContainsFunc(resumed, func(e watchEvent) bool { return e.name() == names[0] }) {
			t.Errorf("resumed after %s, the watch sent it again: %v", names[0], resumed)
		}

		// The indexer stops while member1 changes more than a window holds. A query API started
		// then reads the stream from the indexers' committed offsets on; its window of 20 events
		// keeps the newest, so a position the index still shows is 410 there, not a watch that
		// silently lacks what the window dropped.
		l, err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		p.indexer.signal(syscall.SIGSTOP)
		defer p.indexer.signal(syscall.SIGCONT)
		lag := uniqueName("lag")
		for i := range 30 {
			createCM("member1", fmt.Sprintf("%s-%02d", lag, i), nil)
		}
		stream := &eventLog{t: t, brokers: env.KafkaBrokers, topic: p.topic, next: map[int]int64{}}
		stream.waitFor(t, "the 30 ConfigMaps published", time.Minute, func(evs []*envelope.Event) bool {
			return len(slices.DeleteFunc(evs, func(ev *envelope.Event) bool { return !strings.HasPrefix(ev.Name, lag) })) == 30
		})
		small := p.startQueryAPI(t, "--watch-window", "20", "--resource-version-wait", "10s")
		// timeoutSeconds: a watch wrongly started ends by itself, and the test fails instead of hanging.
		resp, err := http.Get(small + view + "?watch=1&timeoutSeconds=5&resourceVersion=" + l.GetResourceVersion())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone {
			t.Errorf("watch from the lagging index's position %s: %d %.300s, want 410", l.GetResourceVersion(), resp.StatusCode, body)
		}
		// Once the indexer has caught up, a list's position is inside the window again.
		p.indexer.signal(syscall.SIGCONT)
		smallDyn := dynamic.NewForConfigOrDie(facadeConfig(small, "/clusters/member1"))
		l, err = smallDyn.Resource(gvrConfigMaps).Namespace(f.shop).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		after := uniqueName("after-lag")
		go func() {
			time.Sleep(time.Second)
			createCM("member1", after, nil)
		}()
		watchEvents(t, small+view+"?watch=1&resourceVersion="+l.GetResourceVersion(), 30*time.Second, func(evs []watchEvent) bool {
			return slices.ContainsFunc(evs, func(e watchEvent) bool { return e.Type == "ADDED" && e.name() == after })
		})
	})
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// rv is the event's object's resourceVersion as a number (a one-cluster view's: the member's).
func (e watchEvent) rv() int64 {
	var o struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	_ = json.Unmarshal(e.Object, &o)
	n, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	return n
}

func (e watchEvent) name() string {
	var o struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(e.Object, &o)
	return o.Metadata.Name
}

// watchEvents reads a watch until done says it has what it wants, failing after timeout.
func watchEvents(t *testing.T, url string, timeout time.Duration, done func([]watchEvent) bool) []watchEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch %s: %d %s", url, resp.StatusCode, body)
	}
	var evs []watchEvent
	dec := json.NewDecoder(resp.Body)
	for {
		var e watchEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("watch %s ended (%v) after %d events without what was expected: %v", url, err, len(evs), evs)
		}
		evs = append(evs, e)
		if done(evs) {
			return evs
		}
	}
}
