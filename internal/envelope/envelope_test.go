package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/fixtures"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func intp(v int) *int { return &v }

// The wire format is a contract with every consumer (indexers and query APIs of other versions): the
// golden files pin it byte for byte.
func TestEnvelopeGolden(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	pod := json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8c6b5-x2x9z","namespace":"shop","uid":"0b5e4c7a-1f8e-4c53-9d55-6c4f9a0e2f11","resourceVersion":"48213","labels":{"app.kubernetes.io/name":"web"}}}`)
	for name, ev := range map[string]Event{
		"added": {V: Version, Type: Added, Cluster: "member1", Version: "v1", Resource: "pods", Kind: "Pod",
			Namespace: "shop", Name: "web-7d9f8c6b5-x2x9z", UID: "0b5e4c7a-1f8e-4c53-9d55-6c4f9a0e2f11",
			ResourceVersion: "48213", Epoch: 1795971034922744, ObservedAt: at, Object: pod},
		"deleted-by-relist": {V: Version, Type: Deleted, Cluster: "member1", Group: "apps", Version: "v1", Resource: "deployments",
			Kind: "Deployment", Namespace: "shop", Name: "web", UID: "9d1c2b3a-4e5f-4a6b-8c7d-0e1f2a3b4c5d",
			ResourceVersion: "1200", Epoch: 1795971034922745, ObservedAt: at},
		"sync": {V: Version, Type: Sync, Cluster: "member2", Group: "example.com", Version: "v1", Resource: "widgets",
			Kind: "Widget", Namespace: "shop", Epoch: 1795971034922746, ObservedAt: at, Count: intp(0), ListResourceVersion: "777"},
		"purge": {V: Version, Type: Purge, Cluster: "member3", Version: "v1", Resource: "serviceaccounts",
			Kind: "ServiceAccount", Namespace: "payments", Epoch: 1795971034922747, ObservedAt: at},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Fatalf("wire format changed:\n got %s\nwant %s", got, want)
			}
			back, err := Unmarshal(want)
			if err != nil {
				t.Fatalf("the golden event does not decode: %v", err)
			}
			again, _ := back.Marshal()
			if !bytes.Equal(again, got) {
				t.Fatalf("round trip changed the event:\n%s\n%s", again, got)
			}
			if string(ev.Key()) != ev.Cluster+"/"+ev.Group+"/"+ev.Resource {
				t.Fatalf("key %q", ev.Key())
			}
		})
	}
}

func TestUnmarshalRejects(t *testing.T) {
	for name, tc := range map[string]struct{ in, wantField string }{
		"not json":        {`{"v":1,`, "unexpected end"},
		"unknown version": {`{"v":2,"type":"SYNC","cluster":"c","kind":"Pod","version":"v1","resource":"pods","count":0}`, "v: unsupported envelope version 2"},
		"unknown type":    {`{"v":1,"type":"UPSERT","cluster":"c","kind":"Pod","version":"v1","resource":"pods"}`, `type: unknown event type "UPSERT"`},
		"no cluster":      {`{"v":1,"type":"PURGE","kind":"Pod"}`, "cluster: required"},
		"no kind":         {`{"v":1,"type":"PURGE","cluster":"c"}`, "kind: required"},
		"added no object": {`{"v":1,"type":"ADDED","cluster":"c","kind":"Pod","version":"v1","resource":"pods","name":"n","uid":"u"}`, "object: required on ADDED"},
		"deleted no uid":  {`{"v":1,"type":"DELETED","cluster":"c","kind":"Pod","version":"v1","resource":"pods","name":"n"}`, "uid, name: required on DELETED"},
		"sync no count":   {`{"v":1,"type":"SYNC","cluster":"c","kind":"Pod","version":"v1","resource":"pods"}`, "count: required on SYNC"},
		"added no gvr":    {`{"v":1,"type":"ADDED","cluster":"c","kind":"Pod","name":"n","uid":"u","object":{}}`, "version, resource: required"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Unmarshal([]byte(tc.in))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tc.wantField)) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantField)
			}
		})
	}
}

// Marshal writes the object as it is; for the compact JSON a collector hands it, that is exactly what
// encoding/json writes. An object that is not JSON makes a message every reader rejects, never one
// read as something else.
func TestMarshalWritesTheObjectAsItIs(t *testing.T) {
	pod, err := json.Marshal(fixtures.Pod("184467"))
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{V: Version, Type: Modified, Cluster: "member-eu-1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: "shop", Name: "checkout-7d9f8c6b5-x2k4q", UID: "6f1c2a4e-9b3d-4c8e-a1f2-3d4e5f6a7b8c",
		ResourceVersion: "184467", Epoch: 1767225600000001, ObservedAt: fixtures.At, Count: intp(3), Object: pod}
	got, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from encoding/json:\n got %.300s\nwant %.300s", got, want)
	}
	ev.Object = json.RawMessage(`{"metadata":{"name":"cut`)
	bad, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmarshal(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a message with a truncated object decoded: %v", err)
	}
}
