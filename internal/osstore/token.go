package osstore

import (
	"encoding/json"
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
	// PIT is the snapshot's point-in-time; empty when OpenSearch refused one (pages then read the
	// live index).
	PIT string `json:"pit,omitempty"`
	// Snap names the PIT in the ledger of the process that opened it (store.Snapshots), which
	// counts it against its subject's share.
	Snap string `json:"snap,omitempty"`
	// After holds the sort values of the last item returned.
	After json.RawMessage `json:"after"`
	// Now is the first page's anchor for relative times (Unix nanoseconds).
	Now int64 `json:"now"`
	// Total and Lower are the snapshot's total, computed on the first page.
	Total int64 `json:"total"`
	Lower bool  `json:"lower,omitempty"`
	// Expires is when the PIT's keep-alive runs out (Unix nanoseconds).
	Expires int64 `json:"exp"`
}

// tokenVersion 2: the sort ends with (uid, cluster), one value more than version 1's.
const tokenVersion = 2

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
	if t.V != tokenVersion || len(t.After) == 0 {
		return token{}, fmt.Errorf("%w: unknown token version or content", store.ErrBadToken)
	}
	return t, nil
}
