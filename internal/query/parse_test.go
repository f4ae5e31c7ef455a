package query

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseRejectsBadInputNamingTheParameter(t *testing.T) {
	cases := []struct{ raw, param, contains string }{
		{"labelselector=app%3Dweb", "labelselector", "unknown parameter"},
		{"resources=Pods!", "resources", "not a resource name"},
		{"resources=pods.", "resources", "not an API group"},
		{"resources=pods,,services", "resources", "empty entry"},
		{"labelSelector=app%3D%3D%3Dweb", "labelSelector", ""},
		{"labelSelector=replicas>3", "labelSelector", "not supported"},
		{"labelSelector=-bad-key-%3Dx", "labelSelector", ""},
		{"labelSelector=a%3Db&labelSelector=c", "labelSelector", "given 2 times"},
		{"fieldSelector=status.phase", "fieldSelector", ""},
		{"fieldSelector=metadata..name%3Dx", "fieldSelector", "empty segment"},
		{"owner=ReplicaSet/", "owner", "Kind/name"},
		{"createdSince=yesterday", "createdSince", "RFC 3339"},
		{"changedSince=-1h", "changedSince", "RFC 3339"},
		{"sort=size", "sort", "unknown sort field; known: cluster, namespace, kind, name, status, creationTimestamp, lastChangedAt"},
		{"sort=name:up", "sort", "asc or desc"},
		{"sort=name,name:desc", "sort", "given twice"},
		// A kind's own columns: one resource, a built-in one, a column of its Table.
		{"sort=columns.restarts", "sort", "give exactly one in resources (e.g. resources=pods&sort=columns.restarts), not 0"},
		{"resources=pods,deployments.apps&sort=columns.ready", "sort", "give exactly one in resources"},
		{"resources=pods&sort=columns.size", "sort", `pods has no column "size"; known: ready, restarts, ip, node, nominated-node, readiness-gates`},
		{"resources=pods&sort=columns.status", "sort", `pods has no column "status"`},
		{"resources=widgets.example.com&sort=columns.ready", "sort", "widgets.example.com has no sortable columns"},
		{"resources=deployments.batch&sort=columns.ready", "sort", "no sortable columns"},
		{"resources=serviceaccounts&sort=columns.secrets", "sort", "no columns besides NAME and AGE"},
		{"resources=pods&sort=columns.restarts,columns.restarts:desc", "sort", "given twice"},
		{"resources=pods&sort=columns.:desc", "sort", "unknown sort field"},
		{"limit=0", "limit", "from 1 to 1000"},
		{"limit=1001", "limit", "from 1 to 1000"},
		{"limit=ten", "limit", "integer"},
		{"facets=owner", "facets", "unknown facet"},
		{"facets=label:", "facets", ""},
		{"facetSize=0", "facetSize", "from 1"},
		{"metadataOnly=maybe", "metadataOnly", "true or false"},
		{"q=" + strings.Repeat("x", 2000), "q", "longer than"},
	}
	for _, c := range cases {
		t.Run(c.raw[:min(len(c.raw), 40)], func(t *testing.T) {
			v, err := url.ParseQuery(c.raw)
			if err != nil {
				t.Fatal(err)
			}
			q, err := Parse(v, now)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse(%q) = %+v, %v; want Errors", c.raw, q, err)
			}
			if len(errs) != 1 || errs[0].Param != c.param || !strings.Contains(errs[0].Message, c.contains) {
				t.Fatalf("Parse(%q) errors %q; want one for %s containing %q", c.raw, errs.Error(), c.param, c.contains)
			}
		})
	}
}

func TestParseReportsEveryBadParameter(t *testing.T) {
	v, _ := url.ParseQuery("limit=0&sort=size&labelSelector=a%3D%3D%3Db&resources=Pods!")
	_, err := Parse(v, now)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 4 {
		t.Fatalf("got %v; want four errors", err)
	}
}

