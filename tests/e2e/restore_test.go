//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// testMemberRestored restores member1's etcd from a backup taken minutes before, as an operator
// does after losing it (issue 23, item 1): the member's resourceVersions go back, an object deleted
// after the backup is back (while the index still holds its delete's tombstone), one created after it
// is gone. The index, informers through the facade and open watches must follow the member: old
// positions get 410 and clients list again, nothing is missed, and consistent reads do not wait for
// the old numbering. It runs last in TestFacade: it takes member1 back in time.
func testMemberRestored(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline) {
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "member1"))
	cms := cs.CoreV1().ConfigMaps(f.shop)
	create := func(name string) {
		t.Helper()
		if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"restore.kubesearch.io/run": "1"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	memberRV := func() int64 {
		t.Helper()
		l, err := cms.List(t.Context(), metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
		return rv
	}
	const view = "/clusters/member1"
	dyn := dynamic.NewForConfigOrDie(facadeConfig(p.base, view))
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, f.shop, nil)
	inf := factory.ForResource(gvrConfigMaps).Informer()
	stop := make(chan struct{})
	defer close(stop)
	converged := func(what string) {
		t.Helper()
		pollUntil(t, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
			var objs []*unstructured.Unstructured
			for _, o := range inf.GetStore().List() {
				objs = append(objs, o.(*unstructured.Unstructured))
			}
			got, want := cmKeys(objs), memberConfigMaps(t, env, f.shop, "member1", false)
			if !slices.Equal(got, want) {
				t.Logf("informer:\n%s\nmember1:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				return false, nil
			}
			return true, nil
		})
	}

	doomed := uniqueName("doomed")
	create(doomed)
	backup := env.BackupEtcd(t, "member1")
	backupRV := memberRV()
	later := uniqueName("later")
	create(later)
	// Enough writes that the numbering after the restore stays below the positions clients hold
	// for the rest of the test (the member's own controllers write too).
	for i := range 300 {
		cm, err := cms.Get(t.Context(), later, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["k"] = strconv.Itoa(i)
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.Delete(t.Context(), doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	converged("the informer holds member1's ConfigMaps before the restore")
	held, err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldRV := held.GetResourceVersion()
	// A watch open across the restore, from the position the informer also holds.
	open := make(chan []watchEvent, 1)
	go func() {
		open <- readWatch(t, p.base+view+"/api/v1/namespaces/"+f.shop+"/configmaps?watch=1&resourceVersion="+oldRV, 4*time.Minute)
	}()

	env.RestoreEtcd(t, "member1", backup)
	if rv := memberRV(); rv >= mustInt(t, oldRV) {
		t.Fatalf("member1 at %d after the restore, not below the %s clients hold (backup at %d)", rv, oldRV, backupRV)
	}
	t.Logf("member1 went back from %s to %d (backup at %d)", oldRV, memberRV(), backupRV)
	after := uniqueName("after-restore")
	create(after)
	converged("the informer follows member1 back: the deleted object returns, the later one is gone")

	// The open watch ended with 410, as kube-apiserver ends a watch whose position is gone.
	evs := <-open
	if i := slices.IndexFunc(evs, func(e watchEvent) bool { return e.Type == "ERROR" }); i < 0 || !strings.Contains(string(evs[i].Object), `"code":410`) {
		t.Errorf("the watch open across the restore sent %d events and no 410: %.2000v", len(evs), evs)
	}
	// A watch from the old numbering's position: 410, and the client lists again.
	resp, err := http.Get(p.base + view + "/api/v1/namespaces/" + f.shop + "/configmaps?watch=1&timeoutSeconds=5&resourceVersion=" + oldRV)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Errorf("a watch from %s, before the restore: %d, want 410", oldRV, resp.StatusCode)
	}
	// The informer follows the event stream; the index, and the collectors' status the query API
	// polls, follow it a moment later: until the status shows member1's re-list, an answer carries
	// its "collection Failed" warning. Waited for, then the index must agree: the restored object
	// served (its delete's tombstone did not refuse it), the vanished one not, and a consistent read
	// does not wait for the old numbering.
	var problems []string
	deadline := time.Now().Add(time.Minute)
	for {
		problems = problems[:0]
		resp, err = http.Get(p.base + view + "/api/v1/namespaces/" + f.shop + "/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if w := resp.Header.Values("Warning"); resp.StatusCode != http.StatusOK || len(w) > 0 {
			problems = append(problems, fmt.Sprintf("a consistent LIST after the restore: %d, warnings %q", resp.StatusCode, w))
		}
		for _, c := range []struct {
			name string
			want int
		}{{doomed, http.StatusOK}, {later, http.StatusNotFound}, {after, http.StatusOK}} {
			resp, err := http.Get(p.base + view + "/api/v1/namespaces/" + f.shop + "/configmaps/" + c.name)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				problems = append(problems, fmt.Sprintf("GET %s after the restore: %d, want %d", c.name, resp.StatusCode, c.want))
			}
			if w := resp.Header.Values("Warning"); len(w) > 0 {
				problems = append(problems, fmt.Sprintf("GET %s after the restore warns %q", c.name, w))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// readWatch reads a watch until it ends (or timeout) and returns its events.
func readWatch(t *testing.T, url string, timeout time.Duration) []watchEvent {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("watch %s: %v", url, err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("watch %s: %s", url, resp.Status)
		return nil
	}
	var evs []watchEvent
	dec := json.NewDecoder(resp.Body)
	for {
		var e watchEvent
		if err := dec.Decode(&e); err != nil {
			return evs
		}
		evs = append(evs, e)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(fmt.Errorf("resourceVersion %q: %w", s, err))
	}
	return n
}
