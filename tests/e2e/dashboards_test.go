//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestDashboardsQueriesOnOpenSearch runs every visualization and saved search of
// dashboards/kubesearch.ndjson, as OpenSearch Dashboards would, against a small fleet indexed in the
// test bed's OpenSearch under a prefix of its own (the index pattern's kubernetes-* becomes
// <prefix>-kubernetes-*). A visualization is its visState aggregations (terms, histograms, metrics)
// under the KQL query of its search source (and of the saved search it is built on) and the time
// range its dashboard restores, sent as a size-0 _search; a saved search is its query sorted as it
// says. Every visualization must return buckets, each terms bucket the document count (and metric)
// the indexed documents give, and every saved search as many hits as the documents matching it.
//
// Only the KQL the objects use is translated (field:value, field:(a or b), ranges, exists, and/or/
// not); anything else (Lucene, filters, wildcards, free text) fails the test, to be taught here.
func TestDashboardsQueriesOnOpenSearch(t *testing.T) {
	env := testbed.Get(t)
	ctx := t.Context()
	objects := dashReadObjects(t)

	// templatePrefix removes the template and every index of the prefix (the state index included)
	// when the test ends.
	prefix := templatePrefix(t, env, "dashboards")
	st, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Setup(ctx, store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	events := dashFleet(now)
	ops := make([]store.Op, len(events))
	docs := make([]map[string]any, len(events))
	kinds := map[string]bool{}
	for i, ev := range events {
		doc, err := document.Build(ev)
		if err != nil {
			t.Fatalf("%s %s/%s: %v", ev.Kind, ev.Namespace, ev.Name, err)
		}
		if err := json.Unmarshal(doc, &docs[i]); err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
		ops[i] = store.Op{Kind: ev.Kind, UID: ev.UID, Doc: doc, Epoch: ev.Epoch, Versioned: true, Version: rv}
		kinds[ev.Kind] = true
	}
	if fails, err := st.Write(ctx, ops); err != nil || len(fails) > 0 {
		t.Fatalf("write the corpus: %v %v", err, fails)
	}
	if err := st.Refresh(ctx, slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	})...); err != nil {
		t.Fatal(err)
	}

	checked := map[string]int{}
	for _, obj := range objects.list {
		switch obj.Type {
		case "visualization":
			t.Run("visualization/"+obj.ID, func(t *testing.T) {
				dashCheckVisualization(t, env, prefix, objects, obj, docs, now)
			})
		case "search":
			t.Run("search/"+obj.ID, func(t *testing.T) {
				dashCheckSearch(t, env, prefix, objects, obj, docs, now)
			})
		default:
			continue
		}
		checked[obj.Type]++
	}
	if checked["visualization"] == 0 || checked["search"] == 0 {
		t.Errorf("checked %v: want visualizations and saved searches", checked)
	}
}

