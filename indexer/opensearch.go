package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/mappings"
)

// osClient talks to OpenSearch: plain requests over the opensearch-go transport (node pool, TLS,
// basic auth), with status codes and error types read by the indexer itself, because what it does
// depends on them (a 404 on a delete is success, a 429 is retried, a 409 goes to the epoch rule).
type osClient struct {
	client  *opensearch.Client
	timeout time.Duration
	metrics *metrics
}

func newOSClient(conn connection, timeout time.Duration, m *metrics) (*osClient, error) {
	c, err := opensearch.NewClient(opensearch.Config{
		Addresses:          conn.addresses,
		Username:           conn.username,
		Password:           conn.password,
		CACert:             conn.caCert,
		InsecureSkipVerify: conn.insecure,
		// The indexer retries with backoff itself; the transport only fails over between nodes.
		RetryOnStatus:  []int{502, 503, 504},
		MaxRetries:     2,
		RequestTimeout: timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("opensearch client: %w", err)
	}
	return &osClient{client: c, timeout: timeout, metrics: m}, nil
}

func (c *osClient) close() error { return c.client.Close() }

// rawRequest is an opensearch.Request with a prepared path, query and body.
type rawRequest struct {
	path        string
	query       url.Values
	body        []byte
	contentType string
}

func (r rawRequest) GetRequest(method string) (*http.Request, error) {
	u := r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	return req, nil
}

// do sends a request and returns the status and body of whatever answer came. err is set only when
// no answer came (connection refused, timeout, ctx done).
func (c *osClient) do(ctx context.Context, method string, req rawRequest) (int, []byte, error) {
	resp, err := opensearch.Do[opensearch.NoBody](ctx, c.client, method, req, nil)
	if resp == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return 0, nil, fmt.Errorf("%s %s: %w", method, req.path, err)
	}
	var body []byte
	if resp.Body != nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: read response: %w", method, req.path, err)
		}
	}
	return resp.StatusCode, body, nil
}

// apiError describes an error answer: its status, error.type and error.reason.
func apiError(method, path string, status int, body []byte) *requestError {
	typ, reason := errorCause(gjson.GetBytes(body, "error"))
	if typ == "" && reason == "" {
		reason = strings.TrimSpace(string(truncate(body, 512)))
	}
	return &requestError{status: status, err: fmt.Errorf("%s %s: %s: %s", method, path, typ, reason)}
}

// errorCause reads an OpenSearch error object (or string), with its first caused_by.
func errorCause(e gjson.Result) (typ, reason string) {
	if e.Type == gjson.String {
		return "", e.Str
	}
	typ, reason = e.Get("type").Str, e.Get("reason").Str
	if cb := e.Get("caused_by"); cb.Exists() {
		reason += " (caused by " + cb.Get("type").Str + ": " + cb.Get("reason").Str + ")"
	}
	return typ, reason
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func errorType(body []byte) string { return gjson.GetBytes(body, "error.type").Str }

// bulk implements docStore.
func (c *osClient) bulk(ctx context.Context, ops []*op) ([]itemResult, error) {
	body := appendBulk(make([]byte, 0, bulkSize(ops)), ops)
	c.metrics.bulkBytes.Observe(float64(len(body)))
	c.metrics.bulkItems.Observe(float64(len(ops)))
	status, resp, err := c.do(ctx, http.MethodPost, rawRequest{path: "/_bulk", body: body, contentType: "application/x-ndjson"})
	if err != nil {
		return nil, &requestError{err: err}
	}
	if status != http.StatusOK {
		return nil, apiError("POST", "/_bulk", status, resp)
	}
	return parseBulkResponse(resp, len(ops))
}

// parseBulkResponse reads the per-item results of a _bulk answer.
func parseBulkResponse(body []byte, n int) ([]itemResult, error) {
	items := gjson.GetBytes(body, "items")
	if !items.IsArray() {
		return nil, &requestError{status: 200, err: fmt.Errorf("_bulk answer has no items: %s", truncate(body, 256))}
	}
	out := make([]itemResult, 0, n)
	items.ForEach(func(_, it gjson.Result) bool {
		// Each item is {"<action>": {...}}.
		var r itemResult
		it.ForEach(func(_, v gjson.Result) bool {
			r.status = int(v.Get("status").Int())
			if e := v.Get("error"); e.Exists() {
				r.errType, r.reason = errorCause(e)
			}
			return false
		})
		out = append(out, r)
		return true
	})
	if len(out) != n {
		// The answer does not line up with the request; nothing in it can be trusted per item.
		return nil, &requestError{status: 200, err: fmt.Errorf("_bulk answered %d items for %d operations", len(out), n)}
	}
	return out, nil
}

// storedVersions implements docStore with one _mget, realtime (it sees writes not yet refreshed).
func (c *osClient) storedVersions(ctx context.Context, keys []docKey) (map[docKey]storedDoc, error) {
	type doc struct {
		Index string `json:"_index"`
		ID    string `json:"_id"`
	}
	req := struct {
		Docs []doc `json:"docs"`
	}{Docs: make([]doc, len(keys))}
	for i, k := range keys {
		req.Docs[i] = doc{k.index, k.id}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode _mget: %w", err)
	}
	q := url.Values{"_source_includes": {"epoch,resourceVersion"}}
	status, resp, err := c.do(ctx, http.MethodPost, rawRequest{path: "/_mget", query: q, body: body})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, apiError("POST", "/_mget", status, resp)
	}
	return parseMget(resp, keys)
}

