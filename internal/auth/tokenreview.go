package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// errReviewRejected is a token the reviewer answered not authenticated, or for other audiences.
var errReviewRejected = errors.New("auth: token rejected by token review")

// knownFor is how long a token the reviewer accepted stays known after its last accepted review:
// its answer is asked again every TTL, but in the lane of known tokens, never behind a flood of
// tokens nobody has seen (see tokenReviewer).
const knownFor = time.Hour

// tokenReviewer asks a cluster's TokenReview API who a bearer token belongs to, as kube-apiserver's
// webhook token authenticator does, and remembers answers briefly: a client sends the same token
// with every request, and the reviewer is another cluster's apiserver.
//
// A flood of random tokens must not cost the valid ones their logins. Random tokens miss every
// cache, so three things keep them apart:
//   - accepted and rejected answers live in separate caches: rejections cannot evict the tokens in
//     use (with one shared cache, each random token pushed out a valid one, whose next request
//     then waited for a review behind the flood);
//   - a token accepted within knownFor is reviewed in its own lane (its own client, its own rate
//     limit, its own slots), so a valid token whose answer expired never queues behind unknown ones;
//   - unknown tokens get at most maxInFlight reviews at once and as many waiting; past that they
//     are ErrThrottled at once (a 429), holding nothing. Concurrent requests with one token share
//     one review.
type tokenReviewer struct {
	known, unknown authenticationv1client.TokenReviewInterface
	audiences      []string
	timeout        time.Duration
	// ttl and negativeTTL keep accepted and rejected answers: short, so a revoked token stops
	// working within seconds, and a rejected one cannot hammer the reviewer.
	ttl, negativeTTL   time.Duration
	accepted, rejected *reviewCache
	flights            singleflight.Group

	knownSlots, unknownSlots chan struct{}
	// unknownPending counts the reviews of unknown tokens under way or waiting for a slot.
	unknownPending atomic.Int64
	now            func() time.Time
}

func newTokenReviewer(kubeconfig string, o *Options) (*tokenReviewer, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	// client-go's default (5 requests/s) would queue reviews behind each other under load; this
	// bound, per lane, still keeps a flood of random tokens (which no cache absorbs) from swamping
	// the cluster. Each client has its own rate limiter: the known tokens' lane never waits for
	// the unknown ones'.
	cfg.QPS, cfg.Burst = 50, 100
	var lanes [2]authenticationv1client.TokenReviewInterface
	for i := range lanes {
		client, err := authenticationv1client.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err)
		}
		lanes[i] = client.TokenReviews()
	}
	return &tokenReviewer{
		known:        lanes[0],
		unknown:      lanes[1],
		audiences:    o.TokenReviewAudiences,
		timeout:      o.TokenReviewTimeout,
		ttl:          o.TokenReviewCacheTTL,
		negativeTTL:  o.TokenReviewNegativeCacheTTL,
		accepted:     newReviewCache(o.TokenReviewCacheSize),
		rejected:     newReviewCache(o.TokenReviewCacheSize),
		knownSlots:   make(chan struct{}, o.TokenReviewMaxInFlight),
		unknownSlots: make(chan struct{}, o.TokenReviewMaxInFlight),
		now:          time.Now,
	}, nil
}

// review returns the token's user; errReviewRejected if the reviewer says no; an error wrapping
// ErrUnavailable if it could not be asked (which is not cached: the next request asks again);
// ErrThrottled if the token is unknown and either too many unknown tokens are under review or
// knownOnly is set.
func (t *tokenReviewer) review(ctx context.Context, token string, knownOnly bool) (User, error) {
	key := sha256.Sum256([]byte(token))
	now := t.now()
	if _, ok := t.rejected.get(key, now); ok {
		return User{}, errReviewRejected
	}
	e, known := t.accepted.get(key, now)
	switch {
	case known && now.Before(e.fresh):
		return e.user, nil
	case !known && knownOnly:
		return User{}, fmt.Errorf("%w: an unknown token from a source that failed too often", ErrThrottled)
	}
	// The flight is keyed by the hash: the token itself is held only by the request asking.
	v, err, _ := t.flights.Do(string(key[:]), func() (any, error) {
		// One review for every request waiting on it: the first request leaving does not end it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
		defer cancel()
		return t.ask(ctx, token, key, known)
	})
	if err != nil {
		return User{}, err
	}
	return v.(User), nil
}

// ask reviews a token in its lane and caches the answer.
func (t *tokenReviewer) ask(ctx context.Context, token string, key [sha256.Size]byte, known bool) (User, error) {
	client, slots := t.known, t.knownSlots
	if !known {
		client, slots = t.unknown, t.unknownSlots
		if t.unknownPending.Add(1) > int64(2*cap(slots)) {
			t.unknownPending.Add(-1)
			return User{}, fmt.Errorf("%w: %d reviews of unknown tokens under way or waiting", ErrThrottled, 2*cap(slots))
		}
		defer t.unknownPending.Add(-1)
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		if !known {
			return User{}, fmt.Errorf("%w: no review slot within %s", ErrThrottled, t.timeout)
		}
		return User{}, fmt.Errorf("%w: no review slot within %s", ErrUnavailable, t.timeout)
	}
	res, err := client.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: t.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// client-go's errors name the URL and the failure, never the request body.
		return User{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	st := res.Status
	now := t.now()
	if !st.Authenticated || !t.audienceMatches(st.Audiences) {
		t.accepted.remove(key) // revoked: no longer known
		t.rejected.put(key, cacheEntry{expires: now.Add(t.negativeTTL)})
		if st.Error != "" {
			return User{}, fmt.Errorf("%w: %s", errReviewRejected, st.Error)
		}
		return User{}, errReviewRejected
	}
	u := authenticated(st.User.Username, st.User.UID, st.User.Groups)
	t.accepted.put(key, cacheEntry{user: u, fresh: now.Add(t.ttl), expires: now.Add(max(knownFor, t.ttl))})
	return u, nil
}

// audienceMatches checks, when audiences were asked for, that the reviewer vouched for one of
// them (a reviewer that ignores spec.audiences answers none, and the token may be for another
// service).
func (t *tokenReviewer) audienceMatches(got []string) bool {
	if len(t.audiences) == 0 {
		return true
	}
	return slices.ContainsFunc(got, func(a string) bool { return slices.Contains(t.audiences, a) })
}

// reviewCache is a bounded least-recently-used map from a token's hash to the reviewer's answer.
type reviewCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cacheEntry, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key  [sha256.Size]byte
	user User
	// fresh is when an accepted answer must be asked again; expires when the entry is dropped.
	fresh, expires time.Time
}

func newReviewCache(size int) *reviewCache {
	return &reviewCache{size: size, order: list.New(), byKey: make(map[[sha256.Size]byte]*list.Element)}
}

func (c *reviewCache) get(key [sha256.Size]byte, now time.Time) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return cacheEntry{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.byKey, key)
		return cacheEntry{}, false
	}
	c.order.MoveToFront(el)
	return *e, true
}

func (c *reviewCache) put(key [sha256.Size]byte, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.key = key
	if el, ok := c.byKey[key]; ok {
		el.Value = &e
		c.order.MoveToFront(el)
		return
	}
	c.byKey[key] = c.order.PushFront(&e)
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry).key)
	}
}

func (c *reviewCache) remove(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.Remove(el)
		delete(c.byKey, key)
	}
}

func (c *reviewCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
