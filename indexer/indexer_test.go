package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/osstore/osstoretest"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/mappings"
)

// testStream is a test event stream: a kfake cluster with the event topic, and a writer partitioning
// as the collector does.
type testStream struct {
	brokers []string
	topic   string
	client  stream.Broker
	w       stream.Writer
}

func newStream(t *testing.T, partitions int32) *testStream {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "events"), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := &testStream{brokers: c.ListenAddrs(), topic: "events"}
	s.client = stream.NewClient(s.brokers, stream.Connection{}, nil)
	s.w = s.client.NewWriter(stream.WriterOptions{Topic: "events"})
	t.Cleanup(func() {
		s.w.Close()
		s.client.Close()
	})
	return s
}

func (s *testStream) publish(t *testing.T, events ...any) {
	t.Helper()
	var msgs []stream.Message
	for _, e := range events {
		switch e := e.(type) {
		case *envelope.Event:
			v, err := e.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, stream.Message{Key: e.Key(), Value: v})
		case stream.Message:
			msgs = append(msgs, e)
		}
	}
	if err := s.w.Write(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// committed is the group's committed offset per partition (-1: none).
func (s *testStream) committed(t *testing.T, group string, partitions int) map[int]int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(s.brokers...)}
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	resp, err := client.OffsetFetch(t.Context(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{s.topic: ps}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[s.topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// ends is the end offset per partition.
func (s *testStream) ends(t *testing.T, partitions int) map[int]int64 {
	t.Helper()
	out, err := s.client.HighWaterMarks(t.Context(), s.topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != partitions {
		t.Fatalf("ends of %d partitions, want %d: %v", len(out), partitions, out)
	}
	return out
}

func objectEvent(typ envelope.Type, cluster, kind, resource, ns, name, uid, rv string, epoch int64) *envelope.Event {
	group, version := "", "v1"
	apiVersion := "v1"
	obj := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":%q,"labels":{"app":"web"}}}`,
		apiVersion, kind, name, ns, uid, rv)
	e := &envelope.Event{V: envelope.Version, Type: typ, Cluster: cluster, Group: group, Version: version, Resource: resource,
		Kind: kind, Namespace: ns, Name: name, UID: uid, ResourceVersion: rv, Epoch: epoch, ObservedAt: time.Now().UTC()}
	if typ != envelope.Deleted {
		e.Object = json.RawMessage(obj)
	}
	return e
}

func marker(typ envelope.Type, cluster, kind, resource, ns string, epoch int64, listRV string) *envelope.Event {
	e := &envelope.Event{V: envelope.Version, Type: typ, Cluster: cluster, Version: "v1", Resource: resource, Kind: kind,
		Namespace: ns, Epoch: epoch, ObservedAt: time.Now().UTC()}
	if typ == envelope.Sync {
		n := 0
		e.Count, e.ListResourceVersion = &n, listRV
	}
	return e
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type running struct {
	ix   *Indexer
	stop context.CancelFunc
	done chan error
}

func startIndexer(t *testing.T, s *testStream, osURL string) *running {
	t.Helper()
	return startIndexerWith(t, s, osURL, func(*Options) {})
}

// startIndexerWith is startIndexer with options changed by edit.
func startIndexerWith(t *testing.T, s *testStream, osURL string, edit func(*Options)) *running {
	t.Helper()
	o := Options{
		Brokers: s.brokers, Topic: s.topic, GroupID: "indexers", OpenSearchAddresses: []string{osURL},
		BatchInterval: 20 * time.Millisecond, WatermarkInterval: 50 * time.Millisecond, RequestTimeout: 5 * time.Second,
		ShutdownTimeout: 10 * time.Second, ListenAddr: "127.0.0.1:0", Logger: testLogger(t),
	}
	edit(&o)
	ix, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{ix: ix, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- ix.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *running) shutdown(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// eventually polls cond until it holds, or fails the test with what describe says.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", describe())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestIndexerEndToEnd runs the indexer against an in-process Kafka (kfake) and a fake OpenSearch:
// events are written in partition order, a SYNC deletes the documents its list did not see (and
// nothing written before it), a PURGE deletes its selection, undecodable events go to the
// dead-letter topic with their origin, watermarks are stored, and every offset is committed.
func TestIndexerEndToEnd(t *testing.T) {
	s := newStream(t, 2)
	osrv := osstoretest.New()
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)

	// A pod of an earlier list that the member deleted while nothing watched.
	osrv.AddAlias("kubernetes-pod")
	osrv.Engine.Apply(osstoretest.Write{Index: "kubernetes-pod", ID: "m1/gone", Versioned: true, Version: 3,
		Doc: []byte(`{"cluster":"m1","group":"","resource":"pods","namespace":"shop","uid":"gone","epoch":1,"resourceVersion":3}`)})

	bad := stream.Message{Key: []byte("m1//pods"), Value: []byte(`{"v":1,"type":"ADDED"`)}
	mismatched := objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p9", "u9", "15", 2)
	mismatched.UID = "not-the-object's"
	s.publish(t,
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 2),
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p2", "u2", "11", 2),
		marker(envelope.Sync, "m1", "Pod", "pods", "", 2, "12"),
		objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p1", "u1", "13", 2),
		bad, mismatched,
		objectEvent(envelope.Added, "m2", "ConfigMap", "configmaps", "team-a", "c1", "c1", "7", 5),
		marker(envelope.Purge, "m2", "ConfigMap", "configmaps", "", 6, ""), // same partition as the events: the collector names the resource
		objectEvent(envelope.Added, "m2", "ConfigMap", "configmaps", "team-b", "c2", "c2", "8", 7),
	)

	r := startIndexer(t, s, srv.URL)
	eng := osrv.Engine
	state := func() string {
		return fmt.Sprintf("u1=%s u2=%s gone=%s c1=%s c2=%s", eng.State("kubernetes-pod", "m1/u1"), eng.State("kubernetes-pod", "m1/u2"),
			eng.State("kubernetes-pod", "m1/gone"), eng.State("kubernetes-configmap", "m2/c1"), eng.State("kubernetes-configmap", "m2/c2"))
	}
	const want = "u1=2/13 u2=2/11 gone=deleted c1=deleted c2=7/8"
	ends := s.ends(t, 2)
	eventually(t, 30*time.Second, func() bool {
		c := s.committed(t, "indexers", 2)
		for p, end := range ends {
			if end > 0 && c[p] != end {
				return false
			}
		}
		return state() == want
	}, func() string {
		return fmt.Sprintf("state %s (want %s), committed %v, ends %v", state(), want, s.committed(t, "indexers", 2), ends)
	})

	if code, body := get(t, "http://"+r.ix.Addr()+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	_, metrics := get(t, "http://"+r.ix.Addr()+"/metrics")
	for _, m := range []string{
		`kubesearch_indexer_documents_written_total{index="kubernetes-pod"} 3`,
		`kubesearch_indexer_documents_collected_total{index="kubernetes-pod",marker="SYNC"} 1`,
		`kubesearch_indexer_documents_collected_total{index="kubernetes-configmap",marker="PURGE"} 1`,
		`kubesearch_indexer_dead_letters_total{reason="malformed-envelope"} 1`,
		`kubesearch_indexer_dead_letters_total{reason="malformed-object"} 1`,
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// The template was installed before anything was written; every index sits behind its alias.
	if !osrv.HasTemplate("kubernetes") {
		t.Error("index template not installed")
	}
	for _, idx := range []string{fmt.Sprintf("kubernetes-configmap-v%d", mappings.Version), "kubesearch-state"} {
		if !osrv.HasIndex(idx) {
			t.Errorf("index %s not created", idx)
		}
	}

	// The pods' watermark: the list's resourceVersion, then the watch events once refreshed; the
	// dead-lettered one (15) included, as it will never be written and must not hold the pair back.
	eventually(t, 10*time.Second, func() bool {
		return gjson.Get(eng.Source("kubesearch-state", "m1//pods"), "resourceVersion").Int() == 15
	}, func() string { return "watermark: " + eng.Source("kubesearch-state", "m1//pods") })
	if got := eng.Source("kubesearch-state", "m2//configmaps"); gjson.Get(got, "listing").Bool() != true {
		t.Errorf("configmaps of m2 after the purge and a new ADDED: a list in progress, got %s", got)
	}
	// The query API's read half reads what the indexer stored.
	reader, err := osstore.New(osstore.Options{Addresses: []string{srv.URL}, TokenKey: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	ws, err := reader.Watermarks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Cluster != "m1" || ws[0].Resource != "pods" || ws[0].ResourceVersion != 15 || ws[0].Listing ||
		ws[1].Cluster != "m2" || !ws[1].Listing {
		t.Errorf("Watermarks: %+v", ws)
	}
	r.shutdown(t)

	// Dead letters: the original bytes, the reason and where they came from.
	dl := s.readAll(t, "events.dlq", 2)
	reasons := map[string]stream.Message{}
	for _, m := range dl {
		reasons[header(m, stream.HeaderReason)] = m
	}
	m, ok := reasons[ReasonMalformedEnvelope]
	if !ok || !bytes.Equal(m.Value, bad.Value) || !bytes.Equal(m.Key, bad.Key) || header(m, stream.HeaderTopic) != "events" ||
		header(m, stream.HeaderOffset) == "" || header(m, stream.HeaderPartition) == "" || header(m, stream.HeaderError) == "" {
		t.Errorf("malformed envelope's dead letter: %+v", m)
	}
	if m, ok := reasons[ReasonMalformedObject]; !ok || header(m, stream.HeaderIndex) != "kubernetes-pod" {
		t.Errorf("malformed object's dead letter: %+v", m)
	}
}

func header(m stream.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// readAll is the first n messages of partition 0 of topic, waiting up to 10 s for them.
func (s *testStream) readAll(t *testing.T, topic string, n int) []stream.Message {
	t.Helper()
	var (
		out []stream.Message
		err error
	)
	eventually(t, 10*time.Second, func() bool {
		out, err = s.client.ReadPartition(t.Context(), topic, 0)
		return err == nil && len(out) >= n
	}, func() string { return fmt.Sprintf("read %s: got %d of %d messages: %v", topic, len(out), n, err) })
	return out[:n]
}

// TestIndexerWaitsForOpenSearch: while OpenSearch refuses writes, nothing is committed; once it
// takes them again, everything is written and committed, nothing lost.
func TestIndexerWaitsForOpenSearch(t *testing.T) {
	s := newStream(t, 1)
	osrv := osstoretest.New()
	osrv.SetBulkDown(true)
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)
	r := startIndexer(t, s, srv.URL)

	s.publish(t,
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 2),
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p2", "u2", "11", 2),
	)
	// The indexer keeps trying: wait for a few refused bulks, then check nothing was committed.
	eventually(t, 30*time.Second, func() bool {
		_, m := get(t, "http://"+r.ix.Addr()+"/metrics")
		return strings.Contains(m, "kubesearch_indexer_bulk_errors_total 2")
	}, func() string { return "no failed bulk requests seen" })
	if c := s.committed(t, "indexers", 1); c[0] >= 0 {
		t.Fatalf("committed %v while OpenSearch refused the writes", c)
	}
	if code, _ := get(t, "http://"+r.ix.Addr()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while OpenSearch refuses writes: %d, want 503", code)
	}

	osrv.SetBulkDown(false)
	eventually(t, 30*time.Second, func() bool {
		return osrv.Engine.State("kubernetes-pod", "m1/u1") == "2/10" && osrv.Engine.State("kubernetes-pod", "m1/u2") == "2/11" &&
			s.committed(t, "indexers", 1)[0] == 2
	}, func() string {
		return fmt.Sprintf("u1 %s, u2 %s, committed %v", osrv.Engine.State("kubernetes-pod", "m1/u1"),
			osrv.Engine.State("kubernetes-pod", "m1/u2"), s.committed(t, "indexers", 1))
	})
	r.shutdown(t)
}

// TestIndexerShutdownFlushes: events fetched when the context is cancelled are written and committed
// before Run returns.
func TestIndexerShutdownFlushes(t *testing.T) {
	s := newStream(t, 1)
	osrv := osstoretest.New()
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)

	ix, err := New(Options{
		Brokers: s.brokers, Topic: s.topic, GroupID: "indexers", OpenSearchAddresses: []string{srv.URL},
		// A batch that would wait a minute to fill: only the shutdown closes it.
		BatchSize: 1000, BatchInterval: time.Minute, WatermarkInterval: time.Minute,
		ShutdownTimeout: 10 * time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ix.Run(ctx) }()
	s.publish(t,
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 2),
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p2", "u2", "11", 2),
	)
	// Wait until both are fetched: the group is joined, and the batch holds them.
	eventually(t, 30*time.Second, func() bool { return testutil.ToFloat64(ix.metrics.inFlight) == 2 },
		func() string { return "events not fetched" })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if osrv.Engine.State("kubernetes-pod", "m1/u1") != "2/10" || osrv.Engine.State("kubernetes-pod", "m1/u2") != "2/11" {
		t.Errorf("batch in flight not written on shutdown: u1 %s u2 %s", osrv.Engine.State("kubernetes-pod", "m1/u1"), osrv.Engine.State("kubernetes-pod", "m1/u2"))
	}
	if c := s.committed(t, "indexers", 1); c[0] != 2 {
		t.Errorf("committed %v, want offset 2", c)
	}
}

// TestPurgeThenRelistKeepsUnchangedObjects is the widening of a selection: a PURGE of the namespace
// scope, then a list of every namespace that carries the same objects at the same resourceVersions,
// within index.gc_deletes. Garbage collection must leave tombstones that the re-list's ADDEDs pass;
// _delete_by_query's internal versioning left them one version above, and every unchanged object was
// refused as a replay and stayed missing.
func TestPurgeThenRelistKeepsUnchangedObjects(t *testing.T) {
	s := newStream(t, 1)
	osrv := osstoretest.New()
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)

	s.publish(t,
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "a", "ua", "10", 2),
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "b", "ub", "11", 2),
		marker(envelope.Sync, "m1", "ConfigMap", "configmaps", "shop", 2, "12"),
		marker(envelope.Purge, "m1", "ConfigMap", "configmaps", "shop", 3, ""),
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "a", "ua", "10", 4),
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "b", "ub", "11", 4),
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "web", "c", "uc", "12", 4),
		marker(envelope.Sync, "m1", "ConfigMap", "configmaps", "", 4, "13"),
		// A replay of an older state after the re-list is still refused.
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "web", "c", "uc", "9", 4),
	)
	startIndexer(t, s, srv.URL)
	eng := osrv.Engine
	state := func() string {
		return fmt.Sprintf("a=%s b=%s c=%s", eng.State("kubernetes-configmap", "m1/ua"), eng.State("kubernetes-configmap", "m1/ub"),
			eng.State("kubernetes-configmap", "m1/uc"))
	}
	const want = "a=4/10 b=4/11 c=4/12"
	end := s.ends(t, 1)[0]
	eventually(t, 30*time.Second, func() bool { return s.committed(t, "indexers", 1)[0] == end && state() == want },
		func() string { return fmt.Sprintf("state %s, want %s", state(), want) })
}

