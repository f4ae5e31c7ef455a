package osstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// Garbage collection deletes what a SYNC or PURGE marker says is gone. It does not use
// _delete_by_query: that deletes with internal versioning, which leaves a tombstone at the document's
// version + 1 for index.gc_deletes (60 s). A re-list of the same objects within that minute (a
// selection widened from one namespace to all, removed and added back, a cluster re-added) carries
// the same resourceVersions, and external_gte refuses every unchanged object against that tombstone:
// the objects would stay missing until they change. Instead the matching documents are read (id,
// concrete index, _version) and deleted in _bulk with external_gte at their own _version, so the
// tombstone keeps exactly the version the document had and an equal one is accepted again, while an
// older (replayed) event is still refused.

// DeleteOlder applies a SYNC marker: it deletes the documents of scope from an epoch older than
// epoch, i.e. the objects the list that just completed did not see. Everything written before is
// seen (the index is refreshed first), and what it deletes stops being found (refreshed after). It
// counts the documents deleted; report (nil: nobody) is told each page of them before it is
// deleted. An error that is store.ErrRejected will not pass on a retry; any other error may leave
// documents, and deleting again is harmless.
func (s *Store) DeleteOlder(ctx context.Context, scope store.ListScope, epoch int64, report store.GoneFunc) (int64, error) {
	return s.collect(ctx, scope.Kind, "SYNC", syncFilter(scope, epoch), report)
}

// DeleteOlderEach applies several SYNC markers as DeleteOlder applies one, behind one refresh of
// their indices before and one after, where DeleteOlder refreshes around each: in a fleet's cold
// start every batch holds the markers of many lists, and those refreshes were two fifths of the
// ingest (issue 25: 336 of 841 s). deleted[i] and errs[i] are marker i's; an error may leave
// documents, and deleting again is harmless.
func (s *Store) DeleteOlderEach(ctx context.Context, syncs []store.Sync, report store.GoneFunc) (deleted []int64, errs []error) {
	deleted, errs = make([]int64, len(syncs)), make([]error, len(syncs))
	var indices []string
	for _, sy := range syncs {
		if index := mappings.IndexName(s.index.Prefix, sy.Scope.Kind); !slices.Contains(indices, index) {
			indices = append(indices, index)
		}
	}
	if err := s.refresh(ctx, indices...); err != nil {
		err = final(fmt.Errorf("SYNC garbage collection: refresh %s: %w", strings.Join(indices, ","), err))
		for i := range errs {
			errs[i] = err
		}
		return deleted, errs
	}
	var changed []string
	for i, sy := range syncs {
		index := mappings.IndexName(s.index.Prefix, sy.Scope.Kind)
		n, err := s.deleteFound(ctx, index, syncFilter(sy.Scope, sy.Epoch), reportAs(report, i))
		deleted[i] = n
		if err != nil {
			errs[i] = final(fmt.Errorf("SYNC garbage collection in %s: %w", index, err))
		}
		if n > 0 {
			s.metrics.gcDeleted.WithLabelValues(index, "SYNC").Add(float64(n))
			if !slices.Contains(changed, index) {
				changed = append(changed, index)
			}
		}
	}
	if err := s.refresh(ctx, changed...); err != nil {
		err = final(fmt.Errorf("SYNC garbage collection: refresh %s: %w", strings.Join(changed, ","), err))
		for i, sy := range syncs {
			if errs[i] == nil && slices.Contains(changed, mappings.IndexName(s.index.Prefix, sy.Scope.Kind)) {
				errs[i] = err
			}
		}
	}
	return deleted, errs
}

// DeleteAll applies a PURGE marker: it deletes every document of sel, whatever its epoch, as
// DeleteOlder does.
func (s *Store) DeleteAll(ctx context.Context, sel store.Selection, report store.GoneFunc) (int64, error) {
	return s.collect(ctx, sel.Kind, "PURGE", purgeFilter(sel), report)
}

// reportAs tells report the documents of marker i; nil when nobody is told.
func reportAs(report store.GoneFunc, i int) func(context.Context, []store.Gone) error {
	if report == nil {
		return nil
	}
	return func(ctx context.Context, gone []store.Gone) error { return report(ctx, i, gone) }
}

func (s *Store) collect(ctx context.Context, kind, marker string, filter []any, report store.GoneFunc) (int64, error) {
	index := mappings.IndexName(s.index.Prefix, kind)
	deleted, err := s.deleteMatching(ctx, index, filter, reportAs(report, 0))
	if err != nil {
		return deleted, final(fmt.Errorf("%s garbage collection in %s: %w", marker, index, err))
	}
	s.metrics.gcDeleted.WithLabelValues(index, marker).Add(float64(deleted))
	return deleted, nil
}

// syncFilter is the filter of the documents a SYNC marker deletes: those of its (cluster, resource,
// namespace scope) from an older epoch.
func syncFilter(scope store.ListScope, epoch int64) []any {
	filter := []any{term(document.FieldCluster, scope.Cluster), term(document.FieldGroup, scope.Group), term(document.FieldResource, scope.Resource)}
	if scope.Namespace != "" {
		filter = append(filter, term(document.FieldNamespace, scope.Namespace))
	}
	return append(filter, map[string]any{"range": map[string]any{document.FieldEpoch: map[string]any{"lt": epoch}}})
}

// purgeFilter is the filter of the documents a PURGE marker deletes: every document of (cluster,
// group, kind), or of one namespace of it.
func purgeFilter(sel store.Selection) []any {
	filter := []any{term(document.FieldCluster, sel.Cluster), term(document.FieldGroup, sel.Group), term(document.FieldKind, sel.Kind)}
	if sel.Namespace != "" {
		filter = append(filter, term(document.FieldNamespace, sel.Namespace))
	}
	return filter
}

