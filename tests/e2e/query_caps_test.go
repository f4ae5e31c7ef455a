//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// fuzzyWords are the words of the fuzzy corpus' names: six letters, so a fuzzy match allows two
// edits, and each has 70 spellings one edit away in the corpus (see seedFuzzyCorpus). A fuzzy match
// of one of them then rewrites to the most terms it may (max_expansions, 50), each a clause.
var fuzzyWords = func() []string {
	out := make([]string, 25)
	for i := range out {
		out[i] = "zq" + string(rune('a'+i)) + "xyz"
	}
	return out
}()

// seedFuzzyCorpus indexes, into an index of the template of prefix, 70 ConfigMaps whose names hold
// every fuzzy word, each respelt: document j replaces the last or the fifth letter of every word by
// its j-th alternative.
func seedFuzzyCorpus(t *testing.T, env *testbed.Env, prefix string) {
	t.Helper()
	const alternatives = "abcdefghijklmnopqrstuvwxy0123456789" // 35, none the letter replaced last
	var body bytes.Buffer
	index := mappings.IndexName(prefix, "ConfigMap")
	for j := range 2 * len(alternatives) {
		words := make([]string, len(fuzzyWords))
		for i, w := range fuzzyWords {
			if j < len(alternatives) {
				words[i] = w[:5] + alternatives[j:j+1]
			} else {
				words[i] = w[:4] + alternatives[j-len(alternatives):j-len(alternatives)+1] + w[5:]
			}
		}
		name, uid := strings.Join(words, "-"), fmt.Sprintf("00000000-0000-4000-caps-%012d", j)
		obj, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "caps", "uid": uid, "resourceVersion": strconv.Itoa(j + 1),
				"labels": map[string]string{"k0": "a"}, "creationTimestamp": "2026-11-01T10:00:00Z"},
			"data": map[string]string{"k0": "x"}})
		doc, err := document.Build(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: "member1",
			Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "caps", Name: name, UID: uid,
			ResourceVersion: strconv.Itoa(j + 1), Epoch: 1, ObservedAt: time.Now().UTC(), Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&body, "{\"index\":{\"_index\":%q,\"_id\":%q}}\n%s\n", index, uid, doc)
	}
	if resp := mustHTTP(t, "POST", env.OpenSearchURL+"/_bulk?refresh=true", body.String()); gjson.GetBytes(resp, "errors").Bool() {
		t.Fatalf("bulk: %.500s", resp)
	}
}

// capsIndices installs the template of a new prefix, then the fuzzy corpus and, with emptyPods, an
// index of no documents beside it; both are deleted after the test.
func capsIndices(t *testing.T, env *testbed.Env, emptyPods bool) string {
	t.Helper()
	prefix := templatePrefix(t, env, "caps")
	seedFuzzyCorpus(t, env, prefix)
	if emptyPods {
		mustHTTP(t, "PUT", env.OpenSearchURL+"/"+mappings.IndexName(prefix, "Pod"), "")
	}
	return prefix
}

// largestQuery is a search at every size limit of query.Parse, each part in its most expensive form
// for OpenSearch: resources of a named group, in requirements, field requirements for a missing
// value, distinct words, fuzzy words that each rewrite to 50 terms.
func largestQuery() url.Values {
	list := func(n int, sep, format string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(format, i)
		}
		return strings.Join(parts, sep)
	}
	return url.Values{
		query.ParamResources:     {list(query.MaxResources-1, ",", "r%d.example.com") + ",configmaps"},
		query.ParamClusters:      {"member1,member2"},
		query.ParamNamespaces:    {"caps,other"},
		query.ParamNamePrefix:    {"zq"},
		query.ParamFuzzyName:     {strings.Join(fuzzyWords[:query.MaxFuzzyNameWords], "-")},
		query.ParamLabelSelector: {list(query.MaxRequirements, ",", "k%d in (a,b)")},
		query.ParamFieldSelector: {list(query.MaxRequirements, ",", "data.k%d=")},
		query.ParamText:          {list(query.MaxTextWords, " ", "w%d")},
		query.ParamOwner:         {"ReplicaSet/web"},
		query.ParamCreatedSince:  {"36500d"},
		query.ParamCreatedBefore: {"1h"},
		query.ParamChangedSince:  {"36500d"},
		query.ParamFacets:        {"cluster,namespace,resource,labels"},
	}
}

