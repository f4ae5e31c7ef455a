package osstore

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/mappings"
)

// scripted is an OpenSearch that answers each "METHOD /path" with a scripted status and body, and
// records the requests.
type scripted struct {
	mu       sync.Mutex
	answers  map[string][]answer // consumed in order; the last one repeats
	requests []string            // "METHOD /path?query body"
}

type answer struct {
	status int
	body   string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.Method + " " + r.URL.Path
	req := key
	if r.URL.RawQuery != "" {
		req += "?" + r.URL.RawQuery
	}
	if len(body) > 0 {
		req += " " + string(body)
	}
	s.requests = append(s.requests, req)
	as := s.answers[key]
	if len(as) == 0 {
		w.WriteHeader(http.StatusNotImplemented)
		return
	}
	a := as[0]
	if len(as) > 1 {
		s.answers[key] = as[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (s *scripted) sent(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func newScripted(t *testing.T, answers map[string][]answer) (*scripted, *Store) {
	t.Helper()
	s := &scripted{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := New(Options{Addresses: []string{srv.URL}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

const (
	notFound      = `{"error":{"root_cause":[],"type":"index_not_found_exception","reason":"no such index"},"status":404}`
	aliasMissing  = `{"error":"alias [kubernetes-pod] missing","status":404}`
	alreadyExists = `{"error":{"type":"resource_already_exists_exception","reason":"index [kubernetes-pod-v4/x] already exists"},"status":400}`
	invalidAlias  = `{"error":{"type":"invalid_alias_name_exception","reason":"Invalid alias name [kubernetes-pod], an index exists with the same name as the alias"},"status":400}`
)

func TestEnsureIndex(t *testing.T) {
	tests := []struct {
		name      string
		answers   map[string][]answer
		wantAlias bool
		wantSent  []string
	}{
		{"alias exists", map[string][]answer{"GET /_alias/kubernetes-pod": {{200, `{"kubernetes-pod-v4":{"aliases":{"kubernetes-pod":{"is_write_index":true}}}}`}}},
			true, []string{"GET /_alias/kubernetes-pod"}},
		{"created behind the alias", map[string][]answer{
			"GET /_alias/kubernetes-pod": {{404, aliasMissing}},
			"PUT /kubernetes-pod-v4":     {{200, `{"acknowledged":true,"shards_acknowledged":true,"index":"kubernetes-pod-v4"}`}},
		}, true, []string{"GET /_alias/kubernetes-pod", `PUT /kubernetes-pod-v4 {"aliases":{"kubernetes-pod":{"is_write_index":true}}}`}},
		{"versioned index without the alias", map[string][]answer{
			"GET /_alias/kubernetes-pod": {{404, aliasMissing}},
			"PUT /kubernetes-pod-v4":     {{400, alreadyExists}},
			"POST /_aliases":             {{200, `{"acknowledged":true}`}},
		}, true, []string{"GET /_alias/kubernetes-pod", "PUT /kubernetes-pod-v4",
			`POST /_aliases {"actions":[{"add":{"alias":"kubernetes-pod","index":"kubernetes-pod-v4","is_write_index":true}}]}`}},
		{"a concrete index has the alias's name", map[string][]answer{
			"GET /_alias/kubernetes-pod": {{404, aliasMissing}},
			"PUT /kubernetes-pod-v4":     {{400, invalidAlias}},
		}, false, []string{"GET /_alias/kubernetes-pod", "PUT /kubernetes-pod-v4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newScripted(t, tt.answers)
			st, err := c.ensureIndex(t.Context(), "kubernetes-pod")
			if err != nil {
				t.Fatal(err)
			}
			if st.alias != tt.wantAlias {
				t.Errorf("alias: got %v, want %v", st.alias, tt.wantAlias)
			}
			if tt.wantAlias && (len(st.behind) != 1 || st.behind[0] != "kubernetes-pod-v4") {
				t.Errorf("behind: got %v", st.behind)
			}
			if len(s.requests) != len(tt.wantSent) {
				t.Fatalf("requests: got %q, want %q", s.requests, tt.wantSent)
			}
			for i, w := range tt.wantSent {
				if !strings.HasPrefix(s.requests[i], w) {
					t.Errorf("request %d: got %q, want %q", i, s.requests[i], w)
				}
			}
		})
	}
}

func TestInstallTemplate(t *testing.T) {
	opts := mappings.Options{Replicas: 1}
	installed := func(version int, replicas string) string {
		return `{"index_templates":[{"name":"kubernetes","index_template":{"index_patterns":["kubernetes-*"],"version":` +
			strconv.Itoa(version) + `,"template":{"settings":{"index":{"number_of_shards":"1","number_of_replicas":"` + replicas + `","refresh_interval":"1s"}}}}}]}`
	}
	tests := []struct {
		name    string
		get     answer
		wantPut bool
	}{
		{"missing", answer{404, `{"error":{"type":"resource_not_found_exception","reason":"index template matching [kubernetes] not found"},"status":404}`}, true},
		{"older", answer{200, installed(mappings.Version-1, "1")}, true},
		{"same", answer{200, installed(mappings.Version, "1")}, false},
		{"same version, other settings", answer{200, installed(mappings.Version, "0")}, true},
		{"newer", answer{200, installed(mappings.Version+1, "1")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newScripted(t, map[string][]answer{
				"GET /_index_template/kubernetes": {tt.get},
				"PUT /_index_template/kubernetes": {{200, `{"acknowledged":true}`}},
			})
			if _, err := c.installTemplate(t.Context(), opts); err != nil {
				t.Fatal(err)
			}
			puts := s.sent("PUT /_index_template/kubernetes")
			if (len(puts) == 1) != tt.wantPut {
				t.Fatalf("PUT sent %d times, want put=%v", len(puts), tt.wantPut)
			}
			if tt.wantPut {
				body := strings.SplitN(puts[0], " ", 3)[2]
				if v := gjson.Get(body, "version").Int(); v != mappings.Version {
					t.Errorf("put template version %d", v)
				}
				if r := gjson.Get(body, "template.settings.index.number_of_replicas").Int(); r != 1 {
					t.Errorf("put template replicas %d", r)
				}
			}
		})
	}
}

func TestDeleteMatching(t *testing.T) {
	page := func(ids ...string) string {
		var hits []string
		for _, id := range ids {
			hits = append(hits, `{"_index":"kubernetes-pod-v4","_id":"`+id+`","_version":7,"sort":["`+id+`","kubernetes-pod-v4"]}`)
		}
		return `{"_shards":{"total":1,"successful":1,"failed":0},"hits":{"hits":[` + strings.Join(hits, ",") + `]}}`
	}
	ok := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"delete":{"status":200}}`
		}
		return `{"errors":false,"items":[` + strings.Join(items, ",") + `]}`
	}
	s, c := newScripted(t, map[string][]answer{
		"POST /kubernetes-pod/_refresh": {{200, `{"_shards":{"total":1,"successful":1,"failed":0}}`}},
		"POST /kubernetes-pod/_search": {
			{404, notFound},
			{200, page("a", "b", "c")},
			{200, `{"_shards":{"total":2,"successful":1,"failed":1,"failures":[{"reason":{"reason":"shard away"}}]},"hits":{"hits":[]}}`},
			{200, page("d")},
			{429, `{"error":{"type":"es_rejected_execution_exception","reason":"rejected"},"status":429}`},
		},
		"POST /_bulk": {
			{200, ok(3)},
			{200, `{"errors":true,"items":[{"delete":{"status":429,"error":{"type":"es_rejected_execution_exception","reason":"rejected"}}}]}`},
		},
	})
	filter := []any{term("cluster", "member1")}
	if n, err := c.deleteMatching(t.Context(), "kubernetes-pod", filter, nil); n != 0 || err != nil {
		t.Errorf("missing index: got %d, %v; want success with nothing deleted", n, err)
	}
	if n, err := c.deleteMatching(t.Context(), "kubernetes-pod", filter, nil); n != 3 || err != nil {
		t.Errorf("got %d, %v", n, err)
	}
	for _, name := range []string{"shard failed", "item throttled", "search throttled"} {
		_, err := c.deleteMatching(t.Context(), "kubernetes-pod", filter, nil)
		var re *requestError
		if !errors.As(err, &re) || (re.status != 503 && re.status != 429) {
			t.Errorf("%s: got %v, want a retryable request error", name, err)
		}
	}
	// Each document is deleted at the version it was read with: a tombstone at that version, not
	// above it, lets a re-list of the same state in again.
	bulks := s.sent("POST /_bulk")
	if len(bulks) != 2 || !strings.Contains(bulks[0], `{"delete":{"_index":"kubernetes-pod-v4","_id":"a","version":7,"version_type":"external_gte"}}`) {
		t.Errorf("bulk deletes: %q", bulks)
	}
	// Refreshed before every search run and after deleting.
	if got := len(s.sent("POST /kubernetes-pod/_refresh")); got != 6 {
		t.Errorf("refreshes: %d, want 6: %q", got, s.requests)
	}
}

func TestBulkRequestErrors(t *testing.T) {
	_, c := newScripted(t, map[string][]answer{
		"POST /_bulk": {
			{429, `{"error":{"type":"es_rejected_execution_exception","reason":"rejected execution of coordinating operation"},"status":429}`},
			{413, ``},
			{200, `{"took":1,"errors":false,"items":[{"index":{"_index":"kubernetes-pod-v4","_id":"u1","status":201}}]}`},
		},
	})
	batch := ops(idx("u1", 1, 1))
	_, err := c.bulk(t.Context(), batch)
	var re *requestError
	if !errors.As(err, &re) || re.status != 429 || splittable(err) {
		t.Errorf("429: got %v", err)
	}
	if _, err := c.bulk(t.Context(), batch); !splittable(err) {
		t.Errorf("413: got %v, want splittable", err)
	}
	res, err := c.bulk(t.Context(), batch)
	if err != nil || len(res) != 1 || res[0].status != 201 {
		t.Errorf("got %v, %v", res, err)
	}
}

func TestStoredVersions(t *testing.T) {
	s, c := newScripted(t, map[string][]answer{
		"POST /_mget": {{200, `{"docs":[
			{"_index":"kubernetes-pod-v4","_id":"a","_version":5000,"_seq_no":12,"_primary_term":3,"found":true,"_source":{"epoch":1000,"resourceVersion":5000,"object":{"metadata":{"labels":{"app.kubernetes.io/name":"web"}}}}},
			{"_index":"kubernetes-pod-v4","_id":"b","found":false},
			{"_index":"kubernetes-svc","_id":"c","error":{"type":"index_not_found_exception","reason":"no such index"}}]}`}},
	})
	keys := []docKey{{"kubernetes-pod", "a"}, {"kubernetes-pod", "b"}, {"kubernetes-svc", "c"}}
	got, err := c.storedVersions(t.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	want := storedDoc{found: true, epoch: 1000, rv: 5000, seqNo: 12, primaryTerm: 3, hasSeqNo: true, labels: json.RawMessage(`{"app.kubernetes.io/name":"web"}`)}
	if !reflect.DeepEqual(got[keys[0]], want) || got[keys[1]].found || got[keys[2]].found {
		t.Errorf("got %+v", got)
	}
	req := s.sent("POST /_mget")[0]
	if !strings.Contains(req, "_source_includes=epoch%2CresourceVersion") ||
		!strings.HasSuffix(req, `{"docs":[{"_index":"kubernetes-pod","_id":"a"},{"_index":"kubernetes-pod","_id":"b"},{"_index":"kubernetes-svc","_id":"c"}]}`) {
		t.Errorf("request: %s", req)
	}
}