// dashFleet is a small fleet as collectors would publish it: three clusters of three namespaces,
// Pods in every phase (some with a sidecar, some restarting, Pending ones without container
// statuses), a Deployment and two ConfigMaps per namespace. Each object changed a second before the
// next, so the saved searches' sort by lastChangedAt has something to order.
func dashFleet(now time.Time) []*envelope.Event {
	clusters := []string{"east", "west", "edge"}
	namespaces := []string{"shop", "payments", "kube-system"}
	phases := []string{"Running", "Running", "Pending", "Running", "Failed", "Succeeded", "Running"}
	var events []*envelope.Event
	add := func(cluster, group, resource, kind, ns, name string, obj map[string]any) {
		n := len(events)
		uid := fmt.Sprintf("00000000-0000-4000-dashb-%012d", n)
		rv := strconv.Itoa(1000 + n)
		apiVersion := "v1"
		if group != "" {
			apiVersion = group + "/v1"
		}
		obj["apiVersion"], obj["kind"] = apiVersion, kind
		obj["metadata"] = map[string]any{"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv,
			"creationTimestamp": now.Add(-time.Hour).Format(time.RFC3339), "labels": map[string]any{"app": name}}
		raw, _ := json.Marshal(obj)
		events = append(events, &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cluster, Group: group,
			Version: "v1", Resource: resource, Kind: kind, Namespace: ns, Name: name, UID: uid, ResourceVersion: rv,
			Epoch: 1, ObservedAt: now, ChangedAt: now.Add(-time.Duration(n+1) * time.Second), Object: raw})
	}
	for ci, cluster := range clusters {
		for ni, ns := range namespaces {
			app := fmt.Sprintf("registry.example.com/%s/api:1.%d", ns, ci)
			if ns == "kube-system" {
				app = "registry.k8s.io/coredns/coredns:v1.12.0"
			}
			sidecar := ns != "kube-system"
			containers := []any{map[string]any{"name": "app", "image": app}}
			if sidecar {
				containers = append(containers, map[string]any{"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.1"})
			}
			for i := range 4 + ci + ni {
				phase := phases[(ci+ni+i)%len(phases)]
				status := map[string]any{"phase": phase}
				spec := map[string]any{"containers": containers}
				if phase != "Pending" {
					spec["nodeName"] = fmt.Sprintf("%s-node-%d", cluster, i%2)
					restarts := map[string]int{"Running": i % 3, "Failed": 5}[phase]
					statuses := []any{map[string]any{"name": "app", "image": app, "restartCount": restarts, "ready": phase == "Running"}}
					if sidecar {
						statuses = append(statuses, map[string]any{"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.1",
							"restartCount": i % 2, "ready": phase == "Running"})
					}
					status["containerStatuses"] = statuses
					status["podIP"] = fmt.Sprintf("10.%d.%d.%d", ci, ni, i+1)
				}
				add(cluster, "", "pods", "Pod", ns, fmt.Sprintf("api-%d", i), map[string]any{"spec": spec, "status": status})
			}
			add(cluster, "apps", "deployments", "Deployment", ns, "api", map[string]any{
				"spec":   map[string]any{"replicas": 2, "template": map[string]any{"spec": map[string]any{"containers": containers}}},
				"status": map[string]any{"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1},
			})
			for _, name := range []string{"settings", "kube-root-ca.crt"} {
				add(cluster, "", "configmaps", "ConfigMap", ns, name, map[string]any{"data": map[string]any{"key": "value"}})
			}
		}
	}
	return events
}

// dashObject is one saved object of the ndjson file, with what the test reads of it.
type dashObject struct {
	Type       string `json:"type"`
	ID         string `json:"id"`
	Attributes struct {
		Title              string     `json:"title"`
		TimeFieldName      string     `json:"timeFieldName"`
		VisState           string     `json:"visState"`
		SavedSearchRefName string     `json:"savedSearchRefName"`
		Columns            []string   `json:"columns"`
		Sort               [][]string `json:"sort"`
		TimeRestore        bool       `json:"timeRestore"`
		TimeFrom           string     `json:"timeFrom"`
		TimeTo             string     `json:"timeTo"`
		Meta               struct {
			SearchSourceJSON string `json:"searchSourceJSON"`
		} `json:"kibanaSavedObjectMeta"`
	} `json:"attributes"`
	References []dashRef `json:"references"`
}

type dashRef struct {
	Name string `json:"name"`
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (o *dashObject) ref(name string) string {
	for _, r := range o.References {
		if r.Name == name {
			return r.ID
		}
	}
	return ""
}

type dashSearchSource struct {
	Query struct {
		Query    any    `json:"query"`
		Language string `json:"language"`
	} `json:"query"`
	Filter       []json.RawMessage `json:"filter"`
	IndexRefName string            `json:"indexRefName"`
}

type dashObjects struct {
	list []*dashObject
	byID map[string]*dashObject
}

func dashReadObjects(t *testing.T) *dashObjects {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbed.Root(), "dashboards", "kubesearch.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	objs := &dashObjects{byID: map[string]*dashObject{}}
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		o := &dashObject{}
		if err := json.Unmarshal([]byte(line), o); err != nil {
			t.Fatalf("dashboards/kubesearch.ndjson: %v", err)
		}
		objs.list = append(objs.list, o)
		objs.byID[o.Type+"/"+o.ID] = o
	}
	return objs
}

