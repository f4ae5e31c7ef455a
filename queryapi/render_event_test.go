package queryapi

import (
	"bytes"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// TestAppendEventAtIsAppendObjectAt: a watch event rendered from the metadata the cache located
// once is byte for byte what a scan of the object renders, in every view: ADDED, MODIFIED, and the
// metadata-only DELETED the cache makes up for a SYNC.
func TestAppendEventAtIsAppendObjectAt(t *testing.T) {
	c := watchcache.New(watchcache.Options{MaxEvents: 100, MaxBytes: 16 << 20})
	c.CaughtUp()
	pair := store.Pair{Cluster: "member-eu-1", Resource: "pods"}
	feed, err := c.Start(t.Context(), []store.Pair{pair}, map[store.Pair]int64{})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Stop()
	c.Apply(benchPod(t, envelope.Added, "184466"))
	c.Apply(benchPod(t, envelope.Modified, "184467"))
	sync := benchPod(t, envelope.Sync, "")
	sync.Object, sync.Name, sync.UID, sync.ResourceVersion, sync.ListResourceVersion, sync.Epoch = nil, "", "", "", "184470", sync.Epoch+1
	c.Apply(sync)
	evs, _, _, err := feed.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events, want ADDED, MODIFIED and the SYNC's DELETED", len(evs))
	}
	res := apiResource{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true}
	for _, v := range []view{{}, {cluster: "member-eu-1"}, {qualified: true}} {
		out, st := newRenderer("", "", res, v)
		if st != nil {
			t.Fatal(st.Message)
		}
		for _, e := range evs {
			if e.RVAt.Len == 0 || e.NameAt.Len == 0 {
				t.Errorf("%s: metadata not located: %+v %+v", e.Type, e.NameAt, e.RVAt)
			}
			want, err := out.appendObjectAt([]byte("prefix"), e.Object, "~sealed_position-1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := out.appendEventAt([]byte("prefix"), e, "~sealed_position-1")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("view %+v, %s:\n got %.300s\nwant %.300s", v, e.Type, got, want)
			}
		}
	}
}
