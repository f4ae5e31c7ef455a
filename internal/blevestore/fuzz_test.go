package blevestore

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

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
	codec := tokenCodec{key: testKey}
	other := tokenCodec{key: []byte("another-data-folder-key")}
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
		if want.V = tokenVersion; got != want {
			t.Fatalf("decode(encode(%+v)) = %+v", want, got)
		}
		if _, err := other.decode(s); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("another data folder's key: decode = %v; want ErrBadToken", err)
		}
		changed := tamper(s, int(pos), b, op)
		if changed == s {
			return
		}
		got, err = codec.decode(changed)
		if err == nil && lenientSignature(s, changed) && got == want {
			return // see lenientSignature
		}
		if !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("changed token %q (of %q) decodes to %+v, %v; want ErrBadToken", changed, s, got, err)
		}
	})
}

// tamper changes s at pos: op 0 replaces the byte there with b, 1 inserts b, 2 removes the byte.
func tamper(s string, pos int, b, op byte) string {
	switch op % 3 {
	case 0:
		i := pos % len(s)
		return s[:i] + string([]byte{b}) + s[i+1:]
	case 1:
		i := pos % (len(s) + 1)
		return s[:i] + string([]byte{b}) + s[i:]
	default:
		i := pos % len(s)
		return s[:i] + s[i+1:]
	}
}

// lenientSignature reports whether changed differs from s only in its signature, in a way
// encoding/base64 decodes to the same bytes: a CR or LF inserted (the decoder skips them), or the
// unused low bits of the last character set (RawURLEncoding is not Strict). The state such a
// token carries is still the signed one, so this is malleability, not forgery. The decoder could
// compare the signature as text (the canonical encoding of the HMAC) and refuse these too.
func lenientSignature(s, changed string) bool {
	p, sig, _ := strings.Cut(s, ".")
	p2, sig2, ok := strings.Cut(changed, ".")
	if !ok || p2 != p {
		return false
	}
	a, err1 := base64.RawURLEncoding.DecodeString(sig)
	b, err2 := base64.RawURLEncoding.DecodeString(sig2)
	return err1 == nil && err2 == nil && string(a) == string(b)
}