// gcSearch is one page of the documents matching filter, after the sort values of the last hit of
// the page before (nil for the first): ids, concrete indices and versions only, in (uid, index)
// order — total even when an alias reaches several indices holding the same uid. Every filter fixes
// the cluster, and a document's id is (cluster, uid), so no two hits of one index share a uid.
// withIdentity reads what store.Gone holds of each as well.
func gcSearch(filter []any, size int, after json.RawMessage, withIdentity bool) map[string]any {
	var source any = false
	if withIdentity {
		source = goneSource
	}
	body := map[string]any{
		"size":             size,
		"_source":          source,
		"version":          true,
		"track_total_hits": false,
		"query":            map[string]any{"bool": map[string]any{"filter": filter}},
		"sort":             []any{map[string]any{document.FieldUID: "asc"}, map[string]any{"_index": "asc"}},
	}
	if after != nil {
		body["search_after"] = after
	}
	return body
}

// gcPageSize is how many documents one page of garbage collection reads and deletes.
const gcPageSize = 1000

// goneSource is what a store.Gone is read from: the identity of the object, in both places a
// document may hold it (mappings.StoredObject).
var goneSource = func() []string {
	out := []string{document.FieldCluster, document.FieldResource, document.FieldUID, document.FieldEpoch, document.FieldResourceVersion}
	for _, obj := range []string{mappings.FieldFullObject, mappings.FieldObject} {
		out = append(out, obj+".apiVersion", obj+".kind", obj+".metadata.name", obj+".metadata.namespace", obj+".metadata.uid",
			obj+".metadata.resourceVersion", obj+".metadata.labels", obj+".metadata.creationTimestamp")
	}
	return out
}()

// gone reads a search hit of gcSearch (withIdentity) as a store.Gone.
func gone(h gjson.Result) store.Gone {
	src := h.Get("_source")
	g := store.Gone{Cluster: src.Get(document.FieldCluster).Str, Resource: src.Get(document.FieldResource).Str, UID: src.Get(document.FieldUID).Str,
		Epoch: src.Get(document.FieldEpoch).Int(), ResourceVersion: src.Get(document.FieldResourceVersion).Int()}
	if obj, err := mappings.StoredObject([]byte(src.Raw)); err == nil {
		g.Object = document.Identity(obj)
	}
	return g
}

// deleteMatching deletes the documents of index that match filter (see above for why not
// _delete_by_query). The index is refreshed first, so documents written just before the marker are
// seen by the search, and afterwards, so searches stop seeing what was deleted. A document changed
// meanwhile (409) is skipped. A missing index has nothing to delete. An error means some documents
// may remain; deleting again is harmless.
func (s *Store) deleteMatching(ctx context.Context, index string, filter []any, report func(context.Context, []store.Gone) error) (int64, error) {
	if err := s.refresh(ctx, index); err != nil {
		return 0, err
	}
	deleted, err := s.deleteFound(ctx, index, filter, report)
	if err != nil || deleted == 0 {
		return deleted, err
	}
	return deleted, s.refresh(ctx, index)
}

// deleteFound deletes the documents of index that a search finds matching filter, without the
// refreshes around it (deleteMatching says why they are needed). report, when set, is told each
// page before it is deleted.
func (s *Store) deleteFound(ctx context.Context, index string, filter []any, report func(context.Context, []store.Gone) error) (deleted int64, err error) {
	path := "/" + url.PathEscape(index) + "/_search"
	var after json.RawMessage
	for {
		body, err := json.Marshal(gcSearch(filter, gcPageSize, after, report != nil))
		if err != nil {
			return deleted, err
		}
		status, resp, err := s.do(ctx, http.MethodPost, request{path: path, body: body})
		if err != nil {
			return deleted, err
		}
		switch {
		case status == http.StatusNotFound && errorType(resp) == "index_not_found_exception":
			return deleted, nil
		case status != http.StatusOK:
			return deleted, responseError("POST", path, status, resp)
		}
		// Documents on failed shards, or past a timed-out search, would survive unseen.
		if err := shardFailure(path, resp); err != nil {
			return deleted, err
		}
		if gjson.GetBytes(resp, "timed_out").Bool() {
			return deleted, &requestError{status: 503, err: fmt.Errorf("%w: POST %s: timed out", store.ErrUnavailable, path)}
		}
		hits := gjson.GetBytes(resp, "hits.hits").Array()
		if len(hits) > 0 && report != nil {
			gs := make([]store.Gone, len(hits))
			for i, h := range hits {
				gs[i] = gone(h)
			}
			if err := report(ctx, gs); err != nil {
				return deleted, err
			}
		}
		if len(hits) > 0 {
			n, err := s.deleteVersioned(ctx, hits)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
		if len(hits) < gcPageSize {
			return deleted, nil
		}
		after = json.RawMessage(hits[len(hits)-1].Get("sort").Raw)
	}
}

// deleteVersioned deletes search hits, each at the _version it was read with (external_gte), so the
// tombstone keeps that version. It counts the documents deleted; a 404 (gone already) or 409 (written
// since, so it is newer than the marker) is not an error.
func (s *Store) deleteVersioned(ctx context.Context, hits []gjson.Result) (int64, error) {
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
	status, resp, err := s.do(ctx, http.MethodPost, request{path: "/_bulk", body: body, ndjson: true})
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, responseError("POST", "/_bulk", status, resp)
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
			// Retried as a whole by the marker (429, 5xx, a write block), or refused for good (final).
			return deleted, &requestError{status: r.status, typ: r.errType, err: fmt.Errorf("POST /_bulk: delete: %d %s: %s", r.status, r.errType, r.reason)}
		}
	}
	return deleted, nil
}
