package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/internal/secrets"
	"github.com/kubesearch/kubesearch/queryapi"
)

// kubeconfigCommand prints a kubeconfig for the query API's Kubernetes facade: a context for the
// fleet, one for the qualified view and one per member cluster the query API knows.
func kubeconfigCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "kubeconfig",
		GroupID: toolsGroup,
		Short:   "Print a kubeconfig for the query API's Kubernetes facade",
		Long: `Print a kubeconfig for the query API's Kubernetes facade on stdout: a context for the whole fleet,
one for the qualified view (names suffixed with their cluster: <name>_<cluster>) and one per member cluster the query
API knows, asked of it at --server. Credentials are read from files and written into the kubeconfig
(a token) or referenced by absolute path (a client certificate and key).

The fleet context (current) keeps objects' names, so one namespace/name may be several clusters'
objects: informers, controller-runtime and k9s merge them. Point those at the qualified context. Each
context carries an extension kubesearch.io/view saying which view it is (kubectl config view shows
it), and the command prints that notice on stderr.`,
		Example: `  # The fleet of a local query API as one cluster for kubectl
  kubesearch kubeconfig --server http://127.0.0.1:8080 > /tmp/fleet.kubeconfig
  kubectl --kubeconfig /tmp/fleet.kubeconfig get pods -A

  # HTTPS with a bearer token
  kubesearch kubeconfig --server https://kubesearch.example.com --certificate-authority ca.pem \
    --token-file ~/.kubesearch/token > ~/.kube/kubesearch`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc { return kubeconfigFlags(g, cmd) })
}

// kubeconfigFlags registers the kubeconfig command's flags and returns what it runs.
func kubeconfigFlags(g flagGroups, cmd *cobra.Command) runFunc {
	var o queryapi.KubeconfigOptions
	var tokenFile string
	g.add("Query API", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.Server, "server", "", "URL of the query API, e.g. http://127.0.0.1:8080 (required)")
		fs.StringVar(&o.CertificateAuthority, "certificate-authority", "", "PEM CA file that signs the query API's certificate, written into the kubeconfig")
		fs.BoolVar(&o.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "accept any certificate of the query API; for demos only")
	})
	g.add("Credentials", func(fs *pflag.FlagSet) {
		fs.StringVar(&tokenFile, "token-file", "", "file with a bearer token for the query API, written into the kubeconfig")
		fs.StringVar(&o.ClientCertificate, "client-certificate", "", "PEM client certificate for the query API (--client-ca-file there), referenced by the kubeconfig")
		fs.StringVar(&o.ClientKey, "client-key", "", "PEM private key of --client-certificate")
	})
	return func(ctx context.Context, _ *slog.Logger) error {
		if o.Server == "" {
			return errors.New("--server: required")
		}
		if tokenFile != "" {
			token, err := secrets.ReadValue(tokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			o.Token = token
		}
		tlsConfig := &tls.Config{InsecureSkipVerify: o.InsecureSkipTLSVerify} //nolint:gosec // the user asked for it
		if o.CertificateAuthority != "" {
			pem, err := secrets.ReadPEM(o.CertificateAuthority)
			if err != nil {
				return fmt.Errorf("--certificate-authority: %w", err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tlsConfig.RootCAs = pool
		}
		if (o.ClientCertificate == "") != (o.ClientKey == "") {
			return errors.New("--client-certificate, --client-key: both or neither")
		}
		if o.ClientCertificate != "" {
			cert, err := tls.LoadX509KeyPair(o.ClientCertificate, o.ClientKey)
			if err != nil {
				return fmt.Errorf("--client-certificate, --client-key: %w", err)
			}
			tlsConfig.Certificates = []tls.Certificate{cert}
			// The kubeconfig names the files; kubectl reads them relative to its own folder.
			if o.ClientCertificate, err = filepath.Abs(o.ClientCertificate); err == nil {
				o.ClientKey, err = filepath.Abs(o.ClientKey)
			}
			if err != nil {
				return err
			}
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}}
		clusters, err := queryapi.FetchClusters(ctx, client, o.Server, o.Token)
		if err != nil {
			return err
		}
		out, err := clientcmd.Write(*queryapi.Kubeconfig(o, clusters))
		if err != nil {
			return fmt.Errorf("encode kubeconfig: %w", err)
		}
		if _, err := cmd.OutOrStdout().Write(out); err != nil {
			return err
		}
		// On stderr, so a kubeconfig redirected to a file stays clean and the user still reads it.
		_, err = fmt.Fprintf(cmd.ErrOrStderr(), "Note: %s.\n", queryapi.FleetViewNotice)
		return err
	}
}
