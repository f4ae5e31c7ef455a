//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestQueryAPIReplicas (issue 26 item 3): two query API replicas with one --continue-key-file behind
// a load balancer (a reverse proxy in the test, which decides per request which replica serves it).
// Each replica is killed (kill -9) once while it serves the watches of two client-go informers
// (the qualified fleet view, whose resourceVersions are vectors, and member2's one-cluster view) and
// of `kubectl get --watch`, while the members change: the informers' watches resume on the other
// replica, or get a 410 and list again, and never miss a change; kubectl (which does not retry a
// watch) is run again, lists on the other replica and ends with the members' state. Then REST and
// facade continue tokens issued by one replica page on the other.
func TestQueryAPIReplicas(t *testing.T) {
	env := testbed.Get(t)
	ns := uniqueName("replicas")
	ch := newReplicaChurn(t, env, ns)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "replicas.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: replicas}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap, namespace: %s}
`, ns))
	p := startIngest(t, env, dir)

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "continue-key")
	writeFile(t, keyFile, string(key))
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	startReplica := func(i int) *process {
		return p.startQueryAPIAt(t, addrs[i], "--continue-key-file", keyFile, "--poll-interval", "500ms")
	}
	replicas := []*process{startReplica(0), startReplica(1)}
	lb := newReplicaProxy(t, addrs)
	lb.route(0)
	t.Logf("replicas %s (A) and %s (B) behind %s", addrs[0], addrs[1], lb.base)

	pollUntil(t, "the index holds the members' ConfigMaps", 2*time.Minute, func(context.Context) (bool, error) {
		a := get(t, lb.base, queryapi.PathSearch, url.Values{"resources": {"configmaps"}, "namespaces": {ns}, "limit": {"1"}})
		return a.code == http.StatusOK && a.result.Total == int64(len(ch.truth(t, ""))), nil
	})

	// One informer lists by streaming (a watch with initial events), the other by LIST.
	watchList.set(true)
	qualified := startReplicaInformer(t, lb, "informer-qualified", queryapi.QualifiedPrefix, "", ns)
	watchList.set(false)
	member2 := startReplicaInformer(t, lb, "informer-member2", queryapi.ClustersPrefix+"member2", "member2", ns)
	watchList.set(true)
	clients := []*replicaWatcher{qualified, member2}
	if got := lb.firstList("informer-qualified"); got == nil || !got.initial {
		t.Errorf("informer-qualified did not list by streaming: %+v", got)
	}
	if got := lb.firstList("informer-member2"); got == nil || !got.list {
		t.Errorf("informer-member2 did not list by LIST: %+v", got)
	}
	for _, c := range clients {
		c.waitConverged(t, ch, "the informer's first list", time.Minute)
	}
	kc := startKubectlWatch(t, env, newFacadeKubectl(t, env, lb.base), ns)
	kc.waitConverged(t, ch, "kubectl's first list", time.Minute)
	synced := time.Now()

	for round, victim := range []int{0, 1} {
		other := 1 - victim
		name := fmt.Sprintf("replica %s killed", "AB"[victim:victim+1])
		t.Run(name, func(t *testing.T) {
			// The replica killed last round is started again just now: the watches come to it
			// as soon as it says it is ready, as they would in a rolling update.
			var readyAt time.Time
			if replicas[other] == nil {
				replicas[other] = startReplica(other)
				readyAt = time.Now()
			}
			// Every client's watch is open on the victim; the next requests go to the other.
			lb.route(victim)
			lb.waitWatching(t, victim, "informer-qualified", "informer-member2", "kubectl")
			lb.route(other)
			half := make(chan struct{})
			churned := make(chan error, 1)
			go func() { churned <- ch.round(t.Context(), fmt.Sprintf("r%d", round), half) }()
			select {
			case <-half:
			case err := <-churned: // failed before half of it
				t.Fatal(err)
			}
			// Before the kill returns, the clients may have asked the other replica already.
			killed := time.Now()
			replicas[victim].kill()
			replicas[victim] = nil
			if !readyAt.IsZero() {
				t.Logf("replica %s was started again and ready %s before the kill", "AB"[other:other+1], killed.Sub(readyAt).Round(10*time.Millisecond))
			}
			lb.closeIdle()
			if err := <-churned; err != nil {
				t.Fatal(err)
			}
			for _, c := range clients {
				c.waitConverged(t, ch, name, 2*time.Minute)
			}
			kc.waitConverged(t, ch, name, 2*time.Minute)
			for _, agent := range []string{"informer-qualified", "informer-member2", "kubectl"} {
				f := lb.figures(agent, killed, other)
				t.Logf("%s: %s", agent, f)
				if f.resumed < 0 {
					t.Errorf("%s: no watch served by the other replica after the kill; its requests since:\n%s", agent, lb.requests(agent, killed))
				}
			}
			for _, c := range clients {
				// Without a list since they synced, the informers must have been told every
				// change: a watch resumed with a gap would have skipped some.
				if relisted := lb.relists(c.agent, synced); relisted == 0 {
					if missed := c.missed(ch); len(missed) > 0 {
						t.Errorf("%s resumed with a gap: never told of %d changes: %s", c.agent, len(missed), strings.Join(missed[:min(10, len(missed))], "; "))
					}
				} else {
					t.Logf("%s listed again %d times since it synced", c.agent, relisted)
				}
			}
			t.Logf("kubectl: %d runs so far (%d ended with an error), %d objects printed again unchanged by a later run's list",
				kc.runs(), kc.failures(), kc.duplicates())
		})
		if t.Failed() {
			return
		}
	}

	replicas[1] = startReplica(1)

	// Continue tokens: a first page from one replica, the next from the other, and so on.
	t.Run("REST continue tokens page on the other replica", func(t *testing.T) {
		params := url.Values{"resources": {"configmaps"}, "namespaces": {ns}}
		lb.route(0)
		whole, _ := searchAll(t, lb.base, params, nil)
		want := memberTruth(t, env, []string{ns}, "configmaps", "", "")
		params.Set("limit", "7")
		for _, walk := range []struct {
			name  string
			first int
			// between runs before page+1 is asked and says which replica answers it.
			between func(page int) int
		}{
			{"alternating", 0, func(page int) int { return (page + 1) % 2 }},
			{"B killed after the first page, started again after the second", 1, func(page int) int {
				switch page {
				case 0:
					replicas[1].kill()
					replicas[1] = nil
					lb.closeIdle()
					return 0
				case 1:
					replicas[1] = startReplica(1)
				}
				return (page + 1) % 2
			}},
		} {
			pages := 1
			lb.route(walk.first)
			got, first := searchAll(t, lb.base, params, func(page int) {
				lb.route(walk.between(page))
				pages++
			})
			if pages < 3 {
				t.Fatalf("%s: %d pages: want at least 3, so tokens cross both ways", walk.name, pages)
			}
			if first.result.Total != int64(len(whole)) || len(got) != len(whole) {
				t.Errorf("%s: %d pages: %d items, total %d; one page: %d items", walk.name, pages, len(got), first.result.Total, len(whole))
			}
			if d := diff(got, want); d != "" {
				t.Errorf("%s: pages across replicas differ from the members: %s", walk.name, d)
			}
			t.Logf("%s: %d REST pages of 7 gave the %d ConfigMaps once each", walk.name, pages, len(got))
		}
	})
	t.Run("facade continue tokens page on the other replica", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(facadeConfig(lb.base, queryapi.QualifiedPrefix))
		lb.route(0)
		whole, err := dyn.Resource(gvrConfigMaps).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		opts := metav1.ListOptions{Limit: 7}
		pages := 0
		for {
			lb.route(pages % 2)
			page, err := dyn.Resource(gvrConfigMaps).Namespace(ns).List(t.Context(), opts)
			if err != nil {
				t.Fatalf("page %d on replica %d: %v", pages+1, pages%2, err)
			}
			pages++
			for _, o := range page.Items {
				got = append(got, o.GetName()+" "+string(o.GetUID()))
			}
			if opts.Continue = page.GetContinue(); opts.Continue == "" {
				break
			}
		}
		var want []string
		for _, o := range whole.Items {
			want = append(want, o.GetName()+" "+string(o.GetUID()))
		}
		if pages < 3 || !slices.Equal(got, want) {
			t.Errorf("%d pages across replicas:\n%s\none LIST:\n%s", pages, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		// kubectl --chunk-size: its LISTs alternate between the replicas.
		var lists atomic.Int64
		lb.policy(func(r *http.Request) int {
			if strings.HasSuffix(r.URL.Path, "/configmaps") {
				return int(lists.Add(1)-1) % 2
			}
			return 0
		})
		k := newFacadeKubectl(t, env, lb.base)
		out := k.mustRun(t, "--context", queryapi.ContextQualified, "get", "configmaps", "-n", ns, "--chunk-size", "5", "-o", "name")
		var names []string
		for _, l := range strings.Fields(out) {
			names = append(names, strings.TrimPrefix(l, "configmap/"))
		}
		var wantNames []string
		for _, o := range whole.Items {
			wantNames = append(wantNames, o.GetName())
		}
		if n := lists.Load(); n < 3 || !slices.Equal(names, wantNames) {
			t.Errorf("kubectl --chunk-size 5 over %d LISTs alternating replicas:\n%s\nwant:\n%s", n, strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
		}
		t.Logf("facade: %d client-go pages and %d kubectl chunks of 5, alternating replicas, gave the %d ConfigMaps in order", pages, lists.Load(), len(whole.Items))
	})
}

// replicaProxy is the load balancer: each request goes to the replica its policy picks when it
// comes; it records who asked what of which replica, and the ERROR events with a 410 that watches
// got.
type replicaProxy struct {
	base    string
	targets []*url.URL
	tr      *http.Transport

	mu   sync.Mutex
	pick func(*http.Request) int
	log  []*proxied
}

// proxied is one request through the proxy.
type proxied struct {
	at      time.Time
	agent   string // the client: its User-Agent, "kubectl" for any kubectl
	replica int
	// watch: a WATCH; initial: one with initial events (a streaming list); list: a LIST.
	watch, initial, list bool
	status               int
	answered             time.Time // when its answer's headers came
	gone                 int       // ERROR events with code 410 in its watch stream
	open                 bool      // a watch stream the client is reading
}

type proxiedKey struct{}

func newReplicaProxy(t *testing.T, addrs []string) *replicaProxy {
	t.Helper()
	lb := &replicaProxy{tr: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
	for _, a := range addrs {
		lb.targets = append(lb.targets, &url.URL{Scheme: "http", Host: a})
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rec := lb.record(pr.In)
			pr.SetURL(lb.targets[rec.replica])
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), proxiedKey{}, rec))
		},
		ModifyResponse: func(resp *http.Response) error {
			rec := resp.Request.Context().Value(proxiedKey{}).(*proxied)
			lb.mu.Lock()
			defer lb.mu.Unlock()
			rec.status, rec.answered = resp.StatusCode, time.Now()
			if rec.watch && resp.StatusCode == http.StatusOK {
				rec.open = true
				resp.Body = &watchStream{ReadCloser: resp.Body, lb: lb, rec: rec}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if rec, ok := r.Context().Value(proxiedKey{}).(*proxied); ok {
				lb.mu.Lock()
				rec.status = http.StatusBadGateway
				lb.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
		FlushInterval: -1, // watch events as they come
		Transport:     lb.tr,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close() // watches too
		<-served
		lb.tr.CloseIdleConnections()
	})
	lb.base = "http://" + l.Addr().String()
	return lb
}

// route sends every request from now on to replica i.
func (lb *replicaProxy) route(i int) { lb.policy(func(*http.Request) int { return i }) }

func (lb *replicaProxy) policy(pick func(*http.Request) int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.pick = pick
}

// closeIdle drops the kept-alive connections to a killed replica, as a balancer's health check would.
func (lb *replicaProxy) closeIdle() { lb.tr.CloseIdleConnections() }

func (lb *replicaProxy) record(r *http.Request) *proxied {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	q := r.URL.Query()
	rec := &proxied{at: time.Now(), agent: r.UserAgent(), replica: lb.pick(r), watch: boolQuery(q.Get("watch")),
		initial: boolQuery(q.Get("sendInitialEvents"))}
	rec.list = !rec.watch && strings.HasSuffix(r.URL.Path, "/configmaps")
	if strings.HasPrefix(rec.agent, "kubectl/") {
		rec.agent = "kubectl"
	}
	lb.log = append(lb.log, rec)
	return rec
}

func boolQuery(s string) bool { return s == "true" || s == "1" }

// waitWatching waits until each agent reads a watch that replica i serves.
func (lb *replicaProxy) waitWatching(t *testing.T, i int, agents ...string) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("watches of %s open on replica %d", agents, i), 2*time.Minute, func(context.Context) (bool, error) {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		for _, a := range agents {
			if !slices.ContainsFunc(lb.log, func(r *proxied) bool { return r.agent == a && r.replica == i && r.open }) {
				return false, nil
			}
		}
		return true, nil
	})
}

// firstList is an agent's first LIST or streaming list.
func (lb *replicaProxy) firstList(agent string) *proxied {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, r := range lb.log {
		if r.agent == agent && (r.list || r.initial) {
			c := *r
			return &c
		}
	}
	return nil
}

// relists counts an agent's LISTs and streaming lists since a time.
func (lb *replicaProxy) relists(agent string, since time.Time) int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	n := 0
	for _, r := range lb.log {
		if r.agent == agent && !r.at.Before(since) && (r.list || r.initial) {
			n++
		}
	}
	return n
}

// requests lists an agent's requests since a time, for a failure's message.
func (lb *replicaProxy) requests(agent string, since time.Time) string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var b strings.Builder
	for _, r := range lb.log {
		if r.agent == agent && !r.at.Before(since) {
			fmt.Fprintf(&b, "+%s replica %d watch=%v initial=%v list=%v: %d, %d 410 events, open %v\n",
				r.at.Sub(since).Round(time.Millisecond), r.replica, r.watch, r.initial, r.list, r.status, r.gone, r.open)
		}
	}
	return b.String()
}

// replicaFigures are what an agent did after a replica was killed.
type replicaFigures struct {
	resumed         time.Duration // until the other replica answered a watch of it 200 (-1: never)
	resumedWithList bool          // that watch was a streaming list, or came after a LIST
	gone            int           // 410s: answers, and ERROR events in watch streams
	unavailable     int           // 503s and 502s
	lists           int
}

func (f replicaFigures) String() string {
	return fmt.Sprintf("watch resumed on the other replica after %s (after a list: %v); 410s %d, 5xx %d, lists %d",
		f.resumed.Round(10*time.Millisecond), f.resumedWithList, f.gone, f.unavailable, f.lists)
}

func (lb *replicaProxy) figures(agent string, since time.Time, other int) replicaFigures {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	f := replicaFigures{resumed: -1}
	for _, r := range lb.log {
		if r.agent != agent || r.at.Before(since) {
			continue
		}
		switch {
		case r.status == http.StatusGone:
			f.gone++
		case r.status >= 500:
			f.unavailable++
		}
		f.gone += r.gone
		if r.list || r.initial {
			f.lists++
		}
		if f.resumed < 0 && r.watch && r.status == http.StatusOK && r.replica == other {
			f.resumed = r.answered.Sub(since)
			f.resumedWithList = f.lists > 0
		}
	}
	return f
}

// watchStream counts the ERROR events with a 410 that a watch stream carries (the query API writes
// one event per line) and notes when the stream ends.
type watchStream struct {
	io.ReadCloser
	lb   *replicaProxy
	rec  *proxied
	line []byte
}

func (w *watchStream) Read(b []byte) (int, error) {
	n, err := w.ReadCloser.Read(b)
	for rest := b[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(w.line) < 1<<20 {
				w.line = append(w.line, rest...)
			}
			break
		}
		line := append(w.line, rest[:i]...)
		if bytes.HasPrefix(line, []byte(`{"type":"ERROR"`)) && bytes.Contains(line, []byte(`"code":410`)) {
			w.lb.mu.Lock()
			w.rec.gone++
			w.lb.mu.Unlock()
		}
		w.line, rest = w.line[:0], rest[i+1:]
	}
	if err != nil {
		w.ended()
	}
	return n, err
}

func (w *watchStream) Close() error {
	w.ended()
	return w.ReadCloser.Close()
}

func (w *watchStream) ended() {
	w.lb.mu.Lock()
	defer w.lb.mu.Unlock()
	w.rec.open = false
}

// replicaChurn creates, updates and deletes ConfigMaps in one namespace of every member. Every
// write sets data.step to a number of its own, so a client's copy tells which write it shows.
type replicaChurn struct {
	env     *testbed.Env
	ns      string
	members map[string]kubernetes.Interface
	step    atomic.Int64

	mu     sync.Mutex
	live   map[string]map[string]string // cluster → name → uid
	writes []churnWrite
}

type churnWrite struct {
	cluster, uid string
	step         string // "" for a deletion
}

const replicaSeedPerMember = 20

func newReplicaChurn(t *testing.T, env *testbed.Env, ns string) *replicaChurn {
	t.Helper()
	ch := &replicaChurn{env: env, ns: ns, members: map[string]kubernetes.Interface{}, live: map[string]map[string]string{}}
	for _, cluster := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
		ch.members[cluster] = cs
		createNamespace(t, cs, ns)
		ch.live[cluster] = map[string]string{}
		for i := range replicaSeedPerMember {
			if err := ch.create(t.Context(), cluster, fmt.Sprintf("cm-%02d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, cs := range ch.members {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	return ch
}

func (ch *replicaChurn) configMaps(cluster string) typedcorev1.ConfigMapInterface {
	return ch.members[cluster].CoreV1().ConfigMaps(ch.ns)
}

func (ch *replicaChurn) create(ctx context.Context, cluster, name string) error {
	step := strconv.FormatInt(ch.step.Add(1), 10)
	cm, err := ch.configMaps(cluster).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{"step": step}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: create %s: %w", cluster, name, err)
	}
	ch.wrote(cluster, name, string(cm.UID), step)
	return nil
}

func (ch *replicaChurn) update(ctx context.Context, cluster, name string) error {
	step := strconv.FormatInt(ch.step.Add(1), 10)
	cm, err := ch.configMaps(cluster).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"step":"`+step+`"}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("%s: update %s: %w", cluster, name, err)
	}
	ch.wrote(cluster, name, string(cm.UID), step)
	return nil
}

func (ch *replicaChurn) remove(ctx context.Context, cluster, name string) error {
	if err := ch.configMaps(cluster).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("%s: delete %s: %w", cluster, name, err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.writes = append(ch.writes, churnWrite{cluster: cluster, uid: ch.live[cluster][name]})
	delete(ch.live[cluster], name)
	return nil
}

func (ch *replicaChurn) wrote(cluster, name, uid, step string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.live[cluster][name] = uid
	ch.writes = append(ch.writes, churnWrite{cluster: cluster, uid: uid, step: step})
}

// round makes 10 changes in every member, one member after another: 4 creations, 4 updates and 2
// deletions of earlier objects. half is closed when half of them are acknowledged.
func (ch *replicaChurn) round(ctx context.Context, label string, half chan<- struct{}) error {
	type op struct {
		cluster, kind, name string
	}
	var ops []op
	for _, cluster := range ch.env.Clusters {
		ch.mu.Lock()
		names := slices.Sorted(maps.Keys(ch.live[cluster]))
		ch.mu.Unlock()
		for k := range 4 {
			ops = append(ops, op{cluster, "create", fmt.Sprintf("%s-%d", label, k)}, op{cluster, "update", names[(3*k+1)%len(names)]})
		}
		ops = append(ops, op{cluster, "delete", names[0]}, op{cluster, "delete", names[len(names)-1]})
	}
	for i, o := range ops {
		if i == len(ops)/2 {
			close(half)
		}
		var err error
		switch o.kind {
		case "create":
			err = ch.create(ctx, o.cluster, o.name)
		case "update":
			err = ch.update(ctx, o.cluster, o.name)
		default:
			err = ch.remove(ctx, o.cluster, o.name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// replicaState is what a client must agree with the members on, per object (by uid).
type replicaState struct {
	name, step, rv string // rv only in a one-cluster view, where it is the member's
}

// truth is the members' ConfigMaps (cluster "" for all of them, named as the qualified view names
// them), listed from the members.
func (ch *replicaChurn) truth(t *testing.T, cluster string) map[string]replicaState {
	t.Helper()
	out := map[string]replicaState{}
	for _, c := range ch.env.Clusters {
		if cluster != "" && c != cluster {
			continue
		}
		list, err := ch.configMaps(c).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			st := replicaState{name: cm.Name + "_" + c, step: cm.Data["step"]}
			if cluster != "" {
				st.name, st.rv = cm.Name, cm.ResourceVersion
			}
			out[string(cm.UID)] = st
		}
	}
	return out
}

// writesSince are the writes after the first n.
func (ch *replicaChurn) writesSince(n int) []churnWrite {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return slices.Clone(ch.writes[min(n, len(ch.writes)):])
}

func (ch *replicaChurn) writeCount() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.writes)
}

func stateDiff(got, want map[string]replicaState) []string {
	var out []string
	for uid, w := range want {
		if g, ok := got[uid]; !ok {
			out = append(out, fmt.Sprintf("missing %s (uid %s, step %s)", w.name, uid, w.step))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s (uid %s): has %+v, want %+v", w.name, uid, g, w))
		}
	}
	for uid, g := range got {
		if _, ok := want[uid]; !ok {
			out = append(out, fmt.Sprintf("extra %s (uid %s, step %s)", g.name, uid, g.step))
		}
	}
	slices.Sort(out)
	return out
}

// replicaWatcher is a client-go informer through the proxy, with every state it was told of.
type replicaWatcher struct {
	agent   string
	cluster string // the one-cluster view's member; "" for the qualified view
	inf     cache.SharedIndexInformer
	// from is how many writes the churn had made when the informer synced: it must be told of
	// every later one.
	from int

	mu      sync.Mutex
	told    map[string]bool // uid/step
	deleted map[string]bool // uid
}

func startReplicaInformer(t *testing.T, lb *replicaProxy, agent, path, cluster, ns string) *replicaWatcher {
	t.Helper()
	cfg := facadeConfig(lb.base, path)
	cfg.UserAgent = agent
	w := &replicaWatcher{agent: agent, cluster: cluster, told: map[string]bool{}, deleted: map[string]bool{}}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, ns, nil)
	w.inf = factory.ForResource(gvrConfigMaps).Informer()
	tell := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			step, _, _ := unstructured.NestedString(u.Object, "data", "step")
			w.mu.Lock()
			w.told[string(u.GetUID())+"/"+step] = true
			w.mu.Unlock()
		}
	}
	if _, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tell,
		UpdateFunc: func(_, obj any) { tell(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				w.mu.Lock()
				w.deleted[string(u.GetUID())] = true
				w.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown() // waits for the informer's goroutines
	})
	if !cache.WaitForCacheSync(t.Context().Done(), w.inf.HasSynced) {
		t.Fatalf("%s never synced", agent)
	}
	return w
}

func (w *replicaWatcher) state() map[string]replicaState {
	out := map[string]replicaState{}
	for _, o := range w.inf.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		step, _, _ := unstructured.NestedString(u.Object, "data", "step")
		st := replicaState{name: u.GetName(), step: step}
		if w.cluster != "" {
			st.rv = u.GetResourceVersion()
		}
		out[string(u.GetUID())] = st
	}
	return out
}

func (w *replicaWatcher) waitConverged(t *testing.T, ch *replicaChurn, what string, timeout time.Duration) {
	t.Helper()
	var d []string
	err := pollErr(t.Context(), timeout, func() bool {
		d = stateDiff(w.state(), ch.truth(t, w.cluster))
		return len(d) == 0
	})
	if err != nil {
		t.Fatalf("%s: %s: the informer's store never equalled the members' ConfigMaps within %s:\n%s", w.agent, what, timeout, strings.Join(d, "\n"))
	}
	if w.from == 0 {
		w.from = ch.writeCount()
	}
}

// missed are the changes in w's view since it synced that it was never told of.
func (w *replicaWatcher) missed(ch *replicaChurn) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, wr := range ch.writesSince(w.from) {
		if w.cluster != "" && wr.cluster != w.cluster {
			continue
		}
		switch {
		case wr.step == "" && !w.deleted[wr.uid]:
			out = append(out, fmt.Sprintf("%s uid %s deleted", wr.cluster, wr.uid))
		case wr.step != "" && !w.told[wr.uid+"/"+wr.step]:
			out = append(out, fmt.Sprintf("%s uid %s at step %s", wr.cluster, wr.uid, wr.step))
		}
	}
	return out
}

// kubectlWatch runs `kubectl get configmaps --watch` on the qualified view again whenever it ends,
// as a user would: kubectl does not retry a watch whose connection broke, it exits.
type kubectlWatch struct {
	mu sync.Mutex
	// events are each run's events: the list's objects (as ADDED) and then the watch's.
	events [][]kubectlEvent
	errs   []string
}

type kubectlEvent struct {
	typ, name, uid, step string
}

func startKubectlWatch(t *testing.T, env *testbed.Env, k *facadeKubectl, ns string) *kubectlWatch {
	t.Helper()
	kw := &kubectlWatch{}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if ok := kw.run(ctx, env, k, ns); !ok {
				// kubectl failed (not a watch that ended): again in a second, not in a tight loop.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return kw
}

// run runs kubectl once, until it exits; false if it failed.
func (kw *kubectlWatch) run(ctx context.Context, env *testbed.Env, k *facadeKubectl, ns string) bool {
	kw.mu.Lock()
	run := len(kw.events)
	kw.events = append(kw.events, nil)
	kw.mu.Unlock()
	cmd := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", k.kubeconfig, "--context", queryapi.ContextQualified,
		"get", "configmaps", "-n", ns, "--watch", "--output-watch-events", "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		kw.note(fmt.Sprintf("run %d: start: %v", run, err))
		return false
	}
	dec := json.NewDecoder(out)
	for {
		var ev struct {
			Type   string                    `json:"type"`
			Object unstructured.Unstructured `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				kw.note(fmt.Sprintf("run %d: output: %v", run, err))
			}
			break
		}
		step, _, _ := unstructured.NestedString(ev.Object.Object, "data", "step")
		kw.mu.Lock()
		kw.events[run] = append(kw.events[run], kubectlEvent{typ: ev.Type, name: ev.Object.GetName(), uid: string(ev.Object.GetUID()), step: step})
		kw.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		kw.note(fmt.Sprintf("run %d: %v: %s", run, err, strings.TrimSpace(stderr.String())))
		return false
	}
	return true
}

