package auth

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
)

// ErrUnavailable marks an answer that could not be had: the TokenReview API was unreachable, timed
// out or refused the review. The server answers such a request 503 Service Unavailable (with a
// Retry-After), not 401 as kube-apiserver does: a client told 401 believes its token was revoked
// and may throw it away or prompt for a login, while 503 tells it (and client-go, which retries a
// 503 with Retry-After) that asking again shortly will do. The answer says nothing about the token.
var ErrUnavailable = errors.New("auth: token reviewer unavailable")

// ErrInvalidCredentials is a request whose credentials no authenticator accepted: an unknown,
// revoked or malformed bearer token, an Authorization scheme other than Bearer, or a client
// certificate that does not verify. It is a 401, even when anonymous access is enabled.
var ErrInvalidCredentials = errors.New("auth: invalid credentials")

// ErrThrottled is a credential refused without being judged: it would need a review of a token
// the reviewer never accepted while too many such reviews are under way, or it failed from a
// source that has failed too often (KnownOnly). The server answers 429 Too Many Requests with a
// Retry-After; the answer says nothing about the credential.
var ErrThrottled = errors.New("auth: too many authentication attempts")

// Defaults of the Options left zero.
const (
	DefaultReloadInterval              = 5 * time.Second
	DefaultTokenReviewTimeout          = 5 * time.Second
	DefaultTokenReviewCacheTTL         = 10 * time.Second
	DefaultTokenReviewNegativeCacheTTL = 5 * time.Second
	DefaultTokenReviewCacheSize        = 4096
	DefaultTokenReviewMaxInFlight      = 16
)

// Options configure the authenticators; each file option is the flag of the same name.
type Options struct {
	// TokenAuthFile (--token-auth-file) is a kube-apiserver token file, re-read when it changes.
	TokenAuthFile string
	// ClientCAFile (--client-ca-file) holds the CAs whose client certificates authenticate users.
	// The server's tls.Config must request certificates from them: see TLSConfig.
	ClientCAFile string
	// AuthenticationKubeconfig (--authentication-kubeconfig) reaches the cluster whose TokenReview
	// API reviews bearer tokens the token file does not know.
	AuthenticationKubeconfig string
	// Anonymous (--anonymous) lets requests without credentials in as system:anonymous.
	Anonymous bool
	// RequestHeader trusts a front proxy (a kube-apiserver's aggregation layer) to name the user
	// (--requestheader-*). The server's tls.Config must request certificates from its CA too.
	RequestHeader RequestHeaderOptions

	// TokenReviewAudiences, if set, are the audiences a reviewed token must be for.
	TokenReviewAudiences []string
	// TokenReviewTimeout bounds one review.
	TokenReviewTimeout time.Duration
	// TokenReviewCacheTTL and TokenReviewNegativeCacheTTL are how long an accepted and a rejected
	// token's answer is kept; TokenReviewCacheSize bounds the number of accepted answers kept, and
	// of rejected ones (cached apart, so rejections never evict the tokens in use). An accepted
	// token stays known for an hour after its last review, as long as it stays in the cache.
	TokenReviewCacheTTL         time.Duration
	TokenReviewNegativeCacheTTL time.Duration
	TokenReviewCacheSize        int
	// TokenReviewMaxInFlight (--token-review-max-in-flight) bounds the reviews of tokens the
	// reviewer has not accepted within the last hour going on at once; as many more may wait for a
	// slot, and past them such a token is ErrThrottled. Tokens accepted before have as many slots
	// of their own, so a flood of unknown tokens never delays them.
	TokenReviewMaxInFlight int
	// ReloadInterval is how often, at most, the token file is checked for changes.
	ReloadInterval time.Duration
	// Logger receives token file reloads and their errors.
	Logger *slog.Logger
}

