package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// errReviewRejected is a token the reviewer answered not authenticated, or for other audiences.
var errReviewRejected = errors.New("auth: token rejected by token review")

// tokenReviewer asks a cluster's TokenReview API who a bearer token belongs to, as kube-apiserver's
// webhook token authenticator does, and remembers answers briefly: a client sends the same token
// with every request, and the reviewer is another cluster's apiserver.
type tokenReviewer struct {
	client    authenticationv1client.TokenReviewInterface
	audiences []string
	timeout   time.Duration
	// ttl and negativeTTL keep accepted and rejected answers: short, so a revoked token stops
	// working within seconds, and a rejected one cannot hammer the reviewer.
	ttl, negativeTTL time.Duration
	cache            *reviewCache
	now              func() time.Time
}

func newTokenReviewer(kubeconfig string, o *Options) (*tokenReviewer, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	// client-go's default (5 requests/s) would queue reviews behind each other under load; this
	// bound still keeps a flood of random tokens (which no cache absorbs) from swamping the cluster.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	return &tokenReviewer{
		client:      client.TokenReviews(),
		audiences:   o.TokenReviewAudiences,
		timeout:     o.TokenReviewTimeout,
		ttl:         o.TokenReviewCacheTTL,
		negativeTTL: o.TokenReviewNegativeCacheTTL,
		cache:       newReviewCache(o.TokenReviewCacheSize),
		now:         time.Now,
	}, nil
}

// review returns the token's user; errReviewRejected if the reviewer says no; an error wrapping
// ErrUnavailable if it could not be asked (which is not cached: the next request asks again).
func (t *tokenReviewer) review(ctx context.Context, token string) (User, error) {
	key := sha256.Sum256([]byte(token))
	if e, ok := t.cache.get(key, t.now()); ok {
		if !e.ok {
			return User{}, errReviewRejected
		}
		return e.user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.client.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: t.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// client-go's errors name the URL and the failure, never the request body.
		return User{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	st := res.Status
	if !st.Authenticated || !t.audienceMatches(st.Audiences) {
		t.cache.put(key, cacheEntry{expires: t.now().Add(t.negativeTTL)})
		if st.Error != "" {
			return User{}, fmt.Errorf("%w: %s", errReviewRejected, st.Error)
		}
		return User{}, errReviewRejected
	}
	u := authenticated(st.User.Username, st.User.UID, st.User.Groups)
	t.cache.put(key, cacheEntry{ok: true, user: u, expires: t.now().Add(t.ttl)})
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
	key     [sha256.Size]byte
	ok      bool
	user    User
	expires time.Time
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

func (c *reviewCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
