package pagetoken

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/kubesearch/kubesearch/internal/store"
)

type state struct {
	Q string `json:"q"`
	N int64  `json:"n"`
}

// FuzzCodec: a token decodes to exactly the state it was issued with; the same token changed
// anywhere (a byte replaced, inserted or removed: a line break in the signature too), read with
// another key, or any string the fuzzer makes up, is store.ErrBadToken.
// Run longer with: go test -fuzz FuzzCodec ./internal/pagetoken/
func FuzzCodec(f *testing.F) {
	f.Add("3f2a9c0e5b7d41e8a6c2f0b9d4e1a7c3", int64(1795971034922744000), uint16(17), byte('A'), byte(0))
	f.Add("", int64(0), uint16(400), byte('\n'), byte(1))
	f.Add("q\xff", int64(-1), uint16(65535), byte(0xff), byte(2))
	codec, other := New([]byte("fuzz-installation-key-0123456789")), New([]byte("another-installation-key"))
	f.Fuzz(func(t *testing.T, q string, n int64, pos uint16, b, op byte) {
		var got state
		if err := codec.Decode(q, &got); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("Decode(%q) = %v; want ErrBadToken for a string never issued", q, err)
		}
		want := state{Q: q, N: n}
		s, err := codec.Encode(want)
		if err != nil {
			t.Fatal(err)
		}
		got = state{}
		if err := codec.Decode(s, &got); err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", want, err)
		}
		// encoding/json writes invalid UTF-8 as U+FFFD: the string is compared when valid.
		if got.N != want.N || (utf8.ValidString(q) && got.Q != q) {
			t.Fatalf("Decode(Encode(%+v)) = %+v", want, got)
		}
		if err := other.Decode(s, &got); !errors.Is(err, store.ErrBadToken) {
			t.Fatalf("another key: %v; want ErrBadToken", err)
		}
		changed := tamper(s, int(pos), b, op)
		if changed == s {
			return
		}
		if err := codec.Decode(changed, &got); !errors.Is(err, store.ErrBadToken) {
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