func (kw *kubectlWatch) note(s string) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	kw.errs = append(kw.errs, s)
}

// state is what the last run shows: its list, then its events applied.
func (kw *kubectlWatch) state() map[string]replicaState {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	out := map[string]replicaState{}
	if len(kw.events) == 0 {
		return out
	}
	for _, e := range kw.events[len(kw.events)-1] {
		switch e.typ {
		case "ADDED", "MODIFIED":
			out[e.uid] = replicaState{name: e.name, step: e.step}
		case "DELETED":
			delete(out, e.uid)
		}
	}
	return out
}

func (kw *kubectlWatch) failures() int {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return len(kw.errs)
}

func (kw *kubectlWatch) runs() int {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return len(kw.events)
}

// duplicates counts the objects a run printed that an earlier run had printed in the same state:
// what listing again costs a reader of kubectl's output.
func (kw *kubectlWatch) duplicates() int {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	seen := map[string]bool{}
	n := 0
	for _, run := range kw.events {
		var printed []string
		for _, e := range run {
			if e.typ == "DELETED" {
				continue
			}
			key := e.uid + "/" + e.step
			if seen[key] {
				n++
			}
			printed = append(printed, key)
		}
		for _, k := range printed {
			seen[k] = true
		}
	}
	return n
}

func (kw *kubectlWatch) waitConverged(t *testing.T, ch *replicaChurn, what string, timeout time.Duration) {
	t.Helper()
	var d []string
	err := pollErr(t.Context(), timeout, func() bool {
		d = stateDiff(kw.state(), ch.truth(t, ""))
		return len(d) == 0
	})
	if err != nil {
		kw.mu.Lock()
		errs := slices.Clone(kw.errs)
		kw.mu.Unlock()
		t.Fatalf("kubectl get --watch: %s: its output never showed the members' ConfigMaps within %s:\n%s\nkubectl runs: %s",
			what, timeout, strings.Join(d, "\n"), strings.Join(errs, "\n"))
	}
}
