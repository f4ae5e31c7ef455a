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
	// Offset is the position of the next page's first item in the snapshot's order: where a page
	// of a query whose whole order the snapshot holds (query.Query.Drain) starts.
	Offset int `json:"off"`
	// After is the sort position of the last item served: the next page is the top of the matches
	// ranked after it, found without ranking every match (search.go).
	After cursor `json:"after,omitzero"`
	// Now is the first page's anchor for relative times (Unix nanoseconds).
	Now int64 `json:"now"`
	// Total is the snapshot's total, counted on the first page.
	Total int64 `json:"total"`
	// Expires is when the snapshot's keep-alive runs out (Unix nanoseconds).
	Expires int64 `json:"exp"`
}

// tokenVersion 2 added After; a version 1 token (minted before) named a snapshot of the process
// that minted it, gone with it.
const tokenVersion = 2

// cursor is a match's place in its query's order: the sort keys it has, the relevance, and the
// tiebreakers (search.go, ranker.compare). Kind, status and columns came without a new token
// version: a token only continues its own query, and no earlier build took sort=kind, sort=status
// or sort=columns.<id>.
type cursor struct {
	Score        float64 `json:"s,omitzero"`
	Cluster      string  `json:"c,omitzero"`
	Namespace    string  `json:"ns,omitzero"`
	HasNamespace bool    `json:"hns,omitzero"`
	Kind         string  `json:"k,omitzero"`
	HasKind      bool    `json:"hk,omitzero"`
	Name         string  `json:"n,omitzero"`
	Status       string  `json:"st,omitzero"`
	HasStatus    bool    `json:"hst,omitzero"`
	Created      int64   `json:"cr,omitzero"`
	HasCreated   bool    `json:"hcr,omitzero"`
	Changed      int64   `json:"ch,omitzero"`
	HasChanged   bool    `json:"hch,omitzero"`
	UID          string  `json:"u,omitzero"`
	ID           string  `json:"id,omitzero"`
	// Cols and HasCols are the column keys (sort=columns.<id>) by sort key index.
	Cols    []string `json:"cl,omitzero"`
	HasCols []bool   `json:"hcl,omitzero"`
}

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
	if t.V == 1 && t.Offset > 0 {
		// Minted by an earlier build, so by another process: its snapshot went with it, as any
		// snapshot does at a restart.
		return token{}, fmt.Errorf("%w: the token is of an earlier version of this store; start again without continue", store.ErrExpired)
	}
	if t.V != tokenVersion || t.Offset <= 0 {
		return token{}, fmt.Errorf("%w: unknown token version or content", store.ErrBadToken)
	}
	return t, nil
}
