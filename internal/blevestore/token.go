package blevestore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubesearch/kubesearch/internal/store"
)

// token is the state of a paged query between two pages. It travels to the client and back, so it
// is signed: a changed byte makes it invalid, never a different query.
type token struct {
	V int `json:"v"`
	// Query is the query's fingerprint: a token only continues the query that issued it.
	Query string `json:"q"`
	// Snapshot names the held snapshot the pages read; empty when none could be held (pages then
	// read the live index).
	Snapshot string `json:"snap,omitempty"`
	// Offset is the position of the next page's first item in the snapshot's order.
	Offset int `json:"off"`
	// Now is the first page's anchor for relative times (Unix nanoseconds).
	Now int64 `json:"now"`
	// Total is the snapshot's total, counted on the first page.
	Total int64 `json:"total"`
	// Expires is when the snapshot's keep-alive runs out (Unix nanoseconds).
	Expires int64 `json:"exp"`
}

const tokenVersion = 1

type tokenCodec struct{ key []byte }

// encode gives base64url(JSON) "." base64url(HMAC-SHA256).
func (c tokenCodec) encode(t token) (string, error) {
	t.V = tokenVersion
	payload, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(c.sign(p)), nil
}

func (c tokenCodec) sign(payload string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func (c tokenCodec) decode(s string) (token, error) {
	p, sig, ok := strings.Cut(s, ".")
	if !ok {
		return token{}, fmt.Errorf("%w: not a token of this API", store.ErrBadToken)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, c.sign(p)) {
		return token{}, fmt.Errorf("%w: signature does not match (changed, or issued by another installation)", store.ErrBadToken)
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return token{}, fmt.Errorf("%w: %v", store.ErrBadToken, err)
	}
	var t token
	if err := json.Unmarshal(payload, &t); err != nil || t.V != tokenVersion || t.Offset <= 0 {
		return token{}, fmt.Errorf("%w: unknown token version or content", store.ErrBadToken)
	}
	return t, nil
}
