package blevestore

import (
	"fmt"

	"github.com/kubesearch/kubesearch/internal/pagetoken"
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

// tokenCodec signs the backend's tokens (package pagetoken) and checks their content.
type tokenCodec struct{ pagetoken.Codec }

func (c tokenCodec) encode(t token) (string, error) {
	t.V = tokenVersion
	return c.Encode(t)
}

func (c tokenCodec) decode(s string) (token, error) {
	var t token
	if err := c.Decode(s, &t); err != nil {
		return token{}, err
	}
	if t.V != tokenVersion || t.Offset <= 0 {
		return token{}, fmt.Errorf("%w: unknown token version or content", store.ErrBadToken)
	}
	return t, nil
}
