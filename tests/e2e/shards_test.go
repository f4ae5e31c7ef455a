//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestListThenWatchOnThreeShards: with the index on three shards, each refreshing on its own, the
// newest resourceVersion a LIST's snapshot shows may be above an event not searchable yet (issue 23,
// item 2). Clients list and watch from the list's resourceVersion at random moments of a steady
// churn, as informers do; every one of them must end with exactly the member's ConfigMaps: a
// position that claimed more than the index showed would skip an event for good.
func TestListThenWatchOnThreeShards(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startQueryPipeline(t, env, f.registries(t), "--index-shards", "3")
	listThenWatchUnderChurn(t, env, f, p)
}

// listThenWatchUnderChurn starts list-then-watch clients of member1's ConfigMaps at random moments
// of a steady churn and requires every one to end with exactly the member's ConfigMaps.
func listThenWatchUnderChurn(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline) {
	cms := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "member1")).CoreV1().ConfigMaps(f.shop)
	view := p.base + "/clusters/member1/api/v1/namespaces/" + f.shop + "/configmaps"
	waitHTTP(t, view, time.Minute)

	ctx, stopClients := context.WithCancel(t.Context())
	defer stopClients()
	const clients = 12
	states := make([]*listWatchState, clients)
	var wg sync.WaitGroup
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		churnConfigMaps(t, cms, 40*time.Second)
	}()
	for i := range clients {
		time.Sleep(3 * time.Second)
		st := &listWatchState{objs: map[string]string{}}
		states[i] = st
		if err := st.list(ctx, view); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		wg.Go(func() { st.watch(ctx, view) })
	}
	<-churnDone
	pollUntil(t, "every client holds member1's ConfigMaps", 2*time.Minute, func(context.Context) (bool, error) {
		list, err := cms.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		want := map[string]string{}
		for _, cm := range list.Items {
			want[cm.Name] = cm.ResourceVersion
		}
		for i, st := range states {
			if got := st.snapshot(); !maps.Equal(got, want) {
				t.Logf("client %d (listed at %s) differs from member1: %s", i, st.listedAt, mapDiff(got, want))
				return false, nil
			}
		}
		return true, nil
	})
	stopClients()
	wg.Wait()
	for i, st := range states {
		if st.err != nil {
			t.Errorf("client %d's watch: %v", i, st.err)
		}
	}
}

// churnConfigMaps creates, updates and deletes ConfigMaps for d, a few dozen a second.
func churnConfigMaps(t *testing.T, cms interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}, d time.Duration) {
	var live []*corev1.ConfigMap
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		switch r := rand.IntN(10); {
		case r < 4 || len(live) < 10:
			cm, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("churn-%05d", i), Labels: map[string]string{"shards.kubesearch.io/step": "0"}},
				Data: map[string]string{"payload": strings.Repeat("x", 2000)}}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			live = append(live, cm)
		case r < 8:
			j := rand.IntN(len(live))
			live[j].Labels["shards.kubesearch.io/step"] = fmt.Sprint(i)
			cm, err := cms.Update(context.Background(), live[j], metav1.UpdateOptions{})
			if err != nil {
				t.Errorf("update: %v", err)
				return
			}
			live[j] = cm
		default:
			j := rand.IntN(len(live))
			if err := cms.Delete(context.Background(), live[j].Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete: %v", err)
				return
			}
			live = slices.Delete(live, j, j+1)
		}
	}
}

// listWatchState is what an informer holds: a LIST, then the WATCH from its resourceVersion applied.
type listWatchState struct {
	mu       sync.Mutex
	objs     map[string]string // name → resourceVersion
	listedAt string
	err      error
}

func (s *listWatchState) list(ctx context.Context, view string) error {
	// resourceVersion=0: the index as it is, the case where the position is furthest from the
	// watermarks.
	body, err := getContext(ctx, view+"?resourceVersion=0")
	if err != nil {
		return err
	}
	var l struct {
		Metadata struct{ ResourceVersion string }
		Items    []struct{ Metadata metav1.ObjectMeta }
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return err
	}
	for _, it := range l.Items {
		s.objs[it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	s.listedAt = l.Metadata.ResourceVersion
	return nil
}

func (s *listWatchState) watch(ctx context.Context, view string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, view+"?watch=1&resourceVersion="+s.listedAt, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.fail(fmt.Errorf("%s: %s", resp.Status, b))
		return
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string
			Object struct{ Metadata metav1.ObjectMeta }
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("watch ended: %w", err))
			}
			return
		}
		s.mu.Lock()
		switch ev.Type {
		case "ADDED", "MODIFIED":
			s.objs[ev.Object.Metadata.Name] = ev.Object.Metadata.ResourceVersion
		case "DELETED":
			delete(s.objs, ev.Object.Metadata.Name)
		case "ERROR":
			s.err = fmt.Errorf("ERROR event: %+v", ev.Object)
		}
		s.mu.Unlock()
	}
}

func (s *listWatchState) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *listWatchState) snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.objs)
}

func mapDiff(got, want map[string]string) string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("%s: %q, want %q", k, got[k], v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": held, gone from the member")
		}
	}
	slices.Sort(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("… %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

func getContext(ctx context.Context, url string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	return b, err
}
