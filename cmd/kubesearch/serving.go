package main

import (
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/serving"
)

// authenticationFlags registers how a server authenticates requests, the same for the query API's
// API and for the collector's and the indexer's operational endpoints.
func authenticationFlags(fs *pflag.FlagSet, o *auth.Options) {
	fs.StringVar(&o.TokenAuthFile, "token-auth-file", "", `bearer tokens, kube-apiserver's CSV format: token,user,uid,"group1,group2" (reloaded when it changes)`)
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "PEM CA certificates that sign client certificates (CN = user, O = groups); needs --tls-cert-file")
	fs.StringVar(&o.AuthenticationKubeconfig, "authentication-kubeconfig", "", "kubeconfig of a cluster whose TokenReview API checks bearer tokens (ServiceAccount and OIDC tokens of the platform)")
}

// requestHeaderFlags registers the front proxy kube-apiserver's aggregation layer is (an APIService
// in front of the query API), spelled as kube-apiserver's flags.
func requestHeaderFlags(fs *pflag.FlagSet, o *auth.RequestHeaderOptions) {
	fs.StringVar(&o.ClientCAFile, "requestheader-client-ca-file", "", "PEM CA certificates that sign the front proxy's client certificate (a kube-apiserver's --proxy-client-cert-file, as in front of an APIService); a request with such a certificate is the user its headers name; needs --tls-cert-file")
	fs.StringSliceVar(&o.AllowedNames, "requestheader-allowed-names", nil, "common names the front proxy's certificate may have (e.g. front-proxy-client); empty: any certificate of --requestheader-client-ca-file")
	fs.StringSliceVar(&o.UsernameHeaders, "requestheader-username-headers", []string{auth.DefaultUsernameHeader}, "headers the front proxy names the user in; the first present is used")
	fs.StringSliceVar(&o.UIDHeaders, "requestheader-uid-headers", []string{auth.DefaultUIDHeader}, "headers the front proxy names the user's UID in; the first present is used")
	fs.StringSliceVar(&o.GroupHeaders, "requestheader-group-headers", []string{auth.DefaultGroupHeader}, "headers the front proxy names the user's groups in; every value is a group")
}

// servingTLSFlags registers a server's certificate.
func servingTLSFlags(fs *pflag.FlagSet, certFile, keyFile *string) {
	fs.StringVar(certFile, "tls-cert-file", "", "PEM serving certificate (HTTPS; reloaded when it changes)")
	fs.StringVar(keyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
}

// endpointsFlags registers who may read the collector's and the indexer's /metrics and /status,
// and their TLS: any subject the authenticators accept; without one, whoever reaches --listen.
func endpointsFlags(g flagGroups, o *serving.Options) {
	g.add("Security", func(fs *pflag.FlagSet) {
		authenticationFlags(fs, &o.Authentication)
		servingTLSFlags(fs, &o.TLSCertFile, &o.TLSKeyFile)
	})
}