// withDefaults fills in the zero values, in one place.
func (o Options) withDefaults() Options {
	if o.TokenReviewTimeout == 0 {
		o.TokenReviewTimeout = DefaultTokenReviewTimeout
	}
	if o.TokenReviewCacheTTL == 0 {
		o.TokenReviewCacheTTL = DefaultTokenReviewCacheTTL
	}
	if o.TokenReviewNegativeCacheTTL == 0 {
		o.TokenReviewNegativeCacheTTL = DefaultTokenReviewNegativeCacheTTL
	}
	if o.TokenReviewCacheSize == 0 {
		o.TokenReviewCacheSize = DefaultTokenReviewCacheSize
	}
	if o.TokenReviewMaxInFlight == 0 {
		o.TokenReviewMaxInFlight = DefaultTokenReviewMaxInFlight
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Check reports every option that is wrong without reading a file; New reports the files too.
func (o Options) Check() error {
	var errs []error
	if o.TokenAuthFile == "" && o.ClientCAFile == "" && o.AuthenticationKubeconfig == "" && !o.RequestHeader.Enabled() && !o.Anonymous {
		errs = append(errs, errors.New("no authentication configured: set --token-auth-file, --client-ca-file, "+
			"--authentication-kubeconfig or --requestheader-client-ca-file, or enable --anonymous"))
	}
	errs = append(errs, o.RequestHeader.check()...)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"token review timeout", o.TokenReviewTimeout},
		{"token review cache TTL", o.TokenReviewCacheTTL},
		{"token review negative cache TTL", o.TokenReviewNegativeCacheTTL},
		{"reload interval", o.ReloadInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %v is negative", d.name, d.v))
		}
	}
	if o.TokenReviewCacheSize < 0 {
		errs = append(errs, fmt.Errorf("token review cache size: %d is negative", o.TokenReviewCacheSize))
	}
	if o.TokenReviewMaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("--token-review-max-in-flight: %d is negative; want at least 1 (0: %d)", o.TokenReviewMaxInFlight, DefaultTokenReviewMaxInFlight))
	}
	return errors.Join(errs...)
}

// Authenticator tells who a request comes from. It is safe for concurrent use and owns no
// goroutine: the token file is checked for changes by the requests themselves.
type Authenticator struct {
	proxy     *requestHeader
	tokens    *tokenFile
	certs     *certAuthenticator
	reviewer  *tokenReviewer
	anonymous bool
}

// New builds the authenticators the options configure, reading their files; every bad option is
// reported, each naming its flag.
func New(o Options) (*Authenticator, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	a := &Authenticator{anonymous: o.Anonymous}
	var errs []error
	if o.TokenAuthFile != "" {
		f, err := openTokenFile(o.TokenAuthFile, o.ReloadInterval, o.Logger)
		if err != nil {
			errs = append(errs, fmt.Errorf("--token-auth-file: %w", err))
		}
		a.tokens = f
	}
	if o.ClientCAFile != "" {
		pool, err := readCAPool(o.ClientCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
		}
		a.certs = &certAuthenticator{roots: pool}
	}
	if o.RequestHeader.Enabled() {
		h, err := newRequestHeader(o.RequestHeader)
		if err != nil {
			errs = append(errs, fmt.Errorf("--requestheader-client-ca-file: %w", err))
		}
		a.proxy = h
	}
	if o.ClientCAFile != "" && o.RequestHeader.Enabled() && len(o.RequestHeader.AllowedNames) == 0 && sharesCA(o.ClientCAFile, o.RequestHeader.ClientCAFile) {
		// Then every client certificate is also a front proxy's, which may name any user (and
		// kubesearch serves some objects to proxied users alone).
		errs = append(errs, errors.New("--requestheader-client-ca-file shares a CA with --client-ca-file: any client certificate could name any user; use the front proxy's own CA, or set --requestheader-allowed-names"))
	}
	if o.AuthenticationKubeconfig != "" {
		r, err := newTokenReviewer(o.AuthenticationKubeconfig, &o)
		if err != nil {
			errs = append(errs, fmt.Errorf("--authentication-kubeconfig: %w", err))
		}
		a.reviewer = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// sharesCA says whether two PEM files hold a certificate in common (unreadable files hold none:
// they are reported where they are read).
func sharesCA(a, b string) bool {
	certs := func(path string) map[string]bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for {
			var block *pem.Block
			if block, data = pem.Decode(data); block == nil {
				return out
			}
			if block.Type == "CERTIFICATE" {
				out[string(block.Bytes)] = true
			}
		}
	}
	inA := certs(a)
	for der := range certs(b) {
		if inA[der] {
			return true
		}
	}
	return false
}

// knownOnlyKey marks a request context KnownOnly.
type knownOnlyKey struct{}

// KnownOnly marks a request's context so that Authenticate judges only credentials it knows
// without asking anyone: the token file, client certificates, and bearer tokens the token reviewer
// accepted before. Any other credential is ErrThrottled, never reviewed, and a rejection ErrThrottled
// rather than ErrInvalidCredentials. The server marks the requests of a source whose failed
// authentications passed their bound: guessing stops there, and the valid tokens of other clients
// behind the same address keep working.
func KnownOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, knownOnlyKey{}, true)
}

