package queryapi

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// FuzzContinue: the facade's continue token carries the list's resourceVersion and the store's
// token. What it issues decodes to exactly that, the store's token byte for byte (so a changed
// store token meets the store's signature check, which refuses it); anything else is refused
// with the same message, or — when it is base64url of JSON naming a store token — read as the
// token it says, which issuing again reproduces. The resourceVersion part is not signed: a
// client changing it changes only the resourceVersion its own later pages report.
// Run longer with: go test -fuzz FuzzContinue ./queryapi/
func FuzzContinue(f *testing.F) {
	for _, seed := range []struct{ raw, rv, store string }{
		{"eyJydiI6IjQ4MjEzIiwiYyI6ImFiYy5kZWYifQ", "48213", "eyJ2IjoxLCJxIjoiM2YyYSJ9.c2lnbmF0dXJl"},
		{"eyJydiI6IiIsImMiOiIifQ", "", ""},
		{"not base64!", "eyJtZW1iZXIxIjoiNTAxIn0", "x"},
		{"bnVsbA", "\xff", "\x00"},
		{"eyJjIjp7fX0", "1", `"quoted"`},
	} {
		f.Add(seed.raw, seed.rv, seed.store)
	}
	const refused = "not a continue token this server issued"
	f.Fuzz(func(t *testing.T, raw, rv, storeToken string) {
		if lc, err := decodeContinue(raw); err != nil {
			if err.Error() != refused {
				t.Fatalf("decodeContinue(%q) error %q", raw, err)
			}
		} else {
			if lc.Store == "" {
				t.Fatalf("decodeContinue(%q) accepted a token without the store's", raw)
			}
			again, err := decodeContinue(encodeContinue(lc.RV, lc.Store))
			if err != nil || again != lc {
				t.Fatalf("decodeContinue(%q) = %+v; issued again it decodes to %+v, %v", raw, lc, again, err)
			}
		}
		rv, storeToken = strings.ToValidUTF8(rv, "\uFFFD"), strings.ToValidUTF8(storeToken, "\uFFFD")
		lc, err := decodeContinue(encodeContinue(rv, storeToken))
		switch {
		case storeToken == "":
			if err == nil {
				t.Fatalf("a token without the store's (resourceVersion %q) was accepted", rv)
			}
		case err != nil:
			t.Fatalf("decodeContinue(encodeContinue(%q, %q)): %v", rv, storeToken, err)
		case lc.RV != rv || lc.Store != storeToken:
			t.Fatalf("decodeContinue(encodeContinue(%q, %q)) = %+v", rv, storeToken, lc)
		}
	})
}

// FuzzResourceVersion: a resourceVersion a client sends is, in a one-cluster view, a member's
// resourceVersion (a non-negative integer) and in the fleet views a vector (base64url of JSON
// cluster → resourceVersion). Whatever parses, issued again by encode, parses to the same vector;
// what the server issues parses back to it when every member's version is non-negative, and is
// refused naming the member otherwise; refusals say what a resourceVersion is.
// Run longer with: go test -fuzz FuzzResourceVersion ./queryapi/
func FuzzResourceVersion(f *testing.F) {
	for _, seed := range []struct {
		raw    string
		c1     string
		n1     int64
		c2     string
		n2     int64
		single bool
	}{
		{"eyJtZW1iZXIxIjoiNTAxIiwibWVtYmVyMiI6IjcwMCJ9", "member1", 501, "member2", 700, false},
		{"48213", "member1", 48213, "member1", 0, true},
		{"e30", "", 0, "member3", -1, false},
		{"bnVsbA", "member1", 1, "\xff", 2, false},
		{"eyJtZW1iZXIxIjoxfQ", "a", 9223372036854775807, "b", -9223372036854775808, false},
		{"+7", "member1", 0, "member2", 0, true},
		{"-1", "member1", 0, "member2", 0, true},
		{"eyJtZW1iZXIxIjoiLTEifQ", "member1", 0, "member2", 0, false},
	} {
		f.Add(seed.raw, seed.c1, seed.n1, seed.c2, seed.n2, seed.single)
	}
	f.Fuzz(func(t *testing.T, raw, c1 string, n1 int64, c2 string, n2 int64, single bool) {
		vw := view{}
		if single {
			vw = view{cluster: "member1"}
		}
		if v, err := parseRV(raw, vw); err != nil {
			if !strings.Contains(err.Error(), "resourceVersion") {
				t.Fatalf("parseRV(%q) error %q does not say what a resourceVersion is", raw, err)
			}
		} else {
			for c, n := range v {
				if n < 0 || (single && c != vw.cluster) {
					t.Fatalf("parseRV(%q, %+v) = %v", raw, vw, v)
				}
			}
			if single && len(v) != 1 {
				t.Fatalf("parseRV(%q) in a one-cluster view = %v", raw, v)
			}
			again, err := parseRV(v.encode(vw), vw)
			if err != nil || !maps.Equal(again, v) {
				t.Fatalf("parseRV(%q) = %v; issued again it parses to %v, %v", raw, v, again, err)
			}
		}
		want := rvVector{strings.ToValidUTF8(c1, "\uFFFD"): n1, strings.ToValidUTF8(c2, "\uFFFD"): n2}
		if single {
			want = rvVector{vw.cluster: n1}
		}
		got, err := parseRV(want.encode(vw), vw)
		negative, named := false, false
		for c, n := range want {
			if n < 0 {
				negative = true
				named = named || (err != nil && strings.Contains(err.Error(), c))
			}
		}
		switch {
		case negative:
			if !named {
				t.Fatalf("issued %v: parse = %v, %v; want an error naming the member", want, got, err)
			}
		case err != nil || !maps.Equal(got, want):
			t.Fatalf("issued %v: parses to %v, %v", want, got, err)
		}
	})
}

// FuzzSealedPosition: what a sealed position holds (after its seal is opened, so only this server
// could have written it) never panics the reader, and what reads writes back to what reads the same.
// Run longer with: go test -fuzz FuzzSealedPosition ./queryapi/
func FuzzSealedPosition(f *testing.F) {
	f.Add(sealedPosition{mark: watchcache.Mark{0: 5, 11: 1 << 40}, over: rvVector{"member1": 7}, sum: 42}.marshal())
	f.Add(sealedPosition{mark: watchcache.Mark{}, over: rvVector{}}.marshal())
	f.Add([]byte{1, 1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := unmarshalPosition(b)
		if err != nil {
			return
		}
		for c, rv := range p.over {
			if rv < 0 {
				t.Fatalf("unmarshalPosition(%x): cluster %q at %d", b, c, rv)
			}
		}
		again, err := unmarshalPosition(p.marshal())
		if err != nil || fmt.Sprint(again) != fmt.Sprint(p) {
			t.Fatalf("unmarshalPosition(%x) = %v; written again it reads %v, %v", b, p, again, err)
		}
	})
}
