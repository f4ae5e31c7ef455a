package osstore

import (
	"errors"
	"fmt"

	"github.com/opensearch-project/opensearch-go/v4"

	"github.com/kubesearch/kubesearch/internal/secrets"
)

// Security configures credentials and TLS toward OpenSearch. Credentials come from files
// only, never from flags or the environment.
type Security struct {
	UsernameFile string
	PasswordFile string
	// SecretDir is a mounted Kubernetes Secret: files "username" (or Karmada's "userName") and
	// "password".
	SecretDir string
	// CAFile verifies OpenSearch's certificate.
	CAFile string
	// InsecureSkipVerify accepts any certificate; for demos only.
	InsecureSkipVerify bool
}

// Check reports combinations of options that cannot work, each naming its flag, without reading a file.
func (s Security) Check() []error {
	var errs []error
	if (s.UsernameFile == "") != (s.PasswordFile == "") {
		errs = append(errs, errors.New("--opensearch-username-file, --opensearch-password-file: give both or neither"))
	}
	if s.SecretDir != "" && (s.UsernameFile != "" || s.PasswordFile != "") {
		errs = append(errs, errors.New("--opensearch-secret-dir: not together with --opensearch-username-file/--opensearch-password-file"))
	}
	return errs
}

// credentials reads the credential and certificate files s names, reporting every problem, each
// naming its flag.
func (s Security) credentials() (username, password string, caCert []byte, errs []error) {
	var err error
	switch {
	case s.SecretDir != "":
		username, password, err = secrets.ReadDir(s.SecretDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("--opensearch-secret-dir: %w", err))
		}
	case s.UsernameFile != "":
		var uerr, perr error
		username, uerr = secrets.ReadValue(s.UsernameFile)
		password, perr = secrets.ReadValue(s.PasswordFile)
		if uerr != nil {
			errs = append(errs, fmt.Errorf("--opensearch-username-file: %w", uerr))
		}
		if perr != nil {
			errs = append(errs, fmt.Errorf("--opensearch-password-file: %w", perr))
		}
	}
	if s.CAFile != "" {
		if caCert, err = secrets.ReadPEM(s.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("--opensearch-ca-file: %w", err))
		}
	}
	return username, password, caCert, errs
}

// clientConfig is an opensearch-go configuration for addresses with the credentials and TLS settings
// s names, read from their files; every bad option or file is reported, each naming its flag.
func (s Security) clientConfig(addresses []string) (opensearch.Config, error) {
	if errs := s.Check(); len(errs) > 0 {
		return opensearch.Config{}, errors.Join(errs...)
	}
	user, pass, ca, errs := s.credentials()
	if len(errs) > 0 {
		return opensearch.Config{}, errors.Join(errs...)
	}
	return opensearch.Config{Addresses: addresses, Username: user, Password: pass, CACert: ca,
		InsecureSkipVerify: s.InsecureSkipVerify}, nil
}