func parseMget(body []byte, keys []docKey) (map[docKey]storedDoc, error) {
	docs := gjson.GetBytes(body, "docs").Array()
	if len(docs) != len(keys) {
		return nil, fmt.Errorf("_mget answered %d documents for %d", len(docs), len(keys))
	}
	out := make(map[docKey]storedDoc, len(keys))
	for i, d := range docs {
		// An error (index_not_found_exception) means not found as well.
		s := storedDoc{found: d.Get("found").Bool()}
		if s.found {
			s.epoch = d.Get("_source.epoch").Int()
			s.rv = d.Get("_source.resourceVersion").Int()
			if sq := d.Get("_seq_no"); sq.Exists() {
				s.hasSeqNo, s.seqNo, s.primaryTerm = true, sq.Int(), d.Get("_primary_term").Int()
			}
		}
		out[keys[i]] = s
	}
	return out, nil
}

// ensureIndex implements docStore: the alias exists, or is created pointing to a new concrete index
// "<alias>-v<mappings.Version>" as its write index, so a mapping change can later roll the alias to a
// new index.
func (c *osClient) ensureIndex(ctx context.Context, alias string) (indexState, error) {
	status, body, err := c.do(ctx, http.MethodGet, rawRequest{path: "/_alias/" + url.PathEscape(alias)})
	if err != nil {
		return indexState{}, err
	}
	switch status {
	case http.StatusOK:
		// {"<index>": {"aliases": {...}}, ...}
		st := indexState{alias: true}
		gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
			st.behind = append(st.behind, k.Str)
			return true
		})
		slices.Sort(st.behind)
		return st, nil
	case http.StatusNotFound:
	default:
		return indexState{}, apiError("GET", "/_alias/"+alias, status, body)
	}
	concrete := VersionedIndexName(alias)
	created := indexState{alias: true, behind: []string{concrete}}
	create, err := json.Marshal(map[string]any{"aliases": map[string]any{alias: map[string]any{"is_write_index": true}}})
	if err != nil {
		return indexState{}, err
	}
	status, body, err = c.do(ctx, http.MethodPut, rawRequest{path: "/" + url.PathEscape(concrete), body: create})
	if err != nil {
		return indexState{}, err
	}
	switch {
	case status == http.StatusOK:
		return created, nil
	case errorType(body) == "resource_already_exists_exception":
		// Created by another replica, or by hand without the alias: (re)attach it, idempotently.
		return created, c.addAlias(ctx, concrete, alias)
	case errorType(body) == "invalid_alias_name_exception":
		// A concrete index has the alias's name (auto-created by a write before the indexer managed
		// it, or made by an older version): keep writing to it.
		return indexState{}, nil
	default:
		return indexState{}, apiError("PUT", "/"+concrete, status, body)
	}
}