// TestQueryCapsOnOpenSearch: input past a size limit is a 400 naming the parameter (it used to reach
// OpenSearch, whose too_many_clauses came back as a 503 clients retry), the largest query the limits
// let through runs on OpenSearch, and what OpenSearch refuses as too large is a rejection (400) for
// the store, never an unavailable backend.
func TestQueryCapsOnOpenSearch(t *testing.T) {
	env := testbed.Get(t)
	prefix := capsIndices(t, env, true)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "queryapi", "queryapi", "--anonymous", "--listen", addr, "--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix)
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", 2*time.Minute)

	t.Run("input past a limit is a 400 naming the parameter", func(t *testing.T) {
		for _, tc := range []struct {
			param, value, contains string
		}{
			// 12,000 requirements in 48 KB: too_many_clauses when it reached OpenSearch.
			{query.ParamLabelSelector, strings.TrimSuffix(strings.Repeat("a=b,", 12000), ","), "12000 requirements; at most 50"},
			// 25 fuzzy words of 50 expansions each: too_many_nested_clauses from the shards holding
			// documents, an answer from the others, so a 503 "some shards failed".
			{query.ParamFuzzyName, strings.Join(fuzzyWords, "-"), "25 words; at most 5"},
		} {
			a := get(t, base, queryapi.PathSearch, url.Values{tc.param: {tc.value}})
			if a.code != http.StatusBadRequest || a.status.Details == nil || len(a.status.Details.Causes) != 1 ||
				a.status.Details.Causes[0].Field != tc.param || !strings.Contains(a.status.Details.Causes[0].Message, tc.contains) {
				t.Errorf("%s of %d bytes: %d %s; want 400 with one cause for %s containing %q", tc.param, len(tc.value), a.code, a.raw, tc.param, tc.contains)
			}
		}
	})

	t.Run("the largest accepted query runs on OpenSearch", func(t *testing.T) {
		v := largestQuery()
		// Each fuzzy word has 70 spellings in the index and rewrites to the 50 closest (a clause
		// each), so some documents are left out: the expansion is at its largest. OpenSearch counts
		// clauses when it rewrites the query, whether the rest of it matches or not.
		probe := url.Values{query.ParamFuzzyName: v[query.ParamFuzzyName]}
		if a := get(t, base, queryapi.PathSearch, probe); a.code != http.StatusOK || a.result.Total == 0 || a.result.Total >= 70 {
			t.Fatalf("fuzzyName alone: %d, total %d; want 200 and some of the 70 documents: %.500s", a.code, a.result.Total, a.raw)
		}
		for _, extra := range []url.Values{nil, {query.ParamNames: {"a,b"}}} { // names skip the count
			for k, vs := range extra {
				v[k] = vs
			}
			if a := get(t, base, queryapi.PathSearch, v); a.code != http.StatusOK {
				t.Errorf("largest query (%d bytes): %d %s", len(v.Encode()), a.code, a.raw)
			}
		}
	})

	t.Run("what OpenSearch refuses is rejected, not unavailable", func(t *testing.T) {
		// Past the parser, so OpenSearch answers: partly (the empty index has nothing to rewrite
		// the fuzzy query on), and as a whole with a 500 when every index refuses it.
		labels := make([]query.Requirement, 12000)
		for i := range labels {
			labels[i] = query.Requirement{Key: "a", Op: query.Equals, Values: []string{"b"}}
		}
		for _, p := range []struct{ name, prefix string }{{"some shards refuse", prefix}, {"every shard refuses", capsIndices(t, env, false)}} {
			backend, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: p.prefix},
				TokenKey: []byte("0123456789abcdef")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { backend.Close() })
			for name, q := range map[string]*query.Query{
				"12,000 label requirements": {Labels: labels, Limit: 10, Now: time.Now()},
				"25 fuzzy words":            {FuzzyName: strings.Join(fuzzyWords, "-"), Limit: 10, Now: time.Now()},
			} {
				if _, err := backend.Search(t.Context(), q); !errors.Is(err, store.ErrRejected) || errors.Is(err, store.ErrUnavailable) {
					t.Errorf("%s, %s: %v; want ErrRejected", p.name, name, err)
				}
			}
		}
	})
}
