// Package secrets reads credentials the way every kubesearch component takes them: from files (a
// mounted Kubernetes Secret, or one file per value), never from flags or the environment, which end
// up in process listings and logs. It leaves out what the credentials are for.
package secrets

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReadDir reads a mounted Secret's folder: username (or Karmada's userName) and password.
func ReadDir(dir string) (user, pass string, err error) {
	var errs []error
	user, err = ReadValue(filepath.Join(dir, "username"))
	if errors.Is(err, fs.ErrNotExist) {
		user, err = ReadValue(filepath.Join(dir, "userName"))
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%s holds neither username nor userName", dir)
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	pass, err = ReadValue(filepath.Join(dir, "password"))
	if err != nil {
		errs = append(errs, err)
	}
	return user, pass, errors.Join(errs...)
}

// ReadValue reads a one-value file; a trailing line break (echo, most editors) is not part of
// the value.
func ReadValue(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// ReadPEM reads a file of PEM certificates, refusing one that holds none.
func ReadPEM(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return data, nil
}