// dashQuery is what Dashboards sends for a visualization or saved search: the index, the query (its
// DSL and the same predicate over documents) and the saved search it builds on.
type dashQuery struct {
	index   string
	dsl     map[string]any
	matches func(doc map[string]any) bool
}

// dashResolve builds the query of a visualization or saved search: the KQL of its search source and
// of the saved search it is built on, and the time range of the dashboard showing it, on the index
// pattern it references with kubernetes-* replaced by the test's prefix.
func dashResolve(t *testing.T, prefix string, objs *dashObjects, obj *dashObject, now time.Time) dashQuery {
	t.Helper()
	var filters []map[string]any
	var preds []func(map[string]any) bool
	var pattern *dashObject
	for o := obj; o != nil; {
		var ss dashSearchSource
		if src := o.Attributes.Meta.SearchSourceJSON; src != "" {
			if err := json.Unmarshal([]byte(src), &ss); err != nil {
				t.Fatalf("%s %s: searchSourceJSON: %v", o.Type, o.ID, err)
			}
		}
		if len(ss.Filter) > 0 {
			t.Fatalf("%s %s: filters are not translated by this test yet: %s", o.Type, o.ID, ss.Filter[0])
		}
		text, _ := ss.Query.Query.(string)
		if ss.Query.Query != nil && (ss.Query.Language != "kuery" || ss.Query.Query != any(text)) {
			t.Fatalf("%s %s: query %v in %q: only KQL is translated by this test", o.Type, o.ID, ss.Query.Query, ss.Query.Language)
		}
		node, err := kqlParse(text)
		if err != nil {
			t.Fatalf("%s %s: KQL %q: %v", o.Type, o.ID, text, err)
		}
		filters, preds = append(filters, node.dsl()), append(preds, node.match)
		if ss.IndexRefName != "" && pattern == nil {
			pattern = objs.byID["index-pattern/"+o.ref(ss.IndexRefName)]
			if pattern == nil {
				t.Fatalf("%s %s: index pattern reference %q resolves to no object", o.Type, o.ID, ss.IndexRefName)
			}
		}
		next := o.Attributes.SavedSearchRefName
		if next == "" {
			break
		}
		if o = objs.byID["search/"+o.ref(next)]; o == nil {
			t.Fatalf("%s %s: saved search reference %q resolves to no object", obj.Type, obj.ID, next)
		}
	}
	if pattern == nil {
		t.Fatalf("%s %s: no index pattern", obj.Type, obj.ID)
	}
	rest, ok := strings.CutPrefix(pattern.Attributes.Title, "kubernetes-")
	if !ok {
		t.Fatalf("index pattern %s: title %q does not start with kubernetes-", pattern.ID, pattern.Attributes.Title)
	}
	// The time range of the first dashboard that shows the object and restores its time.
	for _, d := range objs.list {
		if d.Type != "dashboard" || !d.Attributes.TimeRestore || pattern.Attributes.TimeFieldName == "" ||
			!slices.ContainsFunc(d.References, func(r dashRef) bool { return r.Type == obj.Type && r.ID == obj.ID }) {
			continue
		}
		from, errFrom := dashDateMath(d.Attributes.TimeFrom, now)
		to, errTo := dashDateMath(d.Attributes.TimeTo, now)
		if errFrom != nil || errTo != nil {
			t.Fatalf("dashboard %s: time range %q..%q: %v %v", d.ID, d.Attributes.TimeFrom, d.Attributes.TimeTo, errFrom, errTo)
		}
		field := pattern.Attributes.TimeFieldName
		filters = append(filters, map[string]any{"range": map[string]any{field: map[string]any{
			"gte": d.Attributes.TimeFrom, "lte": d.Attributes.TimeTo, "format": "strict_date_optional_time"}}})
		preds = append(preds, func(doc map[string]any) bool {
			s, _ := doc[field].(string)
			at, err := time.Parse(time.RFC3339Nano, s)
			return err == nil && !at.Before(from) && !at.After(to)
		})
		break
	}
	return dashQuery{
		index: mappings.IndexBase(prefix) + rest,
		dsl:   map[string]any{"bool": map[string]any{"filter": filters}},
		matches: func(doc map[string]any) bool {
			for _, p := range preds {
				if !p(doc) {
					return false
				}
			}
			return true
		},
	}
}

