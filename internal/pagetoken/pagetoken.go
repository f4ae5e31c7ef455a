// Package pagetoken is the one codec of continue tokens, shared by the store backends: a page's
// state travels to the client and back as base64url(JSON) "." base64url(HMAC-SHA256 of the first
// part), so a changed byte makes a token invalid, never another query or another page. What the
// state holds, and which states are valid, is each backend's.
package pagetoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubesearch/kubesearch/internal/store"
)

// Codec signs and checks tokens with one key. Replicas that share tokens share the key.
type Codec struct{ key []byte }

// New returns a codec signing with key.
func New(key []byte) Codec { return Codec{key: key} }

// Encode signs state.
func (c Codec) Encode(state any) (string, error) {
	payload, err := json.Marshal(state)
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + c.signature(p), nil
}

func (c Codec) signature(payload string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Decode checks a token's signature and decodes its state into state. Every failure is
// store.ErrBadToken. The signature is compared as text, in constant time, against the one
// canonical encoding: the base64 decoder would accept other spellings of the same bytes (line
// breaks, the unused bits of the last character).
func (c Codec) Decode(s string, state any) error {
	p, sig, ok := strings.Cut(s, ".")
	if !ok {
		return fmt.Errorf("%w: not a token of this API", store.ErrBadToken)
	}
	if !hmac.Equal([]byte(sig), []byte(c.signature(p))) {
		return fmt.Errorf("%w: signature does not match (changed, or issued by another installation)", store.ErrBadToken)
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(p)
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrBadToken, err)
	}
	if err := json.Unmarshal(payload, state); err != nil {
		return fmt.Errorf("%w: unknown token content", store.ErrBadToken)
	}
	return nil
}
