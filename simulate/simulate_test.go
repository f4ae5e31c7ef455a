package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

const topic = "sim.events"

func newSim(t *testing.T, broker stream.Broker, o Options) *Simulator {
	t.Helper()
	o.Stream, o.Topic = broker, topic
	o.Logger = slog.New(slog.DiscardHandler)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s *Simulator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// events reads the event topic whole, in partition order, every message checked as the indexer
// checks it.
func events(t *testing.T, broker stream.Broker) []*envelope.Event {
	t.Helper()
	var out []*envelope.Event
	for p := range stream.DefaultPartitions {
		msgs, err := broker.ReadPartition(t.Context(), topic, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			ev, err := envelope.Unmarshal(m.Value)
			if err != nil {
				t.Fatalf("partition %d offset %d: %v", p, m.Offset, err)
			}
			if string(m.Key) != string(ev.Key()) {
				t.Errorf("message key %q, the event's is %q", m.Key, ev.Key())
			}
			out = append(out, ev)
		}
	}
	return out
}

// ledger reads the ledger topic: the live records by key (tombstones remove them).
func ledger(t *testing.T, broker stream.Broker) map[string][]byte {
	t.Helper()
	msgs, err := broker.ReadPartition(t.Context(), registry.LedgerTopic(topic), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, m := range msgs {
		if m.Value == nil {
			delete(out, string(m.Key))
		} else {
			out[string(m.Key)] = m.Value
		}
	}
	return out
}

type pairID struct{ cluster, resource string }

// The lists are what collectors publish: per (cluster, resource) one epoch, an ADDED event per
// object (a valid object whose identity is the envelope's), then a SYNC counting them at a
// resourceVersion no object exceeds; every cluster holds exactly --objects objects; names repeat
// across clusters, Pod names do not; label keys have dots and slashes; the custom resources' served
// versions differ between clusters; the ledger holds a selection record per pair (before its
// events, as collectors write it), an OpenAPI record per group-version and an epochs record per
// cluster.
func TestListsAreWhatCollectorsPublish(t *testing.T) {
	broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
	s := newSim(t, broker, Options{Seed: 7, Clusters: 4, Objects: 300})
	run(t, s)

	evs := events(t, broker)
	type pairState struct {
		epoch  int64
		added  int
		synced bool
		maxRV  int64
		names  []string
	}
	pairs := map[pairID]*pairState{}
	perCluster := map[string]int{}
	perKind := map[string]int{}
	uids := map[string]bool{}
	for _, ev := range evs {
		id := pairID{ev.Cluster, ev.GroupResource()}
		p := pairs[id]
		if p == nil {
			p = &pairState{epoch: ev.Epoch}
			pairs[id] = p
		}
		if ev.Epoch != p.epoch {
			t.Errorf("%v: epochs %d and %d in one list", id, p.epoch, ev.Epoch)
		}
		switch ev.Type {
		case envelope.Added:
			if p.synced {
				t.Errorf("%v: ADDED %s after the SYNC", id, ev.Name)
			}
			p.added++
			perCluster[ev.Cluster]++
			perKind[ev.Kind]++
			obj := gjson.ParseBytes(ev.Object)
			for field, want := range map[string]string{"metadata.name": ev.Name, "metadata.namespace": ev.Namespace, "metadata.uid": ev.UID,
				"metadata.resourceVersion": ev.ResourceVersion, "kind": ev.Kind, "apiVersion": strings.TrimPrefix(ev.Group+"/"+ev.Version, "/")} {
				if got := obj.Get(field).String(); got != want {
					t.Errorf("%v %s: object's %s is %q, the envelope says %q", id, ev.Name, field, got, want)
				}
			}
			rv, err := strconv.ParseInt(ev.ResourceVersion, 10, 64)
			if err != nil {
				t.Errorf("%v %s: resourceVersion %q", id, ev.Name, ev.ResourceVersion)
			}
			p.maxRV = max(p.maxRV, rv)
			p.names = append(p.names, ev.Namespace+"/"+ev.Name)
			if uids[ev.UID] {
				t.Errorf("%v %s: uid %s given twice", id, ev.Name, ev.UID)
			}
			uids[ev.UID] = true
		case envelope.Sync:
			if *ev.Count != p.added {
				t.Errorf("%v: SYNC counts %d, the list held %d", id, *ev.Count, p.added)
			}
			if rv, _ := strconv.ParseInt(ev.ListResourceVersion, 10, 64); rv < p.maxRV {
				t.Errorf("%v: SYNC at resourceVersion %d, below an object's %d", id, rv, p.maxRV)
			}
			p.synced = true
		default:
			t.Errorf("%v: unexpected %s", id, ev.Type)
		}
	}
	for id, p := range pairs {
		if !p.synced {
			t.Errorf("%v: no SYNC", id)
		}
	}
	for i := 1; i <= 4; i++ {
		if c := clusterName("sim-", i, 4); perCluster[c] != 300 {
			t.Errorf("cluster %s: %d objects, want 300", c, perCluster[c])
		}
	}
	if pods, all := perKind["Pod"], 4*300; pods*100/all < 45 {
		t.Errorf("Pods are %d of %d objects, want about half: %v", pods, all, perKind)
	}
	for _, k := range []string{"Deployment", "ReplicaSet", "Service", "ConfigMap", "Event", "Widget", "Gadget", "CustomResourceDefinition"} {
		if perKind[k] == 0 {
			t.Errorf("no %s: %v", k, perKind)
		}
	}
	deploys := func(c string) []string {
		return slices.Sorted(slices.Values(pairs[pairID{c, "deployments.apps"}].names))
	}
	if a, b := deploys("sim-0001"), deploys("sim-0002"); !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("Deployments of sim-0001 and sim-0002 differ: %v, %v", a, b)
	}
	pods1 := pairs[pairID{"sim-0001", "pods"}].names
	for _, n := range pairs[pairID{"sim-0002", "pods"}].names {
		if slices.Contains(pods1, n) {
			t.Errorf("Pod %s in two clusters", n)
		}
	}
	// Served versions: widgets at v1beta1 in every third cluster, gadgets not in the fourth.
	for _, ev := range evs {
		if ev.Kind == "Widget" && (ev.Version == "v1beta1") != (ev.Cluster == "sim-0003") {
			t.Errorf("%s serves widgets at %s", ev.Cluster, ev.Version)
		}
		if ev.Kind == "Gadget" && ev.Cluster == "sim-0004" {
			t.Errorf("sim-0004 has gadgets")
		}
		if ev.Type == envelope.Added && ev.Kind == "Pod" && !gjson.GetBytes(ev.Object, `metadata.labels.app\.kubernetes\.io/name`).Exists() {
			t.Errorf("Pod %s has no app.kubernetes.io/name label", ev.Name)
		}
	}

	records := ledger(t, broker)
	for id := range pairs {
		c := s.byName[id.cluster]
		found := false
		for k, p := range c.pairs {
			if p != nil && kinds[k].id() == id.resource {
				key := registry.SelectionRecordKey(id.cluster, registry.SelectionKey{Group: kinds[k].group, Kind: kinds[k].kind})
				var r registry.SelectionRecord
				if err := json.Unmarshal(records[key], &r); err != nil {
					t.Errorf("%v: selection record %s: %v", id, key, err)
				} else if r.Version != p.version || r.Resource != kinds[k].resource || r.Owner != "kubesearch-simulate" || r.Singular == "" {
					t.Errorf("%v: selection record %+v", id, r)
				}
				var doc registry.OpenAPIRecord
				path := registry.OpenAPIPath(kinds[k].group, p.version)
				if err := json.Unmarshal(records[registry.OpenAPIRecordKey(id.cluster, path)], &doc); err != nil || doc.Hash == "" ||
					!gjson.GetBytes(doc.Document, "components.schemas").Exists() {
					t.Errorf("%v: OpenAPI record of %s: %v %+v", id, path, err, doc)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("%v: published but not simulated", id)
		}
	}
	var epochs registry.EpochsRecord
	if err := json.Unmarshal(records[registry.EpochsRecordKey("sim-0002")], &epochs); err != nil {
		t.Fatalf("epochs record: %v", err)
	}
	for id, p := range pairs {
		if p.epoch > epochs.EpochsReserved {
			t.Errorf("%v: epoch %d above the %d reserved", id, p.epoch, epochs.EpochsReserved)
		}
	}
	if r := s.Report(); r.Events[envelope.Added] != 4*300 || r.Events[envelope.Sync] != int64(len(pairs)) || r.Objects != 4*300 || r.Phase != "done" {
		t.Errorf("report %+v", r)
	}
}

// identities are the (cluster, resource, namespace, name, uid) of the listed objects, with the
// size of their objects.
func identities(evs []*envelope.Event) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		if ev.Type == envelope.Added {
			out[strings.Join([]string{ev.Cluster, ev.GroupResource(), ev.Namespace, ev.Name, ev.UID}, " ")] = len(ev.Object)
		}
	}
	return out
}

// The seed makes the fleet: the same seed, the same objects of the same sizes; another seed,
// others.
func TestSeedMakesTheFleet(t *testing.T) {
	fleet := func(seed uint64) map[string]int {
		broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
		run(t, newSim(t, broker, Options{Seed: seed, Clusters: 2, Objects: 150}))
		return identities(events(t, broker))
	}
	a, b, c := fleet(1), fleet(1), fleet(2)
	if len(a) != 300 || !maps.Equal(a, b) {
		t.Errorf("seed 1 twice: %d and %d objects, equal: %t", len(a), len(b), maps.Equal(a, b))
	}
	same := 0
	for k := range c {
		if _, ok := a[k]; ok {
			same++
		}
	}
	if same == len(c) {
		t.Errorf("seeds 1 and 2 make the same fleet")
	}
}

// The churn changes objects at the rate asked, every change at a resourceVersion above the member's
// earlier ones, in the epoch of the pair's list; deleted objects carry their last state; the
// report's last changes are the pairs' last events; the status rows count what the clusters hold.
func TestChurn(t *testing.T) {
	broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
	s := newSim(t, broker, Options{Seed: 3, Clusters: 3, Objects: 200, ChurnRate: 400, ChurnDuration: 500 * time.Millisecond})
	run(t, s)
	evs := events(t, broker)
	listRV := map[pairID]int64{}
	lastRV := map[pairID]int64{}
	epoch := map[pairID]int64{}
	last := map[pairID]*envelope.Event{}
	live := map[pairID]map[string]bool{}
	types := map[envelope.Type]int{}
	for _, ev := range evs {
		id := pairID{ev.Cluster, ev.GroupResource()}
		if live[id] == nil {
			live[id] = map[string]bool{}
		}
		rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
		switch {
		case ev.Type == envelope.Sync:
			listRV[id], lastRV[id], epoch[id] = mustInt(ev.ListResourceVersion), mustInt(ev.ListResourceVersion), ev.Epoch
			continue
		case listRV[id] == 0: // the list's ADDED
			live[id][ev.UID] = true
			continue
		}
		types[ev.Type]++
		if rv <= lastRV[id] {
			t.Errorf("%v: %s %s at resourceVersion %d, not above %d", id, ev.Type, ev.Name, rv, lastRV[id])
		}
		if ev.Epoch != epoch[id] {
			t.Errorf("%v: %s in epoch %d, the list's is %d", id, ev.Type, ev.Epoch, epoch[id])
		}
		if got := gjson.GetBytes(ev.Object, "metadata.resourceVersion").String(); got != ev.ResourceVersion {
			t.Errorf("%v: %s %s: object at %s", id, ev.Type, ev.Name, got)
		}
		switch ev.Type {
		case envelope.Added:
			if live[id][ev.UID] {
				t.Errorf("%v: %s created twice", id, ev.Name)
			}
			live[id][ev.UID] = true
		case envelope.Modified, envelope.Deleted:
			if !live[id][ev.UID] {
				t.Errorf("%v: %s %s, which does not exist", id, ev.Type, ev.Name)
			}
			if ev.Type == envelope.Deleted {
				delete(live[id], ev.UID)
			}
		}
		lastRV[id], last[id] = rv, ev
	}
	r := s.Report()
	if churned := types[envelope.Added] + types[envelope.Modified] + types[envelope.Deleted]; churned < 100 || churned > 260 || int64(churned) != r.ChurnEvents {
		t.Errorf("%d churn events (report: %d) in 0.5 s at 400/s: %v", churned, r.ChurnEvents, types)
	}
	for _, typ := range []envelope.Type{envelope.Added, envelope.Modified, envelope.Deleted} {
		if types[typ] == 0 {
			t.Errorf("no %s in the churn: %v", typ, types)
		}
	}
	if len(r.LastChanges) == 0 {
		t.Error("no last changes reported")
	}
	for _, ch := range r.LastChanges {
		id := pairID{ch.Cluster, strings.TrimSuffix(ch.Resource+"."+ch.Group, ".")}
		if ev := last[id]; ev == nil || ev.UID != ch.UID || ev.ResourceVersion != ch.ResourceVersion || ev.Type != ch.Type {
			t.Errorf("%v: last change reported %+v, the stream's last event is %+v", id, ch, ev)
		}
	}
	for _, row := range s.Status() {
		id := pairID{row.Cluster, strings.TrimSuffix(row.Resource+"."+row.Group, ".")}
		if row.State != registry.StateRunning || row.TotalNum != len(live[id]) || row.ResourceVersion != strconv.FormatInt(lastRV[id], 10) || row.Epoch != epoch[id] {
			t.Errorf("%v: status %+v; the stream holds %d objects, last at %d, epoch %d", id, row, len(live[id]), lastRV[id], epoch[id])
		}
	}
}

func mustInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// A simulation started again with fewer kinds and clusters purges, as a restarted collector does,
// what the earlier one made and it does not: a PURGE per selection, its ledger record a tombstone
// once the PURGE is written, and lists in newer epochs at higher resourceVersions.
func TestRestartPurgesWhatIsNoLongerSimulated(t *testing.T) {
	broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
	first := newSim(t, broker, Options{Seed: 5, Clusters: 3, Objects: 100})
	run(t, first)
	before := len(events(t, broker))
	var kept []string
	for _, k := range KindNames() {
		if k != "configmaps" {
			kept = append(kept, k)
		}
	}
	second := newSim(t, broker, Options{Seed: 5, Clusters: 2, Objects: 100, Kinds: kept})
	run(t, second)
	evs := events(t, broker)
	var purged []string
	firstEpoch, firstRV := map[pairID]int64{}, map[pairID]int64{}
	seen := 0
	for _, ev := range evs {
		id := pairID{ev.Cluster, ev.GroupResource()}
		switch ev.Type {
		case envelope.Purge:
			purged = append(purged, ev.Cluster+" "+ev.GroupResource())
		case envelope.Sync:
			if old, ok := firstEpoch[id]; ok {
				if ev.Epoch <= old || mustInt(ev.ListResourceVersion) <= firstRV[id] {
					t.Errorf("%v: second list at epoch %d rv %s, the first at %d rv %d", id, ev.Epoch, ev.ListResourceVersion, old, firstRV[id])
				}
				seen++
			} else {
				firstEpoch[id], firstRV[id] = ev.Epoch, mustInt(ev.ListResourceVersion)
			}
		}
	}
	slices.Sort(purged)
	want := []string{"sim-0001 configmaps", "sim-0002 configmaps"}
	for _, k := range kinds {
		if k.version(3) != "" {
			want = append(want, "sim-0003 "+k.id())
		}
	}
	slices.Sort(want)
	if !slices.Equal(purged, want) {
		t.Errorf("purged %v, want %v", purged, want)
	}
	if seen == 0 || len(evs) <= before {
		t.Errorf("the second simulation listed nothing again")
	}
	for key := range ledger(t, broker) {
		if strings.HasPrefix(key, registry.SelectionRecordPrefix+"sim-0003/") || strings.HasSuffix(key, "//ConfigMap/") {
			t.Errorf("ledger still holds %s", key)
		}
	}
}

// The status endpoint serves the collectors' /status rows and the report; /readyz waits for the
// lists.
func TestStatusEndpoint(t *testing.T) {
	broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
	s := newSim(t, broker, Options{Seed: 1, Clusters: 2, Objects: 50, ListenAddr: "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("never ready")
	}
	for _, path := range []string{"/readyz", "/status"} {
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %s", path, resp.Status, body)
		}
		if path == "/status" {
			var st struct {
				Items      []registry.ResourceStatus `json:"items"`
				Simulation Report                    `json:"simulation"`
			}
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Items) != len(s.Status()) || st.Items[0].State != registry.StateRunning || st.Simulation.Objects != 100 {
				t.Errorf("/status: %d rows, first %+v, report %+v", len(st.Items), st.Items[0], st.Simulation)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []string
	}{
		{Options{Clusters: -1, Objects: -2, Kinds: []string{"pods", "nodes"}, ChurnRate: -1, ChurnDuration: -time.Second, Writers: -1},
			[]string{"--clusters:", `--kinds: unknown kind "nodes"`, "--churn-rate:", "--churn-duration:", "--kafka-brokers: required", "--writers:"}},
		{Options{Clusters: 1, Objects: 1, ClusterPrefix: "Sim_", Brokers: []string{"k:9092"}}, []string{"--cluster-prefix:"}},
		{Options{Clusters: 2, Brokers: []string{"k:9092"}}, []string{"--objects: must be at least 1, got 0"}},
	} {
		tc.o.SetDefaults()
		err := tc.o.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %v, want it to say %q", tc.o, err, w)
			}
		}
	}
	o := Options{Clusters: 10, Objects: 1000, Brokers: []string{"k:9092"}}
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestClusterNames(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		want string
	}{{1, 20, "sim-0001"}, {1000, 1000, "sim-1000"}, {7, 20000, "sim-00007"}} {
		if got := clusterName("sim-", tc.i, tc.n); got != tc.want {
			t.Errorf("cluster %d of %d: %s, want %s", tc.i, tc.n, got, tc.want)
		}
	}
}

func BenchmarkPodEvent(b *testing.B) {
	s, err := New(Options{Seed: 1, Clusters: 1, Objects: 2000, Stream: stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	c, r := s.clusters[0], &renderer{}
	pods := c.pairs[kPod].objs
	b.ReportAllocs()
	var n int
	for i := 0; b.Loop(); i++ {
		ev, err := s.event(r, c, kPod, &pods[i%len(pods)], envelope.Added, 1, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		v, err := ev.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		n = len(v)
	}
	b.SetBytes(int64(n))
	_ = fmt.Sprint(n)
}

// Clusters too small to run an app, and no cluster at all, churn without failing.
func TestTinyFleets(t *testing.T) {
	for _, o := range []Options{{Clusters: 2, Objects: 1}, {Clusters: 0, Objects: 1}} {
		o.ChurnRate, o.ChurnDuration = 200, 100*time.Millisecond
		broker := stream.NewLocal(stream.LocalOptions{RetainBytes: 1 << 30})
		s := newSim(t, broker, o)
		run(t, s)
		if r := s.Report(); r.Objects != int64(o.Clusters) || r.Phase != "done" {
			t.Errorf("%d clusters of %d objects: report %+v", o.Clusters, o.Objects, r)
		}
	}
}