// dashDateMath reads the date math of a dashboard's time range that the test knows: "now",
// "now-<n><unit>" and absolute RFC 3339 times. Years and months are taken as 365 and 30 days: the
// corpus is minutes old, far from either edge.
func dashDateMath(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if rest, ok := strings.CutPrefix(s, "now-"); ok && len(rest) > 1 {
		n, err := strconv.Atoi(rest[:len(rest)-1])
		unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour,
			'w': 7 * 24 * time.Hour, 'M': 30 * 24 * time.Hour, 'y': 365 * 24 * time.Hour}[rest[len(rest)-1]]
		if err == nil && unit > 0 {
			return now.Add(-time.Duration(n) * unit), nil
		}
	}
	return time.Parse(time.RFC3339Nano, s)
}

// visAgg is one aggregation of a visualization's visState.
type visAgg struct {
	ID      string         `json:"id"`
	Enabled *bool          `json:"enabled"`
	Type    string         `json:"type"`
	Schema  string         `json:"schema"`
	Params  map[string]any `json:"params"`
}

func (a visAgg) field() string { s, _ := a.Params["field"].(string); return s }

func (a visAgg) number(key string, def float64) float64 {
	if v, ok := a.Params[key].(float64); ok {
		return v
	}
	return def
}

func dashCheckVisualization(t *testing.T, env *testbed.Env, prefix string, objs *dashObjects, obj *dashObject, docs []map[string]any, now time.Time) {
	var vis struct {
		Type string   `json:"type"`
		Aggs []visAgg `json:"aggs"`
	}
	if err := json.Unmarshal([]byte(obj.Attributes.VisState), &vis); err != nil {
		t.Fatalf("visState: %v", err)
	}
	var metrics, buckets []visAgg
	for _, a := range vis.Aggs {
		switch {
		case a.Enabled != nil && !*a.Enabled:
		case a.Schema == "metric":
			metrics = append(metrics, a)
		default:
			buckets = append(buckets, a)
		}
	}
	if len(buckets) == 0 {
		t.Fatalf("%s visualization without a bucket aggregation: nothing to check buckets of", vis.Type)
	}
	q := dashResolve(t, prefix, objs, obj, now)
	var matching []map[string]any
	for _, d := range docs {
		if q.matches(d) {
			matching = append(matching, d)
		}
	}
	if len(matching) == 0 {
		t.Fatal("no document of the corpus matches the visualization's query: extend the corpus")
	}
	body := map[string]any{"size": 0, "track_total_hits": true, "query": q.dsl, "aggs": dashAggsDSL(t, buckets, metrics)}
	var resp struct {
		Hits struct {
			Total struct{ Value int } `json:"total"`
		} `json:"hits"`
		Aggregations map[string]any `json:"aggregations"`
	}
	if err := json.Unmarshal(mustHTTP(t, "POST", env.OpenSearchURL+"/"+q.index+"/_search", mustJSON(t, body)), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Hits.Total.Value != len(matching) {
		t.Errorf("query matches %d documents, the corpus %d (body %s)", resp.Hits.Total.Value, len(matching), mustJSON(t, body))
	}
	n := dashCheckBuckets(t, obj.Attributes.Title, buckets, metrics, resp.Aggregations, matching)
	t.Logf("%s (%s): %d documents, %d buckets at %d levels", obj.Attributes.Title, vis.Type, len(matching), n, len(buckets))
}

// dashAggsDSL nests the bucket aggregations in their order, each level carrying the metrics (which
// a terms order may refer to by id), as Dashboards builds the request.
func dashAggsDSL(t *testing.T, buckets, metrics []visAgg) map[string]any {
	t.Helper()
	metricAggs := map[string]any{}
	for _, m := range metrics {
		switch m.Type {
		case "count":
		case "sum", "avg", "min", "max", "cardinality":
			if m.field() == "" {
				t.Fatalf("%s metric %s without a field", m.Type, m.ID)
			}
			metricAggs[m.ID] = map[string]any{m.Type: map[string]any{"field": m.field()}}
		default:
			t.Fatalf("metric aggregation %q is not translated by this test yet", m.Type)
		}
	}
	var sub map[string]any
	for i := len(buckets) - 1; i >= 0; i-- {
		b := buckets[i]
		var agg map[string]any
		switch b.Type {
		case "terms":
			dir, _ := b.Params["order"].(string)
			if dir == "" {
				dir = "desc"
			}
			agg = map[string]any{"terms": map[string]any{"field": b.field(), "size": int(b.number("size", 5)),
				"order": map[string]any{dashOrderKey(b, metrics): dir}}}
		case "date_histogram":
			interval, _ := b.Params["interval"].(string)
			h := map[string]any{"field": b.field(), "min_doc_count": 1}
			switch {
			case interval == "" || interval == "auto":
				h["fixed_interval"] = "1h"
			case len(interval) == 1:
				h["calendar_interval"] = "1" + interval
			default:
				h["fixed_interval"] = interval
			}
			agg = map[string]any{"date_histogram": h}
		case "histogram":
			agg = map[string]any{"histogram": map[string]any{"field": b.field(), "interval": b.number("interval", 1), "min_doc_count": 1}}
		default:
			t.Fatalf("bucket aggregation %q is not translated by this test yet", b.Type)
		}
		if b.field() == "" {
			t.Fatalf("%s aggregation %s without a field", b.Type, b.ID)
		}
		children := map[string]any{}
		for id, m := range metricAggs {
			children[id] = m
		}
		for id, s := range sub {
			children[id] = s
		}
		if len(children) > 0 {
			agg["aggs"] = children
		}
		sub = map[string]any{b.ID: agg}
	}
	return sub
}

// dashOrderKey is a terms aggregation's order: by key, by count, or by the metric it names.
func dashOrderKey(b visAgg, metrics []visAgg) string {
	by, _ := b.Params["orderBy"].(string)
	if by == "_key" {
		return "_key"
	}
	for _, m := range metrics {
		if m.ID == by && m.Type != "count" {
			return m.ID
		}
	}
	return "_count"
}

// dashCheckBuckets checks one level of buckets against the documents under it and returns how many
// buckets it saw at this level and below. Terms buckets are compared key by key (document count,
// metrics, order); histogram buckets must together hold every document with the field.
func dashCheckBuckets(t *testing.T, path string, buckets, metrics []visAgg, aggs map[string]any, docs []map[string]any) int {
	t.Helper()
	b := buckets[0]
	node, _ := aggs[b.ID].(map[string]any)
	list, _ := node["buckets"].([]any)
	path += " > " + b.Type + "(" + b.field() + ")"
	if len(list) == 0 {
		t.Errorf("%s: no buckets over %d documents", path, len(docs))
		return 0
	}
	seen := len(list)
	if b.Type != "terms" {
		withField, total := 0, 0
		for _, d := range docs {
			if len(dashValues(d, b.field())) > 0 {
				withField++
			}
		}
		for _, raw := range list {
			c, _ := raw.(map[string]any)["doc_count"].(float64)
			total += int(c)
		}
		if total != withField {
			t.Errorf("%s: buckets hold %d documents, %d have the field", path, total, withField)
		}
		return seen
	}
	groups := map[string][]map[string]any{}
	for _, d := range docs {
		for _, v := range dashValues(d, b.field()) {
			groups[v] = append(groups[v], d)
		}
	}
	if want := min(int(b.number("size", 5)), len(groups)); len(list) != want {
		t.Errorf("%s: %d buckets, want %d (values %v)", path, len(list), want, slices.Sorted(func(yield func(string) bool) {
			for k := range groups {
				if !yield(k) {
					return
				}
			}
		}))
	}
	order := dashOrderKey(b, metrics)
	desc := b.Params["order"] != "asc"
	var prev *float64
	for _, raw := range list {
		bucket, _ := raw.(map[string]any)
		key, ok := bucket["key_as_string"].(string)
		if !ok {
			key = dashString(bucket["key"])
		}
		group, ok := groups[key]
		if !ok {
			t.Errorf("%s: bucket %q is no value of the corpus", path, key)
			continue
		}
		if c, _ := bucket["doc_count"].(float64); int(c) != len(group) {
			t.Errorf("%s = %q: %v documents, the corpus has %d", path, key, c, len(group))
		}
		for _, m := range metrics {
			if m.Type == "count" {
				continue
			}
			got, _ := bucket[m.ID].(map[string]any)["value"].(float64)
			if want := dashMetric(m, group); math.Abs(got-want) > 1e-9 {
				t.Errorf("%s = %q: %s(%s) %v, the corpus gives %v", path, key, m.Type, m.field(), got, want)
			}
		}
		var v float64
		switch order {
		case "_key":
		case "_count":
			v = float64(len(group))
		default:
			v, _ = bucket[order].(map[string]any)["value"].(float64)
		}
		if order != "_key" {
			if prev != nil && ((desc && v > *prev) || (!desc && v < *prev)) {
				t.Errorf("%s = %q: out of order by %s", path, key, order)
			}
			prev = &v
		}
		if len(buckets) > 1 {
			seen += dashCheckBuckets(t, path+" = "+key, buckets[1:], metrics, bucket, group)
		}
	}
	return seen
}

// dashMetric computes a metric over documents as OpenSearch does over every value of the field.
func dashMetric(m visAgg, docs []map[string]any) float64 {
	var nums []float64
	distinct := map[string]bool{}
	for _, d := range docs {
		for _, v := range dashValues(d, m.field()) {
			distinct[v] = true
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				nums = append(nums, f)
			}
		}
	}
	var sum float64
	for _, n := range nums {
		sum += n
	}
	switch m.Type {
	case "sum":
		return sum
	case "avg":
		return sum / float64(len(nums))
	case "min":
		return slices.Min(nums)
	case "max":
		return slices.Max(nums)
	case "cardinality":
		return float64(len(distinct))
	}
	return math.NaN()
}

