package osstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// A roll lease keeps replicas of one indexer deployment, started together, from each copying the
// whole index: the replica holding it rolls, the others wait until the alias has moved. It is a
// document "roll:<alias>" in the state index, taken with op_type=create or a compare-and-set on
// _seq_no, renewed while the copy runs, and free for anyone once it was not renewed for leaseTTL
// (the holder crashed). Clocks of the replicas must agree to well within leaseTTL.

// errLeaseLost: another indexer took the roll lease while this one held it (it stalled past leaseTTL).
var errLeaseLost = errors.New("roll lease lost to another indexer")

const (
	leaseTTL   = 20 * time.Second
	leaseRenew = leaseTTL / 4
	leaseWait  = 2 * time.Second // how often a waiting replica looks again
)

// lease is a roll lease held by this indexer.
type lease struct {
	s         *Store
	index, id string
	owner     string
	seqNo     int64
	term      int64
	renewedAt time.Time
	now       func() time.Time
}

type leaseDoc struct {
	Lease struct {
		Owner     string    `json:"owner"`
		Target    string    `json:"target"`
		RenewedAt time.Time `json:"renewedAt"`
	} `json:"lease"`
}

// acquireLease takes the roll lease of alias, or reports its holder when another indexer holds it.
func (s *Store) acquireLease(ctx context.Context, index, alias, target, owner string, now func() time.Time) (*lease, string, error) {
	l := &lease{s: s, index: index, id: "roll:" + alias, owner: owner, now: now}
	path := l.path()
	status, body, err := s.do(ctx, http.MethodGet, request{path: path})
	if err != nil {
		return nil, "", err
	}
	q := url.Values{}
	switch {
	case status == http.StatusNotFound:
		q.Set("op_type", "create")
	case status == http.StatusOK:
		var d leaseDoc
		if err := json.Unmarshal([]byte(gjson.GetBytes(body, "_source").Raw), &d); err != nil {
			return nil, "", fmt.Errorf("roll lease %s: %w", l.id, err)
		}
		if d.Lease.Owner != owner && now().Sub(d.Lease.RenewedAt) < leaseTTL {
			return nil, d.Lease.Owner, nil
		}
		q.Set("if_seq_no", gjson.GetBytes(body, "_seq_no").String())
		q.Set("if_primary_term", gjson.GetBytes(body, "_primary_term").String())
	default:
		return nil, "", responseError("GET", path, status, body)
	}
	taken, err := l.write(ctx, target, q)
	if err != nil || !taken {
		return nil, "another indexer", err
	}
	return l, "", nil
}

// renew extends the lease when a quarter of its time has passed. It fails with errLeaseLost when
// another indexer took it meanwhile (this one stalled past leaseTTL).
func (l *lease) renew(ctx context.Context, target string) error {
	if l.now().Sub(l.renewedAt) < leaseRenew {
		return nil
	}
	q := url.Values{"if_seq_no": {strconv.FormatInt(l.seqNo, 10)}, "if_primary_term": {strconv.FormatInt(l.term, 10)}}
	taken, err := l.write(ctx, target, q)
	if err != nil {
		return err
	}
	if !taken {
		return errLeaseLost
	}
	return nil
}

// release deletes the lease, so nobody waits for it to expire.
func (l *lease) release(ctx context.Context) error {
	path := l.path()
	q := url.Values{"if_seq_no": {strconv.FormatInt(l.seqNo, 10)}, "if_primary_term": {strconv.FormatInt(l.term, 10)}}
	status, body, err := l.s.do(ctx, http.MethodDelete, request{path: path, query: q})
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound && status != http.StatusConflict {
		return responseError("DELETE", path, status, body)
	}
	return nil
}

// write puts the lease document under the conditions in q; false when they no longer hold.
func (l *lease) write(ctx context.Context, target string, q url.Values) (bool, error) {
	var d leaseDoc
	d.Lease.Owner, d.Lease.Target, d.Lease.RenewedAt = l.owner, target, l.now().UTC()
	body, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	path := l.path()
	status, resp, err := l.s.do(ctx, http.MethodPut, request{path: path, query: q, body: body})
	if err != nil {
		return false, err
	}
	switch status {
	case http.StatusOK, http.StatusCreated:
		l.seqNo, l.term = gjson.GetBytes(resp, "_seq_no").Int(), gjson.GetBytes(resp, "_primary_term").Int()
		l.renewedAt = d.Lease.RenewedAt
		return true, nil
	case http.StatusConflict:
		return false, nil
	}
	return false, responseError("PUT", path, status, resp)
}

func (l *lease) path() string { return "/" + url.PathEscape(l.index) + "/_doc/" + url.PathEscape(l.id) }
