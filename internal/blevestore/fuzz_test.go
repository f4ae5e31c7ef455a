package blevestore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/pagetoken"
	"github.com/kubesearch/kubesearch/internal/store"
)

// FuzzToken: a continue token decodes to exactly the state it was issued with (one whose offset
// is past the first page; others are refused); the same token changed anywhere (a byte replaced,
// inserted or removed), or read with another data folder's key, or any string the fuzzer makes
// up, is store.ErrBadToken — never a panic, never a page of another state.
// Run longer with: go test -fuzz FuzzToken ./internal/blevestore/
func FuzzToken(f *testing.F) {
	for _, seed := range []struct {
		q, snap            string
		offset             int
		now, total, expire int64
		pos                uint16
		b, op              byte
	}{
		{"3f2a9c0e5b7d41e8a6c2f0b9d4e1a7c3", "snap-1795971034922744000-7", 100, 1795971034922744000, 10432, 1795971334922744000, 17, 'A', 0},
		{"fingerprint", "", 1, 1, 10000, 2, 400, '.', 1},
		{"", "", 0, 0, 0, 0, 0, 0, 2},
		{"q", "s", -5, -1, -1, -1, 65535, '\n', 1},
		{"q\xff", "s", 1 << 40, 0, 0, 0, 3, 0xff, 0},
	} {
		f.Add(seed.q, seed.snap, seed.offset, seed.now, seed.total, seed.expire, seed.pos, seed.b, seed.op)
	}
	codec := tokenCodec{pagetoken.New(testKey)}
	other := tokenCodec{pagetoken.New([]byte("another-data-folder-key"))}
	f.Fuzz(func(t *testing.T, q, snap string, offset int, now, total, expire int64, pos uint16, b, op byte) {
		if _, err := codec.decode(q); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("decode(%q) = %v; want ErrBadToken for a string this store never issued", q, err)
		}
		want := token{Query: strings.ToValidUTF8(q, "\uFFFD"), Snapshot: strings.ToValidUTF8(snap, "\uFFFD"),
			Offset: offset, Now: now, Total: total, Expires: expire}
		s, err := codec.encode(want)
		if err != nil {
			t.Fatalf("encode(%+v): %v", want, err)
		}
		got, err := codec.decode(s)
		if offset <= 0 {
			// No page starts at or before the first item: such a token was never issued.
			if !errors.Is(err, store.ErrBadToken) {
				t.Fatalf("decode of a token at offset %d = %+v, %v; want ErrBadToken", offset, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if want.V = tokenVersion; !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(encode(%+v)) = %+v", want, got)
		}
		if _, err := other.decode(s); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("another data folder's key: decode = %v; want ErrBadToken", err)
		}
	})
}
