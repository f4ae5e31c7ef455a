package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/queryapi"
)

func queryAPICommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queryapi",
		GroupID: componentsGroup,
		Short:   "Serve REST search and the Kubernetes facade over the index",
		Long: `Serve a JSON REST search (/v1alpha1/search; described at /openapi.json) over what the indexer
wrote, and a read-only Kubernetes API over the whole fleet: kubectl and client-go get, list and watch
every member at once. The facade needs --kafka-brokers: it reads the collectors' ledger there to know
what each member caches, and the events for WATCH. Print a kubeconfig for it with kubesearch kubeconfig.`,
		Example: `  # REST search and the facade on 127.0.0.1:8080, no credentials (a laptop)
  kubesearch queryapi --opensearch-addresses http://127.0.0.1:9200 --kafka-brokers 127.0.0.1:9092 \
    --collector-status-urls http://127.0.0.1:8081/status --anonymous

  # HTTPS with bearer tokens and a policy of who sees what; replicas share the continue key
  kubesearch queryapi --listen :8443 --opensearch-addresses https://opensearch:9200 \
    --kafka-brokers kafka:9092 --tls-cert-file tls.crt --tls-private-key-file tls.key \
    --token-auth-file tokens.csv --authorization-policy-file policy.yaml \
    --continue-key-file /secrets/continue-key`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc {
		options := queryAPIFlags(g)
		return func(ctx context.Context, log *slog.Logger) error {
			o := options()
			o.Logger = log
			s, err := queryapi.New(o)
			if err != nil {
				return err
			}
			return s.Run(ctx)
		}
	})
}

// queryAPIFlags registers the query API's flags and returns the Options they set.
func queryAPIFlags(g flagGroups) func() queryapi.Options {
	var o queryapi.Options
	o.SetDefaults()
	var addresses, collectors, brokers stringList
	g.add("Serving", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ListenAddr, "listen", o.ListenAddr, "address of the API, /healthz, /readyz, /metrics and /openapi.json")
	})
	g.add("OpenSearch", func(fs *pflag.FlagSet) {
		fs.Var(&addresses, "opensearch-addresses", "comma-separated OpenSearch node URLs")
		fs.StringVar(&o.OpenSearch.UsernameFile, "opensearch-username-file", "", "file holding the OpenSearch username")
		fs.StringVar(&o.OpenSearch.PasswordFile, "opensearch-password-file", "", "file holding the OpenSearch password")
		fs.StringVar(&o.OpenSearch.SecretDir, "opensearch-secret-dir", "", "mounted Secret folder with files username (or userName) and password")
		fs.StringVar(&o.OpenSearch.CAFile, "opensearch-ca-file", "", "PEM CA certificates that sign OpenSearch's certificate")
		fs.BoolVar(&o.OpenSearch.InsecureSkipVerify, "opensearch-insecure-skip-verify", false, "accept any OpenSearch certificate; for demos only")
		fs.BoolVar(&o.OpenSearchCompression, "opensearch-compression", false, "ask OpenSearch for gzipped answers: fewer bytes on a slow link, more CPU on both sides")
		fs.StringVar(&o.IndexPrefix, "index-prefix", "", "the indexer's --index-prefix")
	})
	g.add("Kafka", func(fs *pflag.FlagSet) {
		fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka brokers; the Kubernetes facade reads what each member has cached from the collectors' ledger there")
		fs.StringVar(&o.Topic, "topic", o.Topic, "the collectors' event topic (the ledger is <topic>.collectors)")
		fs.StringVar(&o.IndexerGroup, "indexer-group", o.IndexerGroup, "the indexers' consumer group (their --group): the watch cache starts reading a little before what they committed")
		fs.Var(&funcValue{typ: "events|size", set: func(v string) error {
			events, bytes, err := queryapi.ParseWatchWindow(v)
			if events > 0 {
				o.WatchWindowEvents = events
			}
			if bytes > 0 {
				o.WatchWindowBytes = bytes
			}
			return err
		}}, "watch-window", "bound of the watch cache's window of recent events: a number of events (default 100000) or a size such as 512Mi (default); watches resume from positions it holds")
	})
	kafkaSecurityFlags(g, &o.Kafka)
	g.add("Status", func(fs *pflag.FlagSet) {
		fs.Var(&collectors, "collector-status-urls", "comma-separated /status URLs of the collectors, for collection state and lag")
		fs.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "how often index watermarks and collector status are read")
		fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "index lag past which answers carry a Warning")
	})
	securityFlags(g, &o, false, "let requests without credentials in as system:anonymous (with --authorization-policy-file, they see what the policy grants it)")
	g.add("Security", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ContinueKeyFile, "continue-key-file", "", "file with the key (≥16 bytes) signing continue tokens; replicas must share it (default: random per process)")
	})
	g.add("Tuning", func(fs *pflag.FlagSet) {
		fs.DurationVar(&o.PageKeepAlive, "page-keep-alive", o.PageKeepAlive, "how long a paged query's snapshot lives between two pages")
		fs.DurationVar(&o.ResourceVersionWait, "resource-version-wait", o.ResourceVersionWait, "longest wait of a facade LIST for the index to reach the resourceVersion it asks for")
		fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "longest time one request may spend on OpenSearch")
		fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "longest wait for requests in flight on shutdown")
	})
	return func() queryapi.Options {
		o.OpenSearchAddresses, o.CollectorStatusURLs, o.KafkaBrokers = addresses, collectors, brokers
		return o
	}
}

