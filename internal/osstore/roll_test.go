package osstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

func TestPlanRolls(t *testing.T) {
	cur := fmt.Sprintf("-v%d", mappings.Version)
	older := fmt.Sprintf("-v%d", mappings.Version-1)
	newer := fmt.Sprintf("-v%d", mappings.Version+1)
	tests := []struct {
		name       string
		r          resolved
		wantRolls  []rollPlan
		wantUnhide []string
		wantRetire []string
	}{{
		name: "current indices stay",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
	}, {
		name: "an older index rolls",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-deployment" + cur: {aliases: []string{"k-deployment"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}, "k-deployment": {"k-deployment" + cur}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}, {
		name: "an interrupted roll resumes: its hidden target is not behind the alias yet",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-pod" + cur: {hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}, {
		name: "a roll stopped after its swap is unhidden",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + cur: {aliases: []string{"k-pod"}, hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
		wantUnhide: []string{"k-pod" + cur},
	}, {
		name: "a newer indexer's index is never rolled back",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + newer: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + newer}},
		},
	}, {
		name: "an alias over several indices rolls them all",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-pod-old": {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older, "k-pod-old"}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod-old", "k-pod" + older}}},
	}, {
		name: "a concrete index with an alias's name becomes the alias",
		r: resolved{
			indices: map[string]resolvedIndex{"k-configmap": {}, "k-configmap" + cur: {hidden: true}},
			aliases: map[string][]string{},
		},
		wantRolls: []rollPlan{{alias: "k-configmap", target: "k-configmap" + cur, sources: []string{"k-configmap"}, legacy: true}},
	}, {
		name: "a versioned index without alias is left alone",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {}},
			aliases: map[string][]string{},
		},
	}, {
		name: "an old index a finished roll detached and hid is deleted",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {hidden: true}, "k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
		wantRetire: []string{"k-pod" + older},
	}, {
		name: "a detached old index that is not hidden is someone else's",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {}, "k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
	}, {
		name: "an old index hidden mid-roll is still behind its alias: the roll resumes",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}, hidden: true}, "k-pod" + cur: {hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := planRolls(tt.r)
			if !reflect.DeepEqual(w.rolls, tt.wantRolls) {
				t.Errorf("rolls = %+v, want %+v", w.rolls, tt.wantRolls)
			}
			if !reflect.DeepEqual(w.unhide, tt.wantUnhide) {
				t.Errorf("unhide = %v, want %v", w.unhide, tt.wantUnhide)
			}
			if !reflect.DeepEqual(w.retire, tt.wantRetire) {
				t.Errorf("retire = %v, want %v", w.retire, tt.wantRetire)
			}
		})
	}
}

func TestRollPageSize(t *testing.T) {
	for _, tt := range []struct {
		avg  int64
		want int
	}{
		{0, 1000},       // empty index, or no stats
		{9 * 1024, 910}, // Pods: about a batch's bytes per page
		{1 << 20, 10},   // 1 MiB ConfigMaps: never more than a few batches in memory
		{100, 1000},     // tiny documents: the batch size caps it
		{200 * 1024, 40},
	} {
		if got := rollPageSize(1000, 8<<20, tt.avg); got != tt.want {
			t.Errorf("rollPageSize(1000, 8 MiB, %d) = %d, want %d", tt.avg, got, tt.want)
		}
	}
}

func TestVersioned(t *testing.T) {
	for name, want := range map[string]bool{
		"kubernetes-pod-v1": true, "kubernetes-pod-v12": true, "kubernetes-pod": false,
		"kubernetes-pod-v": false, "kubernetes-pod-vx": false, "dev-v2-kubernetes-pod": false,
	} {
		if got := versioned(name); got != want {
			t.Errorf("versioned(%q) = %v, want %v", name, got, want)
		}
	}
	if got := versionOf("k-pod-v3", "k-pod"); got != 3 {
		t.Errorf("versionOf = %d, want 3", got)
	}
	if got := versionOf("k-podx-v3", "k-pod"); got != 0 {
		t.Errorf("versionOf of another alias's index = %d, want 0", got)
	}
}