// VersionedIndexName is the concrete index behind an alias for this build's mapping version:
// "<alias>-v<mappings.Version>".
func VersionedIndexName(alias string) string {
	return alias + "-v" + strconv.Itoa(mappings.Version)
}

func (c *osClient) addAlias(ctx context.Context, index, alias string) error {
	return c.aliasActions(ctx, map[string]any{"add": map[string]any{"index": index, "alias": alias, "is_write_index": true}})
}

// aliasActions applies alias actions in one atomic POST _aliases.
func (c *osClient) aliasActions(ctx context.Context, actions ...map[string]any) error {
	body, err := json.Marshal(map[string]any{"actions": actions})
	if err != nil {
		return err
	}
	status, resp, err := c.do(ctx, http.MethodPost, rawRequest{path: "/_aliases", body: body})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError("POST", "/_aliases", status, resp)
	}
	return nil
}

// refresh makes everything written to indices searchable. Indices that do not exist are skipped.
func (c *osClient) refresh(ctx context.Context, indices ...string) error {
	if len(indices) == 0 {
		return nil
	}
	path := "/" + url.PathEscape(strings.Join(indices, ",")) + "/_refresh"
	q := url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}
	status, body, err := c.do(ctx, http.MethodPost, rawRequest{path: path, query: q})
	if err != nil {
		return err
	}
	if status != http.StatusOK && errorType(body) != "index_not_found_exception" {
		return apiError("POST", path, status, body)
	}
	return nil
}

// gcPageSize is how many documents one page of garbage collection reads and deletes.
const gcPageSize = 1000

