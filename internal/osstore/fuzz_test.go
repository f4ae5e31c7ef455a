package osstore

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/pagetoken"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// FuzzParseCompile feeds arbitrary query strings through the parser and the compiler: every input
// either compiles to DSL that encodes as JSON and that OpenSearch's clause limit admits, or is
// rejected with errors that each name a parameter.
// Never a panic. Run longer with: go test -fuzz FuzzParseCompile ./internal/osstore/
func FuzzParseCompile(f *testing.F) {
	for _, seed := range []string{
		"", "resources=pods,deployments.apps&labelSelector=app.kubernetes.io/name%3Dweb",
		"labelSelector=env+in+(a,b),!tier,x!%3Dy&fieldSelector=status.phase!%3DRunning,spec.nodeName%3D",
		"fieldSelector=metadata.annotations.a\\,b%3Dc", "q=nginx:1.25&fuzzyName=ng*x?&namePrefix=web",
		"owner=ReplicaSet/web&createdSince=1h&createdBefore=2026-01-01T00:00:00Z&changedSince=7d",
		"sort=creationTimestamp:desc,name&limit=1000&facets=label:app.kubernetes.io/name,labels&facetSize=5",
		"limit=0&sort=size", "%zz", "labelSelector=%00", "facets=label:%22(.*)%22",
		"resources=pods&sort=columns.restarts:desc,columns.node,name", "sort=columns.", "resources=pods&sort=columns.%E2%80%AEready",
		"resources=pods,deployments.apps&sort=columns.ready", "resources=widgets.example.com&sort=columns.ready",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return // not a query string: the HTTP server never gets this far
		}
		q, err := query.Parse(v, now)
		if err != nil {
			var errs query.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Parse(%q) error %v is not a list of parameter errors", raw, err)
			}
			for _, e := range errs {
				if e.Param == "" || e.Message == "" {
					t.Fatalf("Parse(%q): error without parameter or message: %+v", raw, e)
				}
			}
			return
		}
		body := Compile(q)
		if _, err := json.Marshal(body); err != nil {
			t.Fatalf("Compile(%q) does not encode: %v", raw, err)
		}
		if n := clauses(t, body["query"]); n > maxClauseCount {
			t.Fatalf("Compile(%q) has %d clauses; OpenSearch refuses more than %d", raw, n, maxClauseCount)
		}
	})
}

// FuzzToken: a continue token decodes to exactly the state it was issued with; the same token
// changed anywhere (a byte replaced, inserted or removed), or read with another installation's
// key, or any string the fuzzer makes up, is store.ErrBadToken — never a panic, never a page of
// another state.
// Run longer with: go test -fuzz FuzzToken ./internal/osstore/
func FuzzToken(f *testing.F) {
	for _, seed := range []struct {
		q, pit, after      string
		now, total, expire int64
		lower              bool
		pos                uint16
		b, op              byte
	}{
		{"3f2a9c0e5b7d41e8a6c2f0b9d4e1a7c3", "46ToAwMDaWR5BXV1aWQy", `["member1","shop","web-0","0b5e4c7a"]`,
			1795971034922744000, 10432, 1795971334922744000, false, 17, 'A', 0},
		{"fingerprint", "", `[1795971034922,"uid"]`, 1, 10000, 2, true, 400, '.', 1},
		{"", "", `null`, 0, 0, 0, false, 0, 0, 2},
		{"q", "pit", `{"not":"a list"}`, -1, -1, -1, false, 65535, '\n', 1},
		{"q", "pit", `not json <&>`, 0, 0, 0, false, 3, 0xff, 0},
	} {
		f.Add(seed.q, seed.pit, []byte(seed.after), seed.now, seed.total, seed.expire, seed.lower, seed.pos, seed.b, seed.op)
	}
	codec := tokenCodec{pagetoken.New([]byte("fuzz-installation-key-0123456789"))}
	other := tokenCodec{pagetoken.New([]byte("another-installation-key-0123456"))}
	f.Fuzz(func(t *testing.T, q, pit string, after []byte, now, total, expire int64, lower bool, pos uint16, b, op byte) {
		if _, err := codec.decode(q); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("decode(%q) = %v; want ErrBadToken for a string this store never issued", q, err)
		}
		if !json.Valid(after) {
			after, _ = json.Marshal(string(after))
		}
		want := token{Query: strings.ToValidUTF8(q, "\uFFFD"), PIT: strings.ToValidUTF8(pit, "\uFFFD"),
			After: after, Now: now, Total: total, Lower: lower, Expires: expire}
		s, err := codec.encode(want)
		if err != nil {
			t.Fatalf("encode(%+v): %v", want, err)
		}
		got, err := codec.decode(s)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if !sameToken(t, got, want) {
			t.Fatalf("decode(encode(%+v)) = %+v", want, got)
		}
		if _, err := other.decode(s); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("another installation's key: decode = %v; want ErrBadToken", err)
		}
	})
}

func sameToken(t *testing.T, got, want token) bool {
	t.Helper()
	want.V = tokenVersion
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	return string(g) == string(w)
}

// FuzzScan holds the one-pass walk of scan.go to gjson's reading on any valid JSON: a value ends
// where gjson says, an object has the members gjson sees, in order; and on any input the search
// answer reader returns or fails, never panics.
// Run longer with: go test -fuzz FuzzScan ./internal/osstore/
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `""`, `0`, `-1.5e3`, `true`, `null`, ` { "a" : [ 1 , { "b" : "c\"}" } ] , "d\\" : "\\\\" } `,
		`{"a":"\\\"","b":["]","}"],"c":{"d":{}}}`, `["x",{"y":[[],[{}]]},"\u00e9"]`,
		`{"took":3,"pit_id":"p","hits":{"total":{"value":2,"relation":"eq"},"hits":[{"_id":"u\"1","_source":{"epoch":2,"object":{"kind":"Pod"}},"sort":["a"]},` +
			`{"_source":{"fullObject":{"kind":"Pod","x":"}"},"object":{"kind":"Pod"}},"sort":[1]}]},"aggregations":{"facet0":{"buckets":[]}}}`,
	} {
		f.Add([]byte(seed))
	}
	q, err := query.Parse(url.Values{query.ParamFacets: {"cluster"}}, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = (&Store{}).result(q, b)
		if !gjson.ValidBytes(b) {
			return
		}
		i := skipSpace(b, 0)
		want := gjson.ParseBytes(b)
		// gjson's Raw of a whole document runs to its end, trailing whitespace included.
		if end, raw := skipValue(b, i), strings.TrimRight(want.Raw, " \t\r\n"); end < 0 || string(b[i:end]) != raw {
			t.Fatalf("skipValue(%q) ends at %d, want after %q", b, end, raw)
		}
		if !want.IsObject() {
			return
		}
		var wantMembers, gotMembers []string
		want.ForEach(func(k, v gjson.Result) bool {
			wantMembers = append(wantMembers, k.Raw+"="+v.Raw)
			return true
		})
		end := eachMember(b, i, func(key []byte, v int) int {
			e := skipValue(b, v)
			if e > 0 {
				gotMembers = append(gotMembers, `"`+string(key)+`"=`+string(b[v:e]))
			}
			return e
		})
		if end < 0 || !slices.Equal(gotMembers, wantMembers) {
			t.Fatalf("eachMember(%q) = %q (end %d), want %q", b, gotMembers, end, wantMembers)
		}
	})
}