// Judged undoes KnownOnly for a context: its credentials are judged whatever they are. An open
// watch that authenticates again to learn whether its subject was revoked needs a judgement, not
// the refusal its source's failures would get.
func Judged(ctx context.Context) context.Context {
	return context.WithValue(ctx, knownOnlyKey{}, false)
}

func knownOnly(ctx context.Context) bool {
	v, _ := ctx.Value(knownOnlyKey{}).(bool)
	return v
}

// Authenticate tells who r comes from. ok is true with the user when r's credentials were
// accepted, or r carried none and anonymous access is enabled. ok is false with a nil error when r
// carried no credentials and anonymous access is off (a 401). An error is a rejection: it wraps
// ErrUnavailable when the token reviewer could not answer (a 503), ErrThrottled when the
// credential was refused unjudged (a 429: see KnownOnly and Options.TokenReviewMaxInFlight), else
// ErrInvalidCredentials (a 401). Errors never hold a credential.
//
// The authenticators are tried in order, the first to accept wins: the front proxy (the user its
// headers name, when its certificate verifies against --requestheader-client-ca-file, as
// kube-apiserver tries it first), the token file, the client certificate, the token reviewer
// (last, being remote). A request carrying both a certificate and a token the token file knows is
// the token's user.
//
// Authenticate does not remove the Authorization header; a server that forwards requests must.
func (a *Authenticator) Authenticate(r *http.Request) (user User, ok bool, err error) {
	header := strings.TrimSpace(r.Header.Get("Authorization"))
	token := bearerToken(header)
	limited := knownOnly(r.Context())
	var errs []error
	if a.proxy != nil {
		u, ok, err := a.proxy.authenticate(r)
		if ok {
			return u, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if token != "" && a.tokens != nil {
		if u, found := a.tokens.lookup(token); found {
			return u, true, nil
		}
	}
	if a.certs != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		u, err := a.certs.authenticate(r.TLS)
		if err == nil {
			return u, true, nil
		}
		errs = append(errs, err)
	}
	if token != "" && a.reviewer != nil {
		u, err := a.reviewer.review(r.Context(), token, limited)
		if err == nil {
			return u, true, nil
		}
		errs = append(errs, err)
	}
	switch {
	case header != "" && token == "":
		errs = append(errs, errors.New("authorization header: not a bearer token"))
	case token != "" && a.tokens == nil && a.reviewer == nil:
		errs = append(errs, errors.New("bearer token: no token authentication configured"))
	case token != "" && a.reviewer == nil:
		errs = append(errs, errors.New("bearer token: unknown"))
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		switch {
		case errors.Is(err, ErrUnavailable), errors.Is(err, ErrThrottled):
			return User{}, false, err
		case limited:
			return User{}, false, fmt.Errorf("%w: credentials refused from a source that failed too often", ErrThrottled)
		}
		return User{}, false, fmt.Errorf("%w: %w", ErrInvalidCredentials, err)
	}
	if a.anonymous {
		return anonymousUser, true, nil
	}
	return User{}, false, nil
}

// Reload re-reads the token file now, if one is configured; the tokens read last stay in use on
// error. The file is also re-read on its own when it changes.
func (a *Authenticator) Reload() error {
	if a.tokens == nil {
		return nil
	}
	if err := a.tokens.Reload(); err != nil {
		return fmt.Errorf("--token-auth-file: %w", err)
	}
	return nil
}

// bearerToken is the token of an "Authorization: Bearer <token>" header, the scheme in any case,
// as kube-apiserver reads it; "" if the header holds no bearer token.
func bearerToken(header string) string {
	scheme, token, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "bearer") || token == "" || strings.Contains(token, " ") {
		return ""
	}
	return token
}
