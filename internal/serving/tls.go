package serving

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// TLS is the HTTPS configuration of a server: the serving certificate, read again when its files
// change (a cert-manager renewal needs no restart), and the client CAs when client certificates
// or a front proxy authenticate (auth.Options.TLSConfig). Errors name the flags --tls-cert-file,
// --tls-private-key-file, --client-ca-file and --requestheader-client-ca-file, which every
// component spells alike.
func TLS(certFile, keyFile string, clients auth.Options, log *slog.Logger) (*tls.Config, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg, err := clients.TLSConfig()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cfg.GetCertificate = r.get
	return cfg, nil
}

// certReloader holds the serving certificate, checking its files at most every checkEvery.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and modification times when read
	checked time.Time
}

const checkEvery = 5 * time.Second

func (r *certReloader) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return stamp, nil
}

func (r *certReloader) load() error {
	stamp, err := r.fileStamp()
	if err != nil {
		return fmt.Errorf("--tls-cert-file, --tls-private-key-file: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file %s, --tls-private-key-file %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.stamp = &cert, stamp
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= checkEvery {
		r.checked = time.Now()
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			// A half-written pair fails to load: the old certificate serves until the next check.
			if err := r.load(); err != nil {
				r.log.Warn("serving certificate changed but cannot be loaded; keeping the previous one", "err", err)
			} else {
				r.log.Info("serving certificate reloaded", "certFile", r.certFile)
			}
		}
	}
	return r.cert, nil
}
