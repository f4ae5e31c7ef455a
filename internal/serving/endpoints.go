// Package serving is what kubesearch's HTTP servers share: the serving certificate, re-read when
// its files change (TLS), and the operational endpoints of the collector and the indexer
// (Endpoints): /metrics and /status answer the subjects package auth's authenticators accept —
// every one of them, as the token file lists the operational readers (the query API, Prometheus),
// much as kube-apiserver serves /metrics to whoever may `get` it — while the probes /healthz and
// /readyz stay open for the kubelet. It leaves out the query API's authentication and
// authorization of its API (packages queryapi and authz).
package serving

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// Options configure how a component serves its operational endpoints.
type Options struct {
	// Authentication says who may read the guarded endpoints: every subject its authenticators
	// (--token-auth-file, --client-ca-file, --authentication-kubeconfig) accept. With none of them,
	// whoever reaches the address reads them, and Listen warns unless it is loopback. Anonymous is
	// ignored: it would be no authentication.
	Authentication auth.Options
	// TLSCertFile and TLSKeyFile serve HTTPS, re-read when the files change; without them, HTTP.
	TLSCertFile, TLSKeyFile string
}

// Authenticated says whether some authenticator is configured.
func (o Options) Authenticated() bool {
	a := o.Authentication
	return a.TokenAuthFile != "" || a.ClientCAFile != "" || a.AuthenticationKubeconfig != ""
}

// Check reports every bad option without reading a file, each naming its flag; New reads the files.
func (o Options) Check() []error {
	var errs []error
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file, --tls-private-key-file: both or neither"))
	}
	if o.Authentication.ClientCAFile != "" && o.TLSCertFile == "" {
		errs = append(errs, errors.New("--client-ca-file: client certificates need HTTPS (--tls-cert-file, --tls-private-key-file)"))
	}
	if o.Authenticated() {
		a := o.Authentication
		a.Anonymous = false
		if err := a.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Endpoints is Options with their files read: who may read the guarded endpoints, and how the
// listener serves.
type Endpoints struct {
	authn *auth.Authenticator // nil: no authentication configured
	tls   *tls.Config         // nil: plain HTTP
	log   *slog.Logger
}

// New reads the files the options name, reporting every problem at once.
func New(o Options, log *slog.Logger) (*Endpoints, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := errors.Join(o.Check()...); err != nil {
		return nil, err
	}
	e := &Endpoints{log: log}
	var errs []error
	if o.Authenticated() {
		a := o.Authentication
		a.Anonymous, a.Logger = false, log
		authn, err := auth.New(a)
		errs = append(errs, err)
		e.authn = authn
	}
	if o.TLSCertFile != "" {
		cfg, err := TLS(o.TLSCertFile, o.TLSKeyFile, o.Authentication, log)
		errs = append(errs, err)
		e.tls = cfg
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// Listen binds addr, serving HTTPS when a certificate is configured. Without authentication on an
// address other hosts reach, it logs a warning naming the flags: the endpoints then answer whoever
// reaches them, as they did before they could authenticate, so an upgrade breaks no scraper.
func (e *Endpoints) Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if e.authn == nil && !loopback(l.Addr()) {
		e.log.Warn("/metrics (and the collector's /status) answer without credentials whoever reaches " + l.Addr().String() +
			": they name member clusters, resources and failures; set --token-auth-file (or --client-ca-file, --authentication-kubeconfig) " +
			"so only the readers it lists get them, or listen on 127.0.0.1")
	}
	if e.tls != nil {
		l = tls.NewListener(l, e.tls)
	}
	return l, nil
}

// loopback says whether a bound address is on the loopback interface only.
func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// Guard serves h to the requests whose credentials an authenticator accepts: any such subject may
// read it. Without authentication configured, h itself. The answers are plain text, as the
// probes': 401 without accepted credentials, 503 with Retry-After when the token reviewer cannot
// answer (the credential may be good), 429 when too many reviews are under way.
func (e *Endpoints) Guard(h http.Handler) http.Handler {
	if e == nil || e.authn == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok, err := e.authn.Authenticate(r)
		switch {
		case errors.Is(err, auth.ErrUnavailable):
			w.Header().Set("Retry-After", "5")
			http.Error(w, "authentication is unavailable, retry later", http.StatusServiceUnavailable)
		case errors.Is(err, auth.ErrThrottled):
			w.Header().Set("Retry-After", "5")
			http.Error(w, "too many authentication attempts, retry later", http.StatusTooManyRequests)
		case err != nil || !ok:
			// As kube-apiserver answers: nothing about which credential failed, or why.
			w.Header().Set("WWW-Authenticate", `Bearer realm="kubesearch"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		default:
			h.ServeHTTP(w, r)
			return
		}
		e.log.Debug("operational endpoint refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	})
}
