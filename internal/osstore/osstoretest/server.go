package osstoretest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/mappings"
)

// Server serves the REST calls the store makes for the indexer, over an Engine: enough of
// OpenSearch for the indexer's behaviour to be tested without one. Aliases and indices share one
// namespace: documents are kept under the name they were written to.
type Server struct {
	Engine *Engine

	mu        sync.Mutex
	templates map[string][]byte
	aliases   map[string]bool
	indices   map[string]bool
	// bulkDown makes _bulk answer 503 while set.
	bulkDown atomic.Bool
	// Refreshes counts the _refresh requests: the engine's writes are visible at once, but how many
	// refreshes a caller asks for is what it costs a real cluster.
	Refreshes atomic.Int64
}

// New returns a Server over an empty engine, without templates, indices or aliases.
func New() *Server {
	return &Server{Engine: NewEngine(), templates: map[string][]byte{}, aliases: map[string]bool{}, indices: map[string]bool{}}
}

// AddAlias makes name an alias, as if the indexer had created its index before.
func (f *Server) AddAlias(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aliases[name] = true
}

// HasTemplate reports whether an index template of that name was put.
func (f *Server) HasTemplate(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.templates[name]
	return ok
}

// HasIndex reports whether a concrete index of that name was created.
func (f *Server) HasIndex(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.indices[name]
}

// SetBulkDown makes every _bulk request fail with a 503 while down is true.
func (f *Server) SetBulkDown(down bool) { f.bulkDown.Store(down) }

func (f *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if s, ok := v.(string); ok {
			io.WriteString(w, s)
			return
		}
		json.NewEncoder(w).Encode(v)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/":
		reply(200, `{"version":{"number":"2.19.0","distribution":"opensearch"}}`)
	case parts[0] == "_index_template":
		if r.Method == http.MethodPut {
			f.templates[parts[1]] = body
			reply(200, `{"acknowledged":true}`)
		} else if t, ok := f.templates[parts[1]]; ok {
			reply(200, fmt.Sprintf(`{"index_templates":[{"name":%q,"index_template":%s}]}`, parts[1], t))
		} else {
			reply(404, `{"error":{"type":"resource_not_found_exception","reason":"not found"},"status":404}`)
		}
	case parts[0] == "_alias":
		if f.aliases[parts[1]] {
			reply(200, fmt.Sprintf(`{"%s-v1":{"aliases":{%q:{}}}}`, parts[1], parts[1]))
		} else {
			reply(404, fmt.Sprintf(`{"error":"alias [%s] missing","status":404}`, parts[1]))
		}
	case parts[0] == "_resolve":
		// Every alias points to its index of this version: nothing to roll.
		base := strings.TrimSuffix(parts[len(parts)-1], "*")
		res := map[string][]any{"indices": {}, "aliases": {}}
		for a := range f.aliases {
			if strings.HasPrefix(a, base) {
				current := fmt.Sprintf("%s-v%d", a, mappings.Version)
				res["indices"] = append(res["indices"], map[string]any{"name": current, "aliases": []string{a}, "attributes": []string{"open"}})
				res["aliases"] = append(res["aliases"], map[string]any{"name": a, "indices": []string{current}})
			}
		}
		reply(200, res)
	case parts[0] == "_aliases":
		for _, a := range gjson.GetBytes(body, "actions.#.add.alias").Array() {
			f.aliases[a.Str] = true
		}
		reply(200, `{"acknowledged":true}`)
	case parts[0] == "_bulk":
		if f.bulkDown.Load() {
			reply(503, `{"error":{"type":"cluster_block_exception","reason":"blocked"},"status":503}`)
			return
		}
		reply(200, f.bulk(body))
	case parts[0] == "_mget" || len(parts) == 2 && parts[1] == "_mget":
		reply(200, f.mget(parts, body))
	case len(parts) == 2 && parts[1] == "_refresh":
		f.Refreshes.Add(1)
		reply(200, `{"_shards":{"total":1,"successful":1,"failed":0}}`)
	case len(parts) == 2 && parts[1] == "_search" && gjson.GetBytes(body, "version").Bool():
		// A garbage collection page: ids, indices and versions in uid order, after search_after.
		if !f.aliases[parts[0]] && !f.indices[parts[0]] {
			reply(404, `{"error":{"type":"index_not_found_exception","reason":"no such index"},"status":404}`)
			return
		}
		after := gjson.GetBytes(body, "search_after.0").Str // one index here: the uid orders alone
		hits := []any{}
		for _, d := range f.Engine.match(parts[0], gjson.GetBytes(body, "query.bool.filter")) {
			if d.id <= after || len(hits) == int(gjson.GetBytes(body, "size").Int()) {
				continue
			}
			hit := map[string]any{"_index": parts[0], "_id": d.id, "_version": d.version, "sort": []string{d.id, parts[0]}}
			if gjson.GetBytes(body, "_source").IsArray() {
				hit["_source"] = json.RawMessage(d.source) // unfiltered: readers pick what they asked for
			}
			hits = append(hits, hit)
		}
		reply(200, map[string]any{"_shards": map[string]any{"total": 1, "successful": 1, "failed": 0}, "hits": map[string]any{"hits": hits}})
	case len(parts) == 2 && parts[1] == "_search":
		// A search of the state index: the watermarks of a selection, or all of them in key order.
		filter := gjson.GetBytes(body, "query.bool.filter")
		var hits []any
		for _, d := range f.Engine.match(parts[0], filter) {
			if !filter.Exists() && !gjson.GetBytes(d.source, "key").Exists() {
				continue
			}
			hits = append(hits, map[string]any{"_id": d.id, "_source": json.RawMessage(d.source), "sort": []string{gjson.GetBytes(d.source, "key").Str}})
		}
		reply(200, map[string]any{"hits": map[string]any{"hits": hits}})
	case len(parts) == 1 && r.Method == http.MethodPut:
		if f.indices[parts[0]] {
			reply(400, `{"error":{"type":"resource_already_exists_exception","reason":"exists"},"status":400}`)
			return
		}
		f.indices[parts[0]] = true
		for a := range gjson.GetBytes(body, "aliases").Map() {
			f.aliases[a] = true
		}
		reply(200, `{"acknowledged":true}`)
	default:
		reply(400, fmt.Sprintf(`{"error":{"type":"fake","reason":"no route for %s %s"},"status":400}`, r.Method, r.URL.Path))
	}
}