func TestParseGoodInput(t *testing.T) {
	v, _ := url.ParseQuery("resources=pods,deployments.apps,services.core&names=a,b&names=c&labelSelector=app.kubernetes.io/name+in+(web,api)&fieldSelector=metadata.annotations.example.com/a%3Db,status.phase!%3DRunning&changedSince=90m&createdBefore=2026-11-01T10:00:00%2B01:00&sort=creationTimestamp:desc&limit=1000&facets=label:app.kubernetes.io/name,cluster&metadataOnly=1")
	q, err := Parse(v, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{{Resource: "pods", AnyGroup: true}, {Resource: "deployments", Group: "apps"}, {Resource: "services"}}
	if len(q.Resources) != 3 || q.Resources[0] != want[0] || q.Resources[1] != want[1] || q.Resources[2] != want[2] {
		t.Errorf("resources %+v", q.Resources)
	}
	if strings.Join(q.Names, ",") != "a,b,c" {
		t.Errorf("names %v", q.Names)
	}
	if len(q.Labels) != 1 || q.Labels[0].Op != In || strings.Join(q.Labels[0].Values, ",") != "api,web" {
		t.Errorf("labels %+v", q.Labels)
	}
	if len(q.Fields) != 2 || q.Fields[0].Key != "metadata.annotations.example.com/a" || q.Fields[1].Op != NotEquals {
		t.Errorf("fields %+v", q.Fields)
	}
	if got := q.ChangedSince.Resolve(now); !got.Equal(now.Add(-90 * time.Minute)) {
		t.Errorf("changedSince %v", got)
	}
	if got := q.CreatedBefore.Resolve(now); !got.Equal(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("createdBefore %v", got)
	}
	if len(q.Sort) != 1 || !q.Sort[0].Desc || q.Limit != 1000 || !q.MetadataOnly {
		t.Errorf("sort %+v limit %d metadataOnly %v", q.Sort, q.Limit, q.MetadataOnly)
	}
	if len(q.Facets) != 2 || q.Facets[0].Name() != "label:app.kubernetes.io/name" || q.Facets[0].Size != DefaultFacetSize {
		t.Errorf("facets %+v", q.Facets)
	}
}

// The search page sorts its KIND column by sort=kind (issue 28)
func TestParseSortByKind(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []Sort
	}{
		{"sort=kind", []Sort{{Field: SortKind}}},
		{"sort=kind:desc,name", []Sort{{Field: SortKind, Desc: true}, {Field: SortName}}},
		{"sort=cluster,kind:asc", []Sort{{Field: SortCluster}, {Field: SortKind}}},
		// and its STATUS column by sort=status.
		{"sort=status", []Sort{{Field: SortStatus}}},
		{"sort=status:desc,name", []Sort{{Field: SortStatus, Desc: true}, {Field: SortName}}},
		// and a kind's own columns by sort=columns.<id>, with that one resource.
		{"resources=pods&sort=columns.restarts:desc", []Sort{{Field: "columns.restarts", Desc: true}}},
		{"resources=pods.core&sort=columns.node,columns.ready", []Sort{{Field: "columns.node"}, {Field: "columns.ready"}}},
		{"resources=deployments&sort=columns.up-to-date,name", []Sort{{Field: "columns.up-to-date"}, {Field: SortName}}},
		{"resources=services.core&sort=columns.cluster-ip:asc", []Sort{{Field: "columns.cluster-ip"}}},
		{"resources=events.events.k8s.io&sort=columns.last-seen", []Sort{{Field: "columns.last-seen"}}},
	} {
		v, err := url.ParseQuery(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(v, now)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.raw, err)
		}
		if !slices.Equal(q.Sort, c.want) {
			t.Errorf("Parse(%q) sort %+v; want %+v", c.raw, q.Sort, c.want)
		}
	}
}