// securityFlags register authentication, authorization, TLS serving and the per-subject limits, as
// the query API and the standalone mode take them.
func securityFlags(g flagGroups, o *queryapi.Options, anonymous bool, anonymousUsage string) {
	g.add("Security", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.Authentication.TokenAuthFile, "token-auth-file", "", `bearer tokens, kube-apiserver's CSV format: token,user,uid,"group1,group2" (reloaded when it changes)`)
		fs.StringVar(&o.Authentication.ClientCAFile, "client-ca-file", "", "PEM CA certificates that sign client certificates (CN = user, O = groups); needs --tls-cert-file")
		fs.StringVar(&o.Authentication.AuthenticationKubeconfig, "authentication-kubeconfig", "", "kubeconfig of a cluster whose TokenReview API checks bearer tokens (ServiceAccount and OIDC tokens of the platform)")
		fs.BoolVar(&o.Authentication.Anonymous, "anonymous", anonymous, anonymousUsage)
		fs.StringVar(&o.AuthorizationPolicyFile, "authorization-policy-file", "", "YAML policy of what users and groups may see (clusters, namespaces, resources, verbs); without it (and without --subject-access-review-kubeconfig) every authenticated subject sees everything")
		fs.StringVar(&o.SubjectAccessReview.Kubeconfig, "subject-access-review-kubeconfig", "", "kubeconfig whose every context is a member cluster, asked by SubjectAccessReview what each subject may see there, so member RBAC applies; credentials need only create subjectaccessreviews")
		fs.StringVar(&o.SubjectAccessReview.ClustersFile, "subject-access-review-clusters", "", "clusters file (the collector's --clusters format) of the members asked by SubjectAccessReview, instead of --subject-access-review-kubeconfig")
		fs.DurationVar(&o.SubjectAccessReview.AllowedTTL, "subject-access-review-allowed-ttl", authz.DefaultAllowedTTL, "how long a member's allow is cached")
		fs.DurationVar(&o.SubjectAccessReview.DeniedTTL, "subject-access-review-denied-ttl", authz.DefaultDeniedTTL, "how long a member's deny (or a failed review) is cached")
		fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "PEM serving certificate (HTTPS; reloaded when it changes)")
		fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	})
	g.add("Limits", func(fs *pflag.FlagSet) {
		fs.Float64Var(&o.RateLimit, "rate-limit", 200, "requests per second of one subject (user); past it and --rate-burst, 429 with Retry-After; 0 for no bound")
		fs.IntVar(&o.RateBurst, "rate-burst", 400, "request burst of one subject")
		fs.IntVar(&o.MaxWatches, "max-watches-per-subject", 1000, "open watches of one subject; past it, 429")
	})
}