func (f *Server) bulk(body []byte) map[string]any {
	var items []any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := gjson.Parse(sc.Text())
		var (
			act string
			md  gjson.Result
		)
		line.ForEach(func(k, v gjson.Result) bool { act, md = k.Str, v; return false })
		w := Write{Index: md.Get("_index").Str, ID: md.Get("_id").Str}
		if act == "index" {
			sc.Scan()
			w.Doc = bytes.Clone(sc.Bytes())
		} else {
			w.Delete = true
		}
		if v := md.Get("version"); v.Exists() && md.Get("version_type").Str == "external_gte" {
			w.Versioned, w.Version = true, v.Int()
		}
		if s := md.Get("if_seq_no"); s.Exists() {
			w.CAS, w.SeqNo, w.PrimaryTerm = true, s.Int(), md.Get("if_primary_term").Int()
		}
		var r Result
		if md.Get("require_alias").Bool() && !f.aliases[w.Index] {
			r = Result{Status: 404, ErrType: "index_not_found_exception", Reason: "require_alias"}
		} else {
			r = f.Engine.Apply(w)
		}
		item := map[string]any{"_index": w.Index, "_id": w.ID, "status": r.Status}
		if r.ErrType != "" {
			item["error"] = map[string]any{"type": r.ErrType, "reason": r.Reason}
		} else {
			item["_version"] = r.Version
		}
		items = append(items, map[string]any{act: item})
	}
	return map[string]any{"errors": false, "items": items}
}

func (f *Server) mget(parts []string, body []byte) map[string]any {
	var keys []key
	if len(parts) == 2 {
		for _, id := range gjson.GetBytes(body, "ids").Array() {
			keys = append(keys, key{parts[0], id.Str})
		}
	} else {
		for _, d := range gjson.GetBytes(body, "docs").Array() {
			keys = append(keys, key{d.Get("_index").Str, d.Get("_id").Str})
		}
	}
	var docs []any
	for _, k := range keys {
		d, ok := f.Engine.Get(k.index, k.id)
		if !ok {
			docs = append(docs, map[string]any{"_index": k.index, "_id": k.id, "found": false})
			continue
		}
		docs = append(docs, map[string]any{"_index": k.index, "_id": k.id, "found": true, "_version": d.Version,
			"_seq_no": d.SeqNo, "_primary_term": d.PrimaryTerm, "_source": json.RawMessage(d.Source)})
	}
	return map[string]any{"docs": docs}
}