func TestFingerprintIgnoresPageShape(t *testing.T) {
	a, _ := Parse(url.Values{"labelSelector": {"app=web"}, "limit": {"5"}, "changedSince": {"1h"}}, now)
	b, _ := Parse(url.Values{"labelSelector": {"app=web"}, "limit": {"50"}, "continue": {"x"}, "changedSince": {"1h"}}, now.Add(time.Minute))
	c, _ := Parse(url.Values{"labelSelector": {"app=api"}}, now)
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("limit, continue or the time of a relative bound changed the fingerprint")
	}
	if a.Fingerprint() == c.Fingerprint() {
		t.Error("different selectors share a fingerprint")
	}
}

// repeat joins n results of f with sep.
func repeat(n int, sep string, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, sep)
}

// TestParseBoundsQuerySize: input past a size limit is a 400 naming the parameter, never a query a
// backend refuses as too large (which a client would see as an unavailable backend and retry).
func TestParseBoundsQuerySize(t *testing.T) {
	labelReqs := func(n int) string { return repeat(n, ",", func(i int) string { return fmt.Sprintf("k%d=v", i) }) }
	fieldReqs := func(n int) string { return repeat(n, ",", func(i int) string { return fmt.Sprintf("data.k%d=v", i) }) }
	inValues := func(n int) string {
		return "env in (" + repeat(n, ",", func(i int) string { return fmt.Sprintf("v%d", i) }) + ")"
	}
	resources := func(n int) string {
		return repeat(n, ",", func(i int) string { return fmt.Sprintf("r%d.example.com", i) })
	}
	text := func(n int) string { return repeat(n, " ", func(i int) string { return fmt.Sprintf("w%d", i) }) }
	names := func(n int) string { return repeat(n, "-", func(i int) string { return fmt.Sprintf("n%d", i) }) }
	long := "k=" + strings.Repeat("v", 63) + ","
	tooLong := strings.Repeat(long, MaxSelectorLength/len(long)+1)

	for _, c := range []struct {
		name, param, value, contains string
	}{
		// A 60 KB selector of 12,000 requirements made OpenSearch answer too_many_clauses.
		{"12,000 label requirements", ParamLabelSelector, repeat(12000, ",", func(int) string { return "a=b" }), "12000 requirements; at most 50"},
		{"label requirements", ParamLabelSelector, labelReqs(MaxRequirements + 1), "51 requirements; at most 50"},
		{"values of one in", ParamLabelSelector, inValues(MaxListValues + 1), `"env in (...)": 1001 values; at most 1000`},
		{"label selector length", ParamLabelSelector, tooLong, "longer than 65536 bytes"},
		{"field requirements", ParamFieldSelector, fieldReqs(MaxRequirements + 1), "51 requirements; at most 50"},
		{"field selector length", ParamFieldSelector, tooLong, "longer than 65536 bytes"},
		{"resources", ParamResources, resources(MaxResources + 1), "101 values; at most 100"},
		{"names", ParamNames, repeat(MaxListValues+1, ",", func(i int) string { return fmt.Sprint("n", i) }), "1001 values; at most 1000"},
		{"words of q", ParamText, text(MaxTextWords + 1), "65 words; at most 64"},
		{"words of fuzzyName", ParamFuzzyName, names(MaxFuzzyNameWords + 1), "6 words; at most 5"},
		// Contained in nearly every name: the wildcard *e* reads every name of every index.
		{"a fuzzyName of one character", ParamFuzzyName, "e", "at least 3 characters"},
		{"a fuzzyName of two characters and spaces", ParamFuzzyName, " d b ", "at least 3 characters"},
	} {
		t.Run("rejects "+c.name, func(t *testing.T) {
			_, err := Parse(url.Values{c.param: {c.value}}, now)
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Param != c.param || !strings.Contains(errs[0].Message, c.contains) {
				t.Fatalf("Parse(%s=<%d bytes>) = %v; want one error for %s containing %q", c.param, len(c.value), err, c.param, c.contains)
			}
		})
	}

	t.Run("accepts a fuzzyName of three characters", func(t *testing.T) {
		if q, err := Parse(url.Values{ParamFuzzyName: {"api"}}, now); err != nil || q.FuzzyName != "api" || !q.Costly() {
			t.Fatalf("Parse(fuzzyName=api) = %+v, %v", q, err)
		}
	})

	t.Run("accepts every limit at once", func(t *testing.T) {
		sel := labelReqs(MaxRequirements-1) + "," + inValues(MaxListValues)
		v := url.Values{
			ParamResources: {resources(MaxResources)}, ParamLabelSelector: {sel},
			ParamFieldSelector: {fieldReqs(MaxRequirements)}, ParamText: {text(MaxTextWords)},
			ParamFuzzyName: {names(MaxFuzzyNameWords)},
			ParamNames:     {repeat(MaxListValues, ",", func(i int) string { return fmt.Sprint("n", i) })},
		}
		q, err := Parse(v, now)
		if err != nil {
			t.Fatal(err)
		}
		in := slices.IndexFunc(q.Labels, func(r Requirement) bool { return r.Op == In })
		if len(q.Resources) != MaxResources || len(q.Labels) != MaxRequirements || len(q.Fields) != MaxRequirements ||
			in < 0 || len(q.Labels[in].Values) != MaxListValues || len(q.Names) != MaxListValues {
			t.Errorf("resources %d, labels %d, fields %d, names %d", len(q.Resources), len(q.Labels), len(q.Fields), len(q.Names))
		}
	})
}

