package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/blevestore"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// twinUID is the uid of the Pod web in both members: one member registered under two names, or
// two members cloned from one etcd snapshot (issue 23 item 5).
const twinUID = "0b6a4e3c-5d1f-4a2b-9c8d-7e6f5a4b3c2d"

func twinEvent(t *testing.T, cluster string, typ envelope.Type, rv int64) *envelope.Event {
	t.Helper()
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop","uid":%q,"resourceVersion":"%d","creationTimestamp":"2026-11-30T10:00:00Z","labels":{"example.com/seen-as":%q}},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}`,
		twinUID, rv, cluster)
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: cluster, Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: "shop", Name: "web", UID: twinUID, ResourceVersion: fmt.Sprint(rv), Epoch: 1, Object: json.RawMessage(obj)}
}

// newTwinFacade is a facade over the embedded store holding the Pod web of the same uid in member1
// (at resourceVersion rv1) and member2 (at rv2).
func newTwinFacade(t *testing.T, rv1, rv2 int64) (string, *Server) {
	t.Helper()
	st, err := blevestore.New(blevestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ops []store.Op
	for _, ev := range []*envelope.Event{twinEvent(t, "member1", envelope.Added, rv1), twinEvent(t, "member2", envelope.Added, rv2)} {
		doc, err := document.Build(ev)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, store.Op{Kind: "Pod", Cluster: ev.Cluster, UID: ev.UID, Doc: doc, Epoch: 1, Version: rv1, Versioned: true})
		rv1 = rv2
	}
	if failed, err := st.Write(t.Context(), ops); err != nil || len(failed) > 0 {
		t.Fatalf("write: %v %v", failed, err)
	}
	srv, s := newFacadeTestServer(t, st)
	return srv.URL, s
}

// TestFacadeSameUIDInTwoClusters: GET and LIST by name in a one-cluster view answer that cluster's
// object when another member has an object of the same uid.
func TestFacadeSameUIDInTwoClusters(t *testing.T) {
	base, _ := newTwinFacade(t, 100, 600)
	for _, cl := range []string{"member1", "member2"} {
		code, _, body := fetch(t, http.MethodGet, base+"/clusters/"+cl+"/api/v1/namespaces/shop/pods/web", "application/json")
		var pod struct {
			Metadata struct {
				UID    string            `json:"uid"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &pod) != nil || pod.Metadata.Labels["example.com/seen-as"] != cl || pod.Metadata.UID != twinUID {
			t.Errorf("GET web in %s's view: %d %.300s; want %s's object", cl, code, body, cl)
		}
		code, _, body = fetch(t, http.MethodGet, base+"/clusters/"+cl+"/api/v1/namespaces/shop/pods?fieldSelector=metadata.name%3Dweb", "application/json")
		var list struct {
			Items []struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Items) != 1 || list.Items[0].Metadata.Labels["example.com/seen-as"] != cl {
			t.Errorf("LIST web in %s's view: %d %.300s; want %s's object alone", cl, code, body, cl)
		}
	}
	// The fleet view has both: a GET by the name is ambiguous.
	if code, _, body := fetch(t, http.MethodGet, base+"/api/v1/namespaces/shop/pods/web", "application/json"); code != http.StatusConflict {
		t.Errorf("GET web in the fleet view: %d %.300s; want 409", code, body)
	}
}

// TestStreamingWatchSameUIDInTwoClusters: a fleet streaming watch tells what its client holds by
// (cluster, uid): a change of member1's object is sent although the client got member2's object of
// the same uid at a higher resourceVersion (member2's numbering is its own).
func TestStreamingWatchSameUIDInTwoClusters(t *testing.T) {
	base, s := newTwinFacade(t, 100, 600)
	cacheOf(s).SetHeadForTest(store.Pair{Cluster: "member1", Resource: "pods"}, 500)
	cacheOf(s).SetHeadForTest(store.Pair{Cluster: "member2", Resource: "pods"}, 700)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		base+"/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	type event struct {
		Type   string
		Object struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
	}
	var initial []string
	for {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("after %v: %v", initial, err)
		}
		if ev.Type == "BOOKMARK" {
			break
		}
		initial = append(initial, ev.Type+" "+ev.Object.Metadata.Labels["example.com/seen-as"])
	}
	if len(initial) != 2 {
		t.Fatalf("initial events %v; want member1's and member2's web", initial)
	}
	// Past member1's position when the watch started (its watermark, 500), below member2's web.
	cacheOf(s).Apply(twinEvent(t, "member1", envelope.Modified, 550))
	for {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "BOOKMARK" {
			continue
		}
		if got := ev.Type + " " + ev.Object.Metadata.Labels["example.com/seen-as"]; got != "MODIFIED member1" {
			t.Errorf("after member1's change: %s; want MODIFIED member1", got)
		}
		break
	}
}
