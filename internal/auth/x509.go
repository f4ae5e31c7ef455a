package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/kubesearch/kubesearch/internal/secrets"
)

// TLSConfig is the client-certificate half of a server's TLS configuration: the CAs of
// --client-ca-file and --requestheader-client-ca-file (the front proxy's) and
// VerifyClientCertIfGiven, so a client may present a certificate signed by them (one from another
// CA fails the handshake) or none and authenticate otherwise; each authenticator then verifies a
// certificate against its own CAs. The caller adds the serving certificate (Certificates or
// GetCertificate). Without either file, nil.
func (o Options) TLSConfig() (*tls.Config, error) {
	if o.ClientCAFile == "" && !o.RequestHeader.Enabled() {
		return nil, nil
	}
	pool := x509.NewCertPool()
	var errs []error
	for _, f := range []struct{ flag, file string }{{"--client-ca-file", o.ClientCAFile}, {"--requestheader-client-ca-file", o.RequestHeader.ClientCAFile}} {
		if f.file == "" {
			continue
		}
		data, err := secrets.ReadPEM(f.file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: client CA: %w", f.flag, err))
			continue
		}
		pool.AppendCertsFromPEM(data)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientCAs:  pool,
		ClientAuth: tls.VerifyClientCertIfGiven,
	}, nil
}

func readCAPool(path string) (*x509.CertPool, error) {
	data, err := secrets.ReadPEM(path)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data) // ReadPEM checked it holds a certificate
	return pool, nil
}

// certAuthenticator maps a client certificate to a user as Kubernetes does: the subject's common
// name is the user name, its organizations are the groups.
type certAuthenticator struct {
	roots *x509.CertPool
}

// authenticate verifies the presented chain itself, against the client CA, for client
// authentication, rather than trusting that the TLS layer did: a server whose tls.Config trusts
// other CAs, or only requests a certificate, must not turn their certificates into users.
func (c *certAuthenticator) authenticate(state *tls.ConnectionState) (User, error) {
	leaf, err := verifyClient(state, c.roots)
	if err != nil {
		return User{}, fmt.Errorf("client certificate: %w", err)
	}
	if leaf.Subject.CommonName == "" {
		// kube-apiserver ignores such a certificate and may then authenticate the request as
		// anonymous; presented credentials that name nobody are a rejection here.
		return User{}, errors.New("client certificate: no common name")
	}
	return authenticated(leaf.Subject.CommonName, "", leaf.Subject.Organization), nil
}