// TestRestoredMemberRelistsDeletedObject is a member restored from an etcd snapshot: an object
// deleted just before the restore is in the snapshot, and the new epoch lists it at a lower
// resourceVersion while the delete's tombstone still lives. The newer epoch wins over the
// tombstone; a replay of the old epoch does not.
func TestRestoredMemberRelistsDeletedObject(t *testing.T) {
	s := newStream(t, 1)
	osrv := osstoretest.New()
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)

	s.publish(t,
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "a", "ua", "4000", 1),
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "b", "ub", "4100", 1),
		objectEvent(envelope.Deleted, "m1", "ConfigMap", "configmaps", "shop", "a", "ua", "5000", 1),
		objectEvent(envelope.Deleted, "m1", "ConfigMap", "configmaps", "shop", "b", "ub", "5001", 1),
		// A replay of the deleting epoch stays deleted.
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "b", "ub", "4100", 1),
		// Restored: the snapshot holds a, not b.
		objectEvent(envelope.Added, "m1", "ConfigMap", "configmaps", "shop", "a", "ua", "150", 2),
		marker(envelope.Sync, "m1", "ConfigMap", "configmaps", "", 2, "155"),
	)
	startIndexer(t, s, srv.URL)
	eng := osrv.Engine
	state := func() string {
		return fmt.Sprintf("a=%s b=%s", eng.State("kubernetes-configmap", "m1/ua"), eng.State("kubernetes-configmap", "m1/ub"))
	}
	const want = "a=2/150 b=deleted"
	end := s.ends(t, 1)[0]
	eventually(t, 30*time.Second, func() bool { return s.committed(t, "indexers", 1)[0] == end && state() == want },
		func() string { return fmt.Sprintf("state %s, want %s", state(), want) })
}