// dashValues are the distinct values of a top-level document field, as strings.
func dashValues(doc map[string]any, field string) []string {
	var out []string
	add := func(v any) {
		if v == nil {
			return
		}
		if s := dashString(v); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if list, ok := doc[field].([]any); ok {
		for _, v := range list {
			add(v)
		}
	} else {
		add(doc[field])
	}
	return out
}

func dashString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}

func dashCheckSearch(t *testing.T, env *testbed.Env, prefix string, objs *dashObjects, obj *dashObject, docs []map[string]any, now time.Time) {
	q := dashResolve(t, prefix, objs, obj, now)
	want := 0
	for _, d := range docs {
		if q.matches(d) {
			want++
		}
	}
	if want == 0 {
		t.Fatal("no document of the corpus matches the saved search: extend the corpus")
	}
	var sort []any
	for _, s := range obj.Attributes.Sort {
		if len(s) != 2 {
			t.Fatalf("sort %v: want [field, direction]", s)
		}
		sort = append(sort, map[string]any{s[0]: map[string]any{"order": s[1]}})
	}
	body := map[string]any{"size": want, "track_total_hits": true, "query": q.dsl, "sort": sort}
	var resp struct {
		Hits struct {
			Total struct{ Value int } `json:"total"`
			Hits  []dashHit           `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(mustHTTP(t, "POST", env.OpenSearchURL+"/"+q.index+"/_search", mustJSON(t, body)), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Hits.Total.Value != want || len(resp.Hits.Hits) != want {
		t.Errorf("%d hits (%d returned), the corpus has %d matching (body %s)", resp.Hits.Total.Value, len(resp.Hits.Hits), want, mustJSON(t, body))
	}
	// The first sort key orders the hits as the saved search says.
	if len(obj.Attributes.Sort) > 0 {
		desc := obj.Attributes.Sort[0][1] == "desc"
		for i := 1; i < len(resp.Hits.Hits); i++ {
			a, _ := resp.Hits.Hits[i-1].Sort[0].(float64)
			b, _ := resp.Hits.Hits[i].Sort[0].(float64)
			if (desc && b > a) || (!desc && b < a) {
				t.Errorf("hit %d out of order by %v", i, obj.Attributes.Sort[0])
				break
			}
		}
	}
	// Every column shows a value in some hit.
	for _, c := range obj.Attributes.Columns {
		if !slices.ContainsFunc(resp.Hits.Hits, func(h dashHit) bool { return h.Source[c] != nil }) {
			t.Errorf("column %s: empty in every hit", c)
		}
	}
	t.Logf("%s: %d hits", obj.Attributes.Title, resp.Hits.Total.Value)
}

type dashHit struct {
	Source map[string]any `json:"_source"`
	Sort   []any          `json:"sort"`
}

// kqlNode is a parsed KQL expression: the DSL Dashboards sends for it, and the same predicate over
// a document.
type kqlNode interface {
	dsl() map[string]any
	match(doc map[string]any) bool
}

type (
	kqlAll    struct{}
	kqlAnd    []kqlNode
	kqlOr     []kqlNode
	kqlNot    struct{ n kqlNode }
	kqlExists struct{ field string }
	kqlMatch  struct {
		field, value string
		phrase       bool
	}
	kqlRange struct {
		field, op string
		value     float64
	}
)

func (kqlAll) dsl() map[string]any       { return map[string]any{"match_all": map[string]any{}} }
func (kqlAll) match(map[string]any) bool { return true }
func (n kqlNot) dsl() map[string]any {
	return map[string]any{"bool": map[string]any{"must_not": []any{n.n.dsl()}}}
}
func (n kqlNot) match(d map[string]any) bool { return !n.n.match(d) }
func (n kqlExists) dsl() map[string]any {
	return map[string]any{"exists": map[string]any{"field": n.field}}
}
func (n kqlExists) match(d map[string]any) bool { return len(dashValues(d, n.field)) > 0 }

func (n kqlAnd) dsl() map[string]any {
	var fs []any
	for _, c := range n {
		fs = append(fs, c.dsl())
	}
	return map[string]any{"bool": map[string]any{"filter": fs}}
}

func (n kqlAnd) match(d map[string]any) bool {
	for _, c := range n {
		if !c.match(d) {
			return false
		}
	}
	return true
}

func (n kqlOr) dsl() map[string]any {
	var fs []any
	for _, c := range n {
		fs = append(fs, c.dsl())
	}
	return map[string]any{"bool": map[string]any{"should": fs, "minimum_should_match": 1}}
}

func (n kqlOr) match(d map[string]any) bool {
	for _, c := range n {
		if c.match(d) {
			return true
		}
	}
	return false
}

func (n kqlMatch) dsl() map[string]any {
	if n.phrase {
		return map[string]any{"match_phrase": map[string]any{n.field: n.value}}
	}
	return map[string]any{"match": map[string]any{n.field: n.value}}
}

// match compares exactly: the fields the objects query are keywords, numbers and booleans.
func (n kqlMatch) match(d map[string]any) bool {
	return slices.Contains(dashValues(d, n.field), n.value)
}

func (n kqlRange) dsl() map[string]any {
	op := map[string]string{">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}[n.op]
	return map[string]any{"range": map[string]any{n.field: map[string]any{op: n.value}}}
}

func (n kqlRange) match(d map[string]any) bool {
	for _, s := range dashValues(d, n.field) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			continue
		}
		if (n.op == ">" && v > n.value) || (n.op == ">=" && v >= n.value) || (n.op == "<" && v < n.value) || (n.op == "<=" && v <= n.value) {
			return true
		}
	}
	return false
}

// kqlToken is a word (quoted or bare) or one of ( ) : < <= > >=.
type kqlToken struct {
	text   string
	quoted bool
	punct  bool
}

type kqlParser struct {
	toks []kqlToken
	pos  int
}

// kqlParse reads the subset of KQL the saved objects use: field:value, field:"phrase", field:*,
// field:(a or b and not c), field > number (and >=, <, <=), and/or/not with parentheses. Free text,
// wildcards in values and nested fields are refused.
func kqlParse(s string) (kqlNode, error) {
	toks, err := kqlTokens(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return kqlAll{}, nil
	}
	p := &kqlParser{toks: toks}
	n, err := p.or("")
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.pos].text)
	}
	return n, nil
}

func kqlTokens(s string) ([]kqlToken, error) {
	var toks []kqlToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case unicode.IsSpace(rune(c)):
			i++
		case c == '(' || c == ')' || c == ':':
			toks = append(toks, kqlToken{text: string(c), punct: true})
			i++
		case c == '<' || c == '>':
			op := string(c)
			if i+1 < len(s) && s[i+1] == '=' {
				op += "="
			}
			toks = append(toks, kqlToken{text: op, punct: true})
			i += len(op)
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("unterminated quote at %d", i)
			}
			toks = append(toks, kqlToken{text: b.String(), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune(`():<>"`, rune(s[j])) {
				j++
			}
			toks = append(toks, kqlToken{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}

func (p *kqlParser) peekWord(w string) bool {
	return p.pos < len(p.toks) && !p.toks[p.pos].punct && !p.toks[p.pos].quoted && strings.EqualFold(p.toks[p.pos].text, w)
}

func (p *kqlParser) peekPunct(s string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].punct && p.toks[p.pos].text == s
}

// or, and, not and primary parse an expression; inside field:( ... ) field names the field its
// values are of.
func (p *kqlParser) or(field string) (kqlNode, error) {
	n, err := p.and(field)
	if err != nil {
		return nil, err
	}
	ns := kqlOr{n}
	for p.peekWord("or") {
		p.pos++
		n, err := p.and(field)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	if len(ns) == 1 {
		return ns[0], nil
	}
	return ns, nil
}

func (p *kqlParser) and(field string) (kqlNode, error) {
	n, err := p.not(field)
	if err != nil {
		return nil, err
	}
	ns := kqlAnd{n}
	for p.peekWord("and") {
		p.pos++
		n, err := p.not(field)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	if len(ns) == 1 {
		return ns[0], nil
	}
	return ns, nil
}

func (p *kqlParser) not(field string) (kqlNode, error) {
	if p.peekWord("not") {
		p.pos++
		n, err := p.not(field)
		if err != nil {
			return nil, err
		}
		return kqlNot{n}, nil
	}
	return p.primary(field)
}

func (p *kqlParser) primary(field string) (kqlNode, error) {
	if p.peekPunct("(") {
		p.pos++
		n, err := p.or(field)
		if err != nil {
			return nil, err
		}
		if !p.peekPunct(")") {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		return n, nil
	}
	if p.pos >= len(p.toks) || p.toks[p.pos].punct {
		return nil, fmt.Errorf("expected a term at token %d", p.pos)
	}
	tok := p.toks[p.pos]
	p.pos++
	if field != "" { // a value of field:( ... )
		return kqlValue(field, tok)
	}
	if tok.quoted || strings.ContainsAny(tok.text, "*.") {
		return nil, fmt.Errorf("field %q: quoted, wildcard and nested field names are not translated", tok.text)
	}
	if p.pos >= len(p.toks) || !p.toks[p.pos].punct {
		return nil, fmt.Errorf("free text %q is not translated", tok.text)
	}
	op := p.toks[p.pos].text
	p.pos++
	switch op {
	case ":":
		if p.peekPunct("(") {
			return p.primary(tok.text)
		}
		if p.pos >= len(p.toks) || p.toks[p.pos].punct {
			return nil, fmt.Errorf("%s: missing value", tok.text)
		}
		p.pos++
		return kqlValue(tok.text, p.toks[p.pos-1])
	case ">", ">=", "<", "<=":
		if p.pos >= len(p.toks) || p.toks[p.pos].punct {
			return nil, fmt.Errorf("%s %s: missing value", tok.text, op)
		}
		v, err := strconv.ParseFloat(p.toks[p.pos].text, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %s %q: only numeric ranges are translated", tok.text, op, p.toks[p.pos].text)
		}
		p.pos++
		return kqlRange{field: tok.text, op: op, value: v}, nil
	}
	return nil, fmt.Errorf("unexpected %q after %s", op, tok.text)
}

func kqlValue(field string, tok kqlToken) (kqlNode, error) {
	switch {
	case tok.quoted:
		return kqlMatch{field: field, value: tok.text, phrase: true}, nil
	case tok.text == "*":
		return kqlExists{field: field}, nil
	case strings.Contains(tok.text, "*"):
		return nil, fmt.Errorf("%s:%s: wildcard values are not translated", field, tok.text)
	}
	return kqlMatch{field: field, value: tok.text}, nil
}
