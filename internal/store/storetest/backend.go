package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Backend is the storage contract every store backend keeps: the indexer's writes, garbage
// collection and watermarks, and the query API's searches, counts and watermarks. *osstore.Store
// has this method set (plus Setup and Close, which the caller uses).
type Backend interface {
	Write(ctx context.Context, ops []store.Op) ([]store.Failure, error)
	DeleteOlder(ctx context.Context, scope store.ListScope, epoch int64, report store.GoneFunc) (int64, error)
	DeleteAll(ctx context.Context, sel store.Selection, report store.GoneFunc) (int64, error)
	Refresh(ctx context.Context, kinds ...string) error

	LoadWatermarks(ctx context.Context, pairs []store.Pair) (map[store.Pair]*store.Watermark, error)
	SaveWatermarks(ctx context.Context, ws []store.Watermark) error
	SelectionWatermarks(ctx context.Context, sel store.Selection) ([]store.Watermark, error)
	DeleteWatermarks(ctx context.Context, pairs []store.Pair) error

	Search(ctx context.Context, q *query.Query) (*store.Result, error)
	Release(ctx context.Context, continueToken string)
	Counts(ctx context.Context, scope *query.Scope) ([]store.Count, error)
	Watermarks(ctx context.Context) ([]store.Watermark, error)
}

// KeepAlive is the snapshot keep-alive every backend under test must be made with: the expired
// token case waits it out, and the paging cases finish each walk well within it.
const KeepAlive = 4 * time.Second

// Limits are the bounds every backend under test must be made with (store.Limits): small, so
// the snapshot case reaches them in a few searches.
var Limits = store.Limits{SnapshotsPerSubject: 3, Snapshots: 8}

// errClass names the store error class of err, as callers (queryapi, indexer) tell them apart:
// backends are compared by class, never by message.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrExpired):
		return "ErrExpired"
	case errors.Is(err, store.ErrBadToken):
		return "ErrBadToken"
	case errors.Is(err, store.ErrRejected):
		return "ErrRejected"
	case errors.Is(err, store.ErrUnavailable):
		return "ErrUnavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context"
	}
	return "unclassified"
}
