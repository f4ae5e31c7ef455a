package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/store"
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
		fs.StringVar(&o.ChangesTopic, "changes-topic", "", "the indexers' change feed (their --changes-topic) for the watch cache to follow instead of --topic, keeping no identity per object (default <topic>.changes; none: follow --topic, keeping an identity per cached object; when the feed does not exist, the cache follows --topic until it does)")
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
		fs.StringVar(&o.CollectorStatusTokenFile, "collector-status-token-file", "", "file with the bearer token sent to the collectors' /status (a token of their --token-auth-file); read at every poll")
		fs.StringVar(&o.CollectorStatusCAFile, "collector-status-ca-file", "", "PEM CA certificates that sign the certificates of collectors serving HTTPS")
		fs.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "how often index watermarks and collector status are read")
		fs.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "index lag past which answers carry a Warning")
	})
	securityFlags(g, &o, false, "let requests without credentials in as system:anonymous (with --authorization-policy-file, they see what the policy grants it)")
	g.add("Karmada", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.KarmadaKubeconfig, "karmada-kubeconfig", "", "kubeconfig of the Karmada control plane storing ResourceRegistry objects (resourceregistries.karmada.kubesearch.io); with it, the query API serves them under search.karmada.io/v1alpha1")
	})
	g.add("Security", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ContinueKeyFile, "continue-key-file", "", "file with the key (≥16 bytes) signing continue tokens and sealing the fleet views' resourceVersions; replicas must share it (default: random per process: another replica, or this one restarted, answers them 410)")
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
		authenticationFlags(fs, &o.Authentication)
		fs.BoolVar(&o.Authentication.Anonymous, "anonymous", anonymous, anonymousUsage)
		fs.Var((*stringList)(&o.AcceptHosts), "accept-hosts", `comma-separated regular expressions of host names (each matching the whole name) anonymous requests may name in their Host header, besides localhost, *.localhost and IP addresses, which are always served; e.g. 'kubesearch\.lan' to serve anonymously on a LAN name (others are refused, against DNS rebinding)`)
		fs.StringVar(&o.AuthorizationPolicyFile, "authorization-policy-file", "", "YAML policy of what users and groups may see (clusters, namespaces, resources, verbs); without it (and without --subject-access-review-kubeconfig) every authenticated subject sees everything")
		fs.StringVar(&o.SubjectAccessReview.Kubeconfig, "subject-access-review-kubeconfig", "", "kubeconfig whose every context is a member cluster, asked by SubjectAccessReview what each subject may see there, so member RBAC applies; credentials need only create subjectaccessreviews")
		fs.StringVar(&o.SubjectAccessReview.ClustersFile, "subject-access-review-clusters", "", "clusters file (the collector's --clusters format) of the members asked by SubjectAccessReview, instead of --subject-access-review-kubeconfig")
		fs.DurationVar(&o.SubjectAccessReview.AllowedTTL, "subject-access-review-allowed-ttl", authz.DefaultAllowedTTL, "how long a member's allow is cached")
		fs.DurationVar(&o.SubjectAccessReview.DeniedTTL, "subject-access-review-denied-ttl", authz.DefaultDeniedTTL, "how long a member's deny (or a failed review) is cached")
		fs.IntVar(&o.SubjectAccessReview.Concurrency, "subject-access-review-max-in-flight-per-subject", authz.DefaultReviewConcurrency, "SubjectAccessReviews one subject (user) has in flight at once, all its requests together; a request waiting longer than 5s for its subject's slots or tokens is a 429 with Retry-After")
		fs.Float64Var(&o.SubjectAccessReview.RatePerSubject, "subject-access-review-rate-per-subject", authz.DefaultRatePerSubject, "SubjectAccessReviews per second one subject (user) asks of the members, cached answers aside; past it and --subject-access-review-burst-per-subject, its requests are 429s with Retry-After (retries ask only what is not cached yet); 0 for no bound")
		fs.IntVar(&o.SubjectAccessReview.BurstPerSubject, "subject-access-review-burst-per-subject", authz.DefaultBurstPerSubject, "SubjectAccessReview burst of one subject")
		servingTLSFlags(fs, &o.TLSCertFile, &o.TLSKeyFile)
		requestHeaderFlags(fs, &o.Authentication.RequestHeader)
	})
	g.add("Limits", func(fs *pflag.FlagSet) {
		fs.Float64Var(&o.RateLimit, "rate-limit", queryapi.DefaultRateLimit, "requests per second of one subject (user); past it and --rate-burst, 429 with Retry-After; 0 for no bound")
		fs.IntVar(&o.RateBurst, "rate-burst", queryapi.DefaultRateBurst, "request burst of one subject")
		fs.IntVar(&o.MaxWatches, "max-watches-per-subject", queryapi.DefaultMaxWatches, "open watches of one subject; past it, 429; 0 for no bound")
		fs.IntVar(&o.MaxListsPerSubject, "max-lists-per-subject", queryapi.DefaultMaxListsPerSubject, "LISTs without a limit (streaming every page) of one subject at once; past it, 429; 0 for no bound")
		fs.IntVar(&o.MaxRequestsInFlight, "max-requests-inflight", queryapi.DefaultMaxRequestsInFlight, "requests served at once, watches aside; past it, 429; 0 for no bound")
		fs.BoolVar(&o.Profiling, "profiling", false, "serve the Go runtime's profiles under /debug/pprof/ to subjects who may get that path (as /metrics): where a loaded process's CPU and memory go")
		fs.DurationVar(&o.WriteTimeout, "write-timeout", queryapi.DefaultWriteTimeout, "longest wait of one write of an answer for its client to read; a client that stops reading loses its request (a LIST, a watch) after it; 0 for no bound")
		fs.Float64Var(&o.SourceRateLimit, "source-rate-limit", queryapi.DefaultSourceRateLimit, "requests per second of one source address (IPv4 address, IPv6 /64), before authentication; past it and --source-rate-burst, 429; 0 for no bound (behind a proxy, every client is the proxy's address)")
		fs.IntVar(&o.SourceRateBurst, "source-rate-burst", queryapi.DefaultSourceRateBurst, "request burst of one source address")
		fs.Float64Var(&o.SourceAuthFailureLimit, "source-auth-failure-limit", queryapi.DefaultSourceAuthFailureLimit, "failed authentications (401) per second of one source address; past it and --source-auth-failure-burst, its credentials are judged only if known without a new token review, others 429; 0 for no bound")
		fs.IntVar(&o.SourceAuthFailureBurst, "source-auth-failure-burst", queryapi.DefaultSourceAuthFailureBurst, "failed authentication burst of one source address")
		fs.IntVar(&o.MaxConnectionsPerSource, "max-connections-per-source", queryapi.DefaultMaxConnectionsPerSource, "open connections of one source address; past it, new ones are closed at once; 0 for no bound")
		fs.IntVar(&o.MaxTrackedSources, "max-tracked-sources", queryapi.DefaultMaxTrackedSources, "source addresses (IPv4 addresses, IPv6 /64s, or /56s and /48s holding many) whose budgets are kept, about 400 bytes each; when full, a new source takes the place of the least recently used one at rest (its budget full, no connection open), or else shares one budget with the other new sources; 0 for no bound")
		fs.IntVar(&o.Authentication.TokenReviewMaxInFlight, "token-review-max-in-flight", auth.DefaultTokenReviewMaxInFlight, "TokenReviews (--authentication-kubeconfig) at once of tokens not accepted within the last hour, as many more waiting; past them, 429; tokens accepted before have as many slots of their own")
		fs.IntVar(&o.SearchLimits.SnapshotsPerSubject, "max-snapshots-per-subject", store.DefaultSnapshotsPerSubject, "snapshots (OpenSearch point-in-times, the embedded store's index readers) one subject's paged queries hold between pages; past it, a first page closes the subject's least recently used idle one, whose continue token then answers 410 Expired (clients list again)")
		fs.IntVar(&o.SearchLimits.Snapshots, "max-snapshots", store.DefaultSnapshots, "snapshots of every subject together in this process; continue tokens hold at most three quarters, the rest is kept for the facade's own LISTs and watches' initial events; past it, the least recently used idle one of the subject holding the most is closed, never one of a subject within its fair share; with replicas sharing one OpenSearch, keep their sum below its search.max_open_pit_context (300)")
		fs.IntVar(&o.SearchLimits.FuzzySearchesPerSubject, "max-fuzzy-searches-per-subject", store.DefaultFuzzySearchesPerSubject, "searches with fuzzyName (a wildcard over every name of every index) one subject runs at once; past it, 429")
		fs.IntVar(&o.MaxWatchObjectsPerSubject, "max-watch-objects-per-subject", queryapi.DefaultMaxWatchObjectsPerSubject, "objects a subject's streaming watches (sendInitialEvents) track together, about 16 bytes each, to tell an object leaving the selectors; past it, a watch stops tracking and judges events as a watch resumed from a resourceVersion does")
	})
}
