//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestListThenWatchWithRetriedBulkItems: OpenSearch answers some items of a `_bulk` 429 (its write
// queue full) while it writes the others, and the indexer writes those items again in a later
// request, after later events of the same pair are already searchable (issue 23, item 2). Here a
// proxy in front of the real OpenSearch refuses every fourth item of the indexer's requests once,
// forwarding the rest; list-then-watch clients under churn must still end with exactly the
// member's ConfigMaps.
func TestListThenWatchWithRetriedBulkItems(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	rejecter := newBulkRejecter(t, env.OpenSearchURL, 4)
	p := startQueryPipeline(t, env, f.registries(t), "--opensearch-addresses", rejecter.url)
	listThenWatchUnderChurn(t, env, f, p)
	t.Logf("the proxy refused %d bulk items (each once) of %d", rejecter.refused.Load(), rejecter.seen.Load())
	if rejecter.refused.Load() == 0 {
		t.Error("the proxy refused no bulk item: the test proved nothing")
	}
}

// bulkRejecter forwards everything to OpenSearch, but answers every nth item of a `_bulk` it has not
// refused before 429 without forwarding it, as OpenSearch does for items its write queue rejects.
type bulkRejecter struct {
	url           string
	target        *url.URL
	every         int64
	seen, refused atomic.Int64
	mu            sync.Mutex
	once          map[string]bool // the action lines refused already
}

func newBulkRejecter(t *testing.T, target string, every int64) *bulkRejecter {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	b := &bulkRejecter{target: u, every: every, once: map[string]bool{}}
	forward := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/_bulk") {
			forward.ServeHTTP(w, r)
			return
		}
		b.bulk(w, r)
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// bulk splits a _bulk into the items it forwards and those it refuses, and answers one response
// with every item in its place.
func (b *bulkRejecter) bulk(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	lines := bytes.Split(bytes.TrimRight(body, "\n"), []byte("\n"))
	type item struct {
		action  string
		meta    json.RawMessage
		lines   [][]byte
		refused bool
	}
	var items []item
	for i := 0; i < len(lines); i++ {
		var head map[string]json.RawMessage
		if err := json.Unmarshal(lines[i], &head); err != nil || len(head) != 1 {
			http.Error(w, fmt.Sprintf("line %d is not an action", i), http.StatusBadRequest)
			return
		}
		var it item
		for a, m := range head {
			it.action, it.meta = a, m
		}
		it.lines = [][]byte{lines[i]}
		if it.action != "delete" && i+1 < len(lines) {
			i++
			it.lines = append(it.lines, lines[i])
		}
		if n := b.seen.Add(1); n%b.every == 0 {
			b.mu.Lock()
			if key := string(it.lines[0]); !b.once[key] { // the action line: index, id and version
				b.once[key], it.refused = true, true
				b.refused.Add(1)
			}
			b.mu.Unlock()
		}
		items = append(items, it)
	}
	var fwd bytes.Buffer
	for _, it := range items {
		if !it.refused {
			for _, l := range it.lines {
				fwd.Write(l)
				fwd.WriteByte('\n')
			}
		}
	}
	var forwarded []json.RawMessage
	took := 0
	if fwd.Len() > 0 {
		u := *b.target
		u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), &fwd)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out struct {
			Took  int               `json:"took"`
			Items []json.RawMessage `json:"items"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			w.WriteHeader(resp.StatusCode)
			w.Write(raw)
			return
		}
		forwarded, took = out.Items, out.Took
	}
	all := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		if !it.refused {
			all, forwarded = append(all, forwarded[0]), forwarded[1:]
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(it.meta, &m)
		refusal, _ := json.Marshal(map[string]any{it.action: map[string]any{"_index": m["_index"], "_id": m["_id"], "status": 429,
			"error": map[string]any{"type": "es_rejected_execution_exception", "reason": "rejected by the test's proxy"}}})
		all = append(all, refusal)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"took": took, "errors": true, "items": all})
}
