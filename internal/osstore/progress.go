package osstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/store"
)

// Watermarks are stored in mappings.StateIndex, one document per pair with _id = Pair.ID(): the
// store.Watermark plus a sortable key (Watermarks reads them in its order). The state index also
// holds roll leases (lease.go), which have no key.

// LoadWatermarks reads the stored watermarks of pairs, realtime (what was stored just before is
// seen); those never stored are absent from the map.
func (s *Store) LoadWatermarks(ctx context.Context, pairs []store.Pair) (map[store.Pair]*store.Watermark, error) {
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = p.ID()
	}
	body, err := json.Marshal(map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	path := "/" + url.PathEscape(s.stateIndex) + "/_mget"
	status, resp, err := s.do(ctx, http.MethodPost, request{path: path, body: body})
	if err != nil {
		return nil, fmt.Errorf("load watermarks: %w", err)
	}
	out := map[store.Pair]*store.Watermark{}
	switch {
	case status == http.StatusNotFound && errorType(resp) == "index_not_found_exception":
		return out, nil
	case status != http.StatusOK:
		return nil, fmt.Errorf("load watermarks: %w", responseError("POST", path, status, resp))
	}
	for i, d := range gjson.GetBytes(resp, "docs").Array() {
		if i >= len(pairs) || !d.Get("found").Bool() {
			continue
		}
		w, err := parseWatermark(d.Get("_source").Raw)
		if err != nil {
			return nil, err
		}
		out[pairs[i]] = &w
	}
	return out, nil
}

// SaveWatermarks writes watermarks, replacing the stored ones of their pairs.
func (s *Store) SaveWatermarks(ctx context.Context, ws []store.Watermark) error {
	ops := make([]*op, len(ws))
	for i, w := range ws {
		doc, err := watermarkDocument(w)
		if err != nil {
			return err
		}
		ops[i] = &op{action: actionIndex, index: s.stateIndex, id: w.Pair().ID(), doc: doc}
		if w.Position > 0 {
			// The stored watermark of a higher position stays (a 409 below): one written by an
			// indexer that lost the pair's partition in a rebalance, still storing what it had
			// read, would otherwise replace what the partition's new owner stored since, for good
			// (a pair shown listing forever). The factor keeps every position above the internal
			// versions of documents written before positions were kept (a few writes per event).
			ops[i].versioned, ops[i].version = true, (w.Position+1)*watermarkVersionFactor
		}
	}
	if len(ops) == 0 {
		return nil
	}
	results, err := s.bulk(ctx, ops)
	if err != nil {
		return fmt.Errorf("store %d watermarks: %w", len(ws), err)
	}
	for i, r := range results {
		switch classify(ops[i].action, r) {
		case outcomeDone:
		case outcomeConflict:
			if ops[i].versioned {
				continue // a watermark of a later position is stored: it accounts for more
			}
			fallthrough
		default:
			return fmt.Errorf("store %d watermarks: %s %s/%s: status %d: %s: %s", len(ws), ops[i].action, ops[i].index, ops[i].id, r.status, r.errType, r.reason)
		}
	}
	return nil
}

// watermarkVersionFactor spaces the versions of watermark documents by stream position (see
// SaveWatermarks).
const watermarkVersionFactor = 16

// DeleteWatermarks deletes the stored watermarks of pairs that are gone. An error that is
// store.ErrRejected will not pass on a retry.
func (s *Store) DeleteWatermarks(ctx context.Context, pairs []store.Pair) error {
	ops := make([]*op, len(pairs))
	for i, p := range pairs {
		ops[i] = &op{action: actionDelete, index: s.stateIndex, id: p.ID()}
	}
	if err := s.stateBulk(ctx, ops); err != nil {
		return final(fmt.Errorf("delete %d watermarks: %w", len(pairs), err))
	}
	return nil
}

// SelectionWatermarks reads the stored watermarks of the pairs of sel's (cluster, group, kind),
// whatever its namespace: those a PURGE of sel changes. Watermarks stored just before (by another
// replica, before a rebalance) are searchable only after a refresh, and one missed would outlive its
// pair: the state index is refreshed first. An error that is store.ErrRejected will not pass on a
// retry.
func (s *Store) SelectionWatermarks(ctx context.Context, sel store.Selection) ([]store.Watermark, error) {
	if err := s.refresh(ctx, s.stateIndex); err != nil {
		return nil, final(fmt.Errorf("read the watermarks of a selection: %w", err))
	}
	q := map[string]any{
		"size": 1000,
		"query": map[string]any{"bool": map[string]any{"filter": []any{
			term("cluster", sel.Cluster), term("group", sel.Group), term("kind", sel.Kind),
		}}},
	}
	resp, err := s.search(ctx, "/"+url.PathEscape(s.stateIndex)+"/_search", url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}, q)
	if err != nil {
		return nil, final(fmt.Errorf("read the watermarks of a selection: %w", err))
	}
	var out []store.Watermark
	for _, h := range gjson.GetBytes(resp, "hits.hits").Array() {
		w, err := parseWatermark(h.Get("_source").Raw)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// watermarkDocument is the stored form: the store.Watermark plus a sortable key.
func watermarkDocument(w store.Watermark) ([]byte, error) {
	doc := struct {
		Key string `json:"key"`
		store.Watermark
	}{w.Pair().ID(), w}
	return json.Marshal(doc)
}

func parseWatermark(source string) (store.Watermark, error) {
	var w store.Watermark
	if err := json.Unmarshal([]byte(source), &w); err != nil {
		return w, fmt.Errorf("watermark document: %w", err)
	}
	return w, nil
}

// stateBulk writes documents of the state index in one _bulk request; every item must succeed.
func (s *Store) stateBulk(ctx context.Context, ops []*op) error {
	if len(ops) == 0 {
		return nil
	}
	results, err := s.bulk(ctx, ops)
	if err != nil {
		return err
	}
	for i, r := range results {
		if classify(ops[i].action, r) != outcomeDone {
			return fmt.Errorf("%s %s/%s: status %d: %s: %s", ops[i].action, ops[i].index, ops[i].id, r.status, r.errType, r.reason)
		}
	}
	return nil
}
