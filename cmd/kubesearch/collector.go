package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/collector"
)

func collectorCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "collector",
		GroupID: componentsGroup,
		Short:   "List/watch member clusters into Kafka",
		Long: `List and watch what the ResourceRegistry files select in every member cluster and publish each
change to a Kafka topic, for the indexer. Members come from a kubeconfig (every context is one) or a
clusters file. The files are re-read every --reload-interval: a cluster or selector added or removed
starts or stops only that collection.`,
		Example: `  # Every context of a kubeconfig is a member; serve /status on 127.0.0.1:8081
  kubesearch collector --registry registry.yaml --kubeconfig members.kubeconfig \
    --kafka-brokers kafka-0:9092,kafka-1:9092

  # Members listed in a clusters file, Kafka over TLS with SCRAM credentials from files
  kubesearch collector --registry registries/ --clusters clusters.yaml --name collector-eu \
    --kafka-brokers kafka:9093 --kafka-ca-file ca.pem --kafka-sasl-mechanism scram-sha-512 \
    --kafka-username-file /secrets/username --kafka-password-file /secrets/password`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc {
		options := collectorFlags(g)
		return func(ctx context.Context, log *slog.Logger) error {
			o := options()
			o.Logger = log
			c, err := collector.New(o)
			if err != nil {
				return err
			}
			return c.Run(ctx)
		}
	})
}

// collectorFlags registers the collector's flags and returns the Options they set.
func collectorFlags(g flagGroups) func() collector.Options {
	var o collector.Options
	o.SetDefaults()
	brokers := stringList{"127.0.0.1:9092"}
	var qps float64
	g.add("Members", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.Registry, "registry", "", "ResourceRegistry file, or a folder of them (required unless --karmada-registries)")
		fs.BoolVar(&o.KarmadaRegistries, "karmada-registries", false, "also read the ResourceRegistry objects of the --karmada-kubeconfig control plane (stored in resourceregistries.karmada.kubesearch.io, served by the query API under search.karmada.io/v1alpha1), watching them, and write each one's status")
		fs.StringVar(&o.ClustersFile, "clusters", "", "clusters file listing the member clusters")
		fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose every context is a member cluster (instead of --clusters)")
		fs.StringVar(&o.KarmadaKubeconfig, "karmada-kubeconfig", "", "kubeconfig of a Karmada control plane whose Push-mode Cluster objects (cluster.karmada.io/v1alpha1) are the member clusters, with the token and caBundle of the Secrets they reference (instead of --clusters, --kubeconfig)")
		fs.DurationVar(&o.ReloadInterval, "reload-interval", o.ReloadInterval, "how often configuration files are checked for changes")
		fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", o.DiscoveryInterval, "how often each member's API resources are rediscovered")
	})
	g.add("Kafka", func(fs *pflag.FlagSet) {
		fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
		fs.StringVar(&o.Topic, "topic", o.Topic, "Kafka topic of the event stream")
		fs.IntVar(&o.TopicPartitions, "topic-partitions", o.TopicPartitions, "partitions of the topic when the collector creates it")
		fs.IntVar(&o.MaxMessageBytes, "kafka-max-message-bytes", o.MaxMessageBytes, "largest event published; at most the broker's message.max.bytes")
		fs.StringVar(&o.Name, "name", "", "this collector's name in the ledger (<topic>.collectors), unique per collector (its replicas share it, see --lease); with it, a member removed while the collector was down is purged at its next start")
		fs.BoolVar(&o.Lease, "lease", false, "run as one of several replicas of the collector --name (same topic and configuration): the replicas share the member clusters through a Kafka consumer group, each collected by one replica at a time and taken over within about 15 s when its replica dies or hangs")
	})
	kafkaSecurityFlags(g, &o.Kafka)
	g.add("Tuning", func(fs *pflag.FlagSet) {
		fs.Int64Var(&o.PageSize, "page-size", o.PageSize, "objects per list request")
		fs.Float64Var(&qps, "qps", float64(o.QPS), "requests per second to each member cluster")
		fs.IntVar(&o.Burst, "burst", o.Burst, "request burst to each member cluster")
		fs.IntVar(&o.PublishBuffer, "publish-buffer", o.PublishBuffer, "events buffered for Kafka before collection blocks")
		fs.IntVar(&o.PublishBufferBytes, "publish-buffer-bytes", o.PublishBufferBytes, "bytes of events buffered for Kafka before collection blocks (what bounds the collector's memory; a write takes at most half)")
		fs.IntVar(&o.PublishBatch, "publish-batch", o.PublishBatch, "most events written to Kafka at once")
	})
	g.add("Serving", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ListenAddr, "listen", "127.0.0.1:8081", "address of /healthz and /readyz (open), /metrics and /status (with credentials once a Security flag authenticates; else a warning off loopback); empty disables")
		fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "longest flush of buffered events on shutdown")
	})
	endpointsFlags(g, &o.Endpoints)
	return func() collector.Options {
		o.Brokers, o.QPS = brokers, float32(qps)
		return o
	}
}