// rollFake is just enough OpenSearch for one roll: it serves a scroll of docs from the sources, takes
// _bulk (refusing the ids in refuse), says whether the alias is swapped already, and records every
// other request as "METHOD path body".
type rollFake struct {
	docs    map[string][]byte // _id → _source
	refuse  map[string]bool
	swapped bool // GET _alias answers with the target
	// lease is the stored roll lease document, nil when none; leaseSeq its _seq_no.
	lease    []byte
	leaseSeq int

	mu       sync.Mutex
	requests []string
	bulks    []string
}

func (f *rollFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_search") && r.URL.Query().Get("scroll") != "":
		var hits []string
		for id, src := range f.docs {
			hits = append(hits, fmt.Sprintf(`{"_index":"k-pod-v0","_id":%q,"_version":%d,"_source":%s}`, id, 40+len(id), src))
		}
		fmt.Fprintf(w, `{"_scroll_id":"s1","_shards":{"total":1,"failed":0},"hits":{"hits":[%s]}}`, strings.Join(hits, ","))
	case r.URL.Path == "/_search/scroll" && r.Method == http.MethodPost:
		io.WriteString(w, `{"_scroll_id":"s1","_shards":{"total":1,"failed":0},"hits":{"hits":[]}}`)
	case strings.HasPrefix(r.URL.Path, "/_alias/"):
		if !f.swapped {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"alias missing","status":404}`)
			return
		}
		io.WriteString(w, `{"k-pod-v1":{"aliases":{"k-pod":{}}}}`)
	case strings.Contains(r.URL.Path, "/_doc/"):
		q := r.URL.Query()
		switch r.Method {
		case http.MethodGet:
			if f.lease == nil {
				w.WriteHeader(404)
				io.WriteString(w, `{"found":false}`)
				return
			}
			fmt.Fprintf(w, `{"found":true,"_seq_no":%d,"_primary_term":1,"_source":%s}`, f.leaseSeq, f.lease)
		case http.MethodPut:
			if q.Get("op_type") == "create" && f.lease != nil || q.Has("if_seq_no") && (f.lease == nil || q.Get("if_seq_no") != fmt.Sprint(f.leaseSeq)) {
				w.WriteHeader(409)
				io.WriteString(w, `{"error":{"type":"version_conflict_engine_exception"},"status":409}`)
				return
			}
			f.lease, f.leaseSeq = body, f.leaseSeq+1
			fmt.Fprintf(w, `{"result":"created","_seq_no":%d,"_primary_term":1}`, f.leaseSeq)
		case http.MethodDelete:
			f.lease = nil
			io.WriteString(w, `{"result":"deleted"}`)
		}
	case strings.HasSuffix(r.URL.Path, "/_stats/docs,store"):
		io.WriteString(w, `{"_all":{"primaries":{"docs":{"count":2},"store":{"size_in_bytes":20000}}}}`)
	case r.URL.Path == "/_bulk":
		f.bulks = append(f.bulks, string(body))
		var items []string
		lines := strings.Split(strings.TrimSpace(string(body)), "\n")
		for i := 0; i < len(lines); i += 2 {
			id := gjson.Get(lines[i], "index._id").Str
			if f.refuse[id] {
				items = append(items, fmt.Sprintf(`{"index":{"_id":%q,"status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse"}}}`, id))
			} else {
				items = append(items, fmt.Sprintf(`{"index":{"_id":%q,"status":201}}`, id))
			}
		}
		fmt.Fprintf(w, `{"errors":false,"items":[%s]}`, strings.Join(items, ","))
	default:
		f.requests = append(f.requests, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
		io.WriteString(w, `{"acknowledged":true}`)
	}
}

func newRollFake(t *testing.T) (*rollFake, *testRoller) {
	t.Helper()
	f := &rollFake{docs: map[string][]byte{}, refuse: map[string]bool{}}
	for _, name := range []string{"pod.json", "deployment.json"} {
		// The document package's golden events: a realistic Pod and Deployment.
		data, err := os.ReadFile(filepath.Join("..", "document", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := envelope.Unmarshal(data)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := document.Build(ev)
		if err != nil {
			t.Fatal(err)
		}
		f.docs[gjson.GetBytes(doc, "uid").Str] = doc
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := New(Options{Addresses: []string{srv.URL}, RequestTimeout: 5 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := &testRoller{s: s}
	r.o.Step = func(step string) { r.step.Store(&step) }
	setupDefaults(&r.o)
	return f, r
}

// testRoller runs rolls as Setup does, and keeps the last step Setup reported.
type testRoller struct {
	s    *Store
	o    store.SetupOptions
	step atomic.Pointer[string]
}

func (r *testRoller) roll(ctx context.Context, p rollPlan) (int, error) { return r.s.roll(ctx, r.o, p) }

func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

var rollOfPods = rollPlan{alias: "k-pod", target: "k-pod-v1", sources: []string{"k-pod-v0"}}

func TestRoll(t *testing.T) {
	f, ix := newRollFake(t)
	n, err := ix.roll(t.Context(), rollOfPods)
	if err != nil || n != len(f.docs) {
		t.Fatalf("roll = %d, %v; want %d documents", n, err, len(f.docs))
	}
	want := []string{
		`PUT /k-pod-v1 {"settings":{"index.hidden":true,"index.refresh_interval":"-1"}}`,
		`PUT /k-pod-v0/_settings {"index.blocks.write":true}`,
		`POST /k-pod-v0/_refresh`,
		`DELETE /_search/scroll {"scroll_id":"s1"}`,
		`PUT /k-pod-v1/_settings {"index.refresh_interval":"1s"}`,
		`POST /k-pod-v1/_refresh`,
		`PUT /k-pod-v0/_settings {"index.hidden":true}`,
		`POST /_aliases {"actions":[{"add":{"alias":"k-pod","index":"k-pod-v1","is_write_index":true}},{"remove":{"alias":"k-pod","index":"k-pod-v0"}}]}`,
		`PUT /k-pod-v1/_settings {"index.hidden":false}`,
	}
	if !reflect.DeepEqual(f.requests, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(f.requests, "\n"), strings.Join(want, "\n"))
	}
	if f.leaseSeq == 0 || f.lease != nil {
		t.Errorf("roll lease: taken %d times, released: %v; want taken and released", f.leaseSeq, f.lease == nil)
	}
	// Every document is written to the target with the _version it had, rebuilt to the same bytes,
	// under its (cluster, uid) id: the old index kept it under the uid alone (mapping version 1).
	if len(f.bulks) != 1 {
		t.Fatalf("%d _bulk requests, want 1", len(f.bulks))
	}
	lines := strings.Split(strings.TrimSpace(f.bulks[0]), "\n")
	if len(lines) != 2*len(f.docs) {
		t.Fatalf("%d documents copied, want %d", len(lines)/2, len(f.docs))
	}
	for i := 0; i < len(lines); i += 2 {
		meta := gjson.Get(lines[i], "index")
		uid := gjson.Get(lines[i+1], "uid").Str
		want := store.DocID(gjson.Get(lines[i+1], "cluster").Str, uid)
		if meta.Get("_id").Str != want {
			t.Errorf("bulk action %s: want _id %s", lines[i], want)
		}
		if meta.Get("_index").Str != "k-pod-v1" || meta.Get("version").Int() != int64(40+len(uid)) || meta.Get("version_type").Str != "external_gte" {
			t.Errorf("bulk action %s: want index k-pod-v1, version %d, external_gte", lines[i], 40+len(uid))
		}
		if lines[i+1] != string(f.docs[uid]) {
			t.Errorf("document %s rebuilt differently:\n%.300s\nwant\n%.300s", uid, lines[i+1], f.docs[uid])
		}
	}
}

func TestRollAbortsOnRefusedDocument(t *testing.T) {
	f, ix := newRollFake(t)
	for _, doc := range f.docs {
		f.refuse[store.DocID(gjson.GetBytes(doc, "cluster").Str, gjson.GetBytes(doc, "uid").Str)] = true
		break
	}
	_, err := ix.roll(t.Context(), rollOfPods)
	if !errors.Is(err, errRollAborted) || !strings.Contains(err.Error(), "mapper_parsing_exception") {
		t.Fatalf("roll = %v, want an abort naming the refusal", err)
	}
	// The new index is deleted, the old one writable again, and no alias moved.
	want := []string{
		`PUT /k-pod-v1 {"settings":{"index.hidden":true,"index.refresh_interval":"-1"}}`,
		`PUT /k-pod-v0/_settings {"index.blocks.write":true}`,
		`POST /k-pod-v0/_refresh`,
		`DELETE /_search/scroll {"scroll_id":"s1"}`,
		`DELETE /k-pod-v1`,
		`PUT /k-pod-v0/_settings {"index.blocks.write":null}`,
	}
	if !reflect.DeepEqual(f.requests, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(f.requests, "\n"), strings.Join(want, "\n"))
	}
}

func TestRollStopsWhenRolledElsewhere(t *testing.T) {
	f, ix := newRollFake(t)
	f.swapped = true
	_, err := ix.roll(t.Context(), rollOfPods)
	if !errors.Is(err, errRolledElsewhere) {
		t.Fatalf("roll = %v, want errRolledElsewhere", err)
	}
	if len(f.bulks) != 0 {
		t.Errorf("%d documents copied into an index already live", len(f.bulks))
	}
	for _, r := range f.requests {
		if strings.Contains(r, "_aliases") || strings.Contains(r, "DELETE /k-pod") {
			t.Errorf("the other indexer's roll was touched: %s", r)
		}
	}
}

func otherLease(renewed time.Time) []byte {
	return []byte(fmt.Sprintf(`{"lease":{"owner":"other-host/1/ab","target":"k-pod-v1","renewedAt":%q}}`, renewed.UTC().Format(time.RFC3339Nano)))
}

// A replica that finds the lease held waits, copying nothing, until the alias has moved.
func TestRollWaitsForTheLeaseHolder(t *testing.T) {
	f, ix := newRollFake(t)
	f.lease, f.leaseSeq = otherLease(time.Now()), 1
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := ix.roll(ctx, rollOfPods); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("roll = %v, want it still waiting when its context ends", err)
	}
	if len(f.requests) != 0 || len(f.bulks) != 0 {
		t.Errorf("a waiting replica touched the indices: %v, %d bulks", f.requests, len(f.bulks))
	}
	if got := *ix.step.Load(); !strings.Contains(got, "waiting for other-host/1/ab") {
		t.Errorf("/readyz would say %q, want it to name the holder", got)
	}

	f.swapped = true
	if _, err := ix.roll(t.Context(), rollOfPods); !errors.Is(err, errRolledElsewhere) {
		t.Fatalf("roll after the holder swapped = %v, want errRolledElsewhere", err)
	}
}

// A lease its holder stopped renewing (it crashed) is taken over.
func TestRollTakesOverAnExpiredLease(t *testing.T) {
	f, ix := newRollFake(t)
	f.lease, f.leaseSeq = otherLease(time.Now().Add(-2*leaseTTL)), 1
	n, err := ix.roll(t.Context(), rollOfPods)
	if err != nil || n != len(f.docs) {
		t.Fatalf("roll = %d, %v; want the expired lease taken over and %d documents copied", n, err, len(f.docs))
	}
}