// deleteMatching deletes the documents of index that match filter (see gc.go for why not
// _delete_by_query). The index is refreshed first, so documents written just before the marker are
// seen by the search, and afterwards, so searches stop seeing what was deleted. A document changed
// meanwhile (409) is skipped. A missing index has nothing to delete. An error means some documents
// may remain; deleting again is harmless.
func (c *osClient) deleteMatching(ctx context.Context, index string, filter []any) (deleted int64, err error) {
	if err := c.refresh(ctx, index); err != nil {
		return 0, err
	}
	path := "/" + url.PathEscape(index) + "/_search"
	var after json.RawMessage
	for {
		body, err := json.Marshal(gcSearch(filter, gcPageSize, after))
		if err != nil {
			return deleted, err
		}
		status, resp, err := c.do(ctx, http.MethodPost, rawRequest{path: path, body: body})
		if err != nil {
			return deleted, &requestError{err: err}
		}
		switch {
		case status == http.StatusNotFound && errorType(resp) == "index_not_found_exception":
			return deleted, nil
		case status != http.StatusOK:
			return deleted, apiError("POST", path, status, resp)
		}
		// Documents on failed shards, or past a timed-out search, would survive unseen.
		if sh := gjson.GetBytes(resp, "_shards"); sh.Get("failed").Int() > 0 {
			return deleted, &requestError{status: 503, err: fmt.Errorf("POST %s: %d of %d shards failed: %s", path,
				sh.Get("failed").Int(), sh.Get("total").Int(), sh.Get("failures.0.reason.reason").Str)}
		}
		if gjson.GetBytes(resp, "timed_out").Bool() {
			return deleted, &requestError{status: 503, err: fmt.Errorf("POST %s: timed out", path)}
		}
		hits := gjson.GetBytes(resp, "hits.hits").Array()
		if len(hits) > 0 {
			n, err := c.deleteVersioned(ctx, hits)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		if len(hits) < gcPageSize {
			break
		}
		after = json.RawMessage(hits[len(hits)-1].Get("sort").Raw)
	}
	if deleted > 0 {
		return deleted, c.refresh(ctx, index)
	}
	return 0, nil
}

// deleteVersioned deletes search hits, each at the _version it was read with (external_gte), so the
// tombstone keeps that version. It counts the documents deleted; a 404 (gone already) or 409 (written
// since, so it is newer than the marker) is not an error.
func (c *osClient) deleteVersioned(ctx context.Context, hits []gjson.Result) (int64, error) {
	var body []byte
	for _, h := range hits {
		body = append(body, `{"delete":{"_index":`...)
		body = document.AppendString(body, h.Get("_index").Str)
		body = append(body, `,"_id":`...)
		body = document.AppendString(body, h.Get("_id").Str)
		body = append(body, `,"version":`...)
		body = strconv.AppendInt(body, h.Get("_version").Int(), 10)
		body = append(body, `,"version_type":"external_gte"}}`+"\n"...)
	}
	status, resp, err := c.do(ctx, http.MethodPost, rawRequest{path: "/_bulk", body: body, contentType: "application/x-ndjson"})
	if err != nil {
		return 0, &requestError{err: err}
	}
	if status != http.StatusOK {
		return 0, apiError("POST", "/_bulk", status, resp)
	}
	results, err := parseBulkResponse(resp, len(hits))
	if err != nil {
		return 0, err
	}
	var deleted int64
	for _, r := range results {
		switch {
		case r.status >= 200 && r.status < 300:
			deleted++
		case r.status == http.StatusNotFound, r.status == http.StatusConflict:
		default:
			// Retried as a whole by the marker (429, 5xx, a write block), or refused for good.
			return deleted, &requestError{status: r.status, err: fmt.Errorf("POST /_bulk: delete: %s: %s", r.errType, r.reason)}
		}
	}
	return deleted, nil
}

// installTemplate puts the index template when none is installed, when the installed one is of an
// older mappings.Version, or when it is of this version with other index settings (shards, replicas,
// refresh interval). A template of a newer version belongs to a newer indexer and is left alone.
func (c *osClient) installTemplate(ctx context.Context, opts mappings.Options) (string, error) {
	name := mappings.TemplateName(opts.Prefix)
	path := "/_index_template/" + url.PathEscape(name)
	body, err := mappings.IndexTemplate(opts)
	if err != nil {
		return "", err
	}
	status, resp, err := c.do(ctx, http.MethodGet, rawRequest{path: path})
	if err != nil {
		return "", err
	}
	switch status {
	case http.StatusOK:
		installed := gjson.GetBytes(resp, "index_templates.0.index_template")
		v := installed.Get("version")
		switch {
		case v.Exists() && v.Int() > mappings.Version:
			return fmt.Sprintf("a newer template (version %d) is installed; left as is", v.Int()), nil
		case v.Exists() && v.Int() == mappings.Version && sameSettings(installed.Get("template.settings.index"), gjson.GetBytes(body, "template.settings.index")):
			return "", nil
		}
	case http.StatusNotFound:
	default:
		return "", apiError("GET", path, status, resp)
	}
	status, resp, err = c.do(ctx, http.MethodPut, rawRequest{path: path, body: body})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", apiError("PUT", path, status, resp)
	}
	return fmt.Sprintf("template %s version %d installed", name, mappings.Version), nil
}

// sameSettings compares the index settings the indexer controls. OpenSearch answers every setting
// as a string.
func sameSettings(installed, want gjson.Result) bool {
	for _, k := range []string{"number_of_shards", "number_of_replicas", "refresh_interval"} {
		if installed.Get(k).String() != want.Get(k).String() {
			return false
		}
	}
	return true
}

// ping checks that OpenSearch answers at all.
func (c *osClient) ping(ctx context.Context) error {
	status, body, err := c.do(ctx, http.MethodGet, rawRequest{path: "/"})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError("GET", "/", status, body)
	}
	return nil
}

// createIndex creates an index with a body; an index that exists already is fine.
func (c *osClient) createIndex(ctx context.Context, index string, body []byte) error {
	status, resp, err := c.do(ctx, http.MethodPut, rawRequest{path: "/" + url.PathEscape(index), body: body})
	if err != nil {
		return err
	}
	if status == http.StatusOK || errorType(resp) == "resource_already_exists_exception" {
		return nil
	}
	return apiError("PUT", "/"+index, status, resp)
}