func TestWords(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{
		{"", 0},
		{"  ,;- ", 0},
		{"nginx", 1},
		{"nginx-7d9f8c6b5-x2x4z", 3},
		{"envoy 1.31", 3},     // the tokenizer keeps 1.31 whole: an upper bound
		{"app_kubernetes", 2}, // likewise a_b
		{"café crème", 2},     // precomposed
		{"cafe\u0301", 1},     // a combining accent continues the word
		{"Größe", 1},
		{"中文字", 3},     // one word per ideograph
		{"ひらがな", 4},    // and per Hiragana character
		{"カタカナ", 1},    // Katakana runs are words
		{"aカタ", 2},     // a script change starts a word
		{"ภาษาไทย", 1}, // Thai has no spaces: the run is kept
		{"🚀🚀", 2},
		{strings.Repeat("a", 255), 1},
		{strings.Repeat("a", 256), 2}, // the standard tokenizer cuts words at 255
	} {
		if got := words(c.s); got != c.want {
			t.Errorf("words(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// Each facet is an aggregation of up to MaxFacetSize buckets: a query asks for at most MaxFacets.
func TestParseBoundsFacets(t *testing.T) {
	var keys []string
	for i := range MaxFacets + 1 {
		keys = append(keys, fmt.Sprintf("label:k%d", i))
	}
	_, err := Parse(url.Values{ParamFacets: {strings.Join(keys, ",")}}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "facets:") {
		t.Fatalf("%d facets: %v; want an error naming facets", len(keys), err)
	}
	if _, err := Parse(url.Values{ParamFacets: {strings.Join(keys[:MaxFacets], ",")}}, time.Now()); err != nil {
		t.Fatalf("%d facets: %v", MaxFacets, err)
	}
}

// A column sort on a resource that is not a resource name leaves the complaint to resources,
// which quotes it: the sort's error printed it raw, a line break or a bidi override in an error
// message the page and the logs show.
func TestParseColumnSortOfABadResource(t *testing.T) {
	for _, raw := range []string{"resources=a%0Ab&sort=columns.ready", "resources=%E2%80%AEpods&sort=columns.ready",
		"resources=pods.%0A&sort=columns.ready", "resources=pods.ex%E2%80%AEample&sort=columns.ready"} {
		v, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(v, now)
		errs := paramErrors(t, err)
		if len(errs) == 0 {
			t.Fatalf("%s: no error", raw)
		}
		for _, e := range errs {
			if e.Param != ParamResources {
				t.Errorf("%s: error %q on %s, want only the resources error", raw, e.Message, e.Param)
			}
		}
	}
}
