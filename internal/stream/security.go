package stream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/kubesearch/kubesearch/internal/secrets"
)

// Security configures TLS and SASL toward the brokers. Credentials come from files only, never from
// flags or the environment.
type Security struct {
	TLS bool
	// CAFile verifies the brokers' certificates (implies TLS).
	CAFile string
	// InsecureSkipVerify accepts any broker certificate (implies TLS); for demos only.
	InsecureSkipVerify bool
	// SASLMechanism is "", "plain", "scram-sha-256" or "scram-sha-512".
	SASLMechanism string
	// UsernameFile and PasswordFile hold the SASL credentials.
	UsernameFile string
	PasswordFile string
}

// Check reports combinations of options that cannot work, each naming its flag, without reading a
// file.
func (s Security) Check() []error {
	var errs []error
	switch s.SASLMechanism {
	case "":
		if s.UsernameFile != "" || s.PasswordFile != "" {
			errs = append(errs, errors.New("--kafka-username-file, --kafka-password-file: need --kafka-sasl-mechanism"))
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.UsernameFile == "" || s.PasswordFile == "" {
			errs = append(errs, fmt.Errorf("--kafka-username-file, --kafka-password-file: both required with --kafka-sasl-mechanism %s", s.SASLMechanism))
		}
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism: want plain, scram-sha-256 or scram-sha-512, got %q", s.SASLMechanism))
	}
	return errs
}

// Connection is how to reach the brokers, with the files of a Security read.
type Connection struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// Resolve reads the files s names, reporting every problem at once, each naming its flag.
func (s Security) Resolve() (Connection, error) {
	var (
		c    Connection
		errs []error
	)
	if s.TLS || s.CAFile != "" || s.InsecureSkipVerify {
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipVerify} //nolint:gosec // opt-in, for demos
		if s.CAFile != "" {
			pem, err := secrets.ReadPEM(s.CAFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-ca-file: %w", err))
			} else {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(pem)
				c.TLS.RootCAs = pool
			}
		}
	}
	if s.SASLMechanism != "" {
		user, uerr := secrets.ReadValue(s.UsernameFile)
		pass, perr := secrets.ReadValue(s.PasswordFile)
		if uerr != nil {
			errs = append(errs, fmt.Errorf("--kafka-username-file: %w", uerr))
		}
		if perr != nil {
			errs = append(errs, fmt.Errorf("--kafka-password-file: %w", perr))
		}
		if uerr == nil && perr == nil {
			m, err := mechanism(s.SASLMechanism, user, pass)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism: %w", err))
			}
			c.SASL = m
		}
	}
	return c, errors.Join(errs...)
}

func mechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch name {
	case "plain":
		return plain.Mechanism{Username: user, Password: pass}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, user, pass)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, user, pass)
	}
	return nil, fmt.Errorf("unknown mechanism %q", name)
}

// transport is the Transport of a Client's admin requests, writers and followers. Its connections
// come from d, which does the TLS handshake: the Transport gets no TLS configuration of its own.
func (c Connection) transport(d *brokerDialer) *kafka.Transport {
	return &kafka.Transport{Dial: d.DialContext, SASL: c.SASL, DialTimeout: 10 * time.Second}
}

// dialer is the Dialer of a Client's group readers and consumer groups, over d like transport.
func (c Connection) dialer(d *brokerDialer) *kafka.Dialer {
	return &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: d.DialContext, SASLMechanism: c.SASL}
}
