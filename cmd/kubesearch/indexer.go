package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/indexer"
	"github.com/kubesearch/kubesearch/mappings"
)

func indexerCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "indexer",
		GroupID: componentsGroup,
		Short:   "Consume the event stream into OpenSearch",
		Long: `Consume the collectors' event topic in a consumer group (--group: replicas share the partitions)
and write each object to the OpenSearch index kubernetes-<kind>, garbage-collecting what a member no
longer has. The index templates come from mappings/ and are installed at start; events that can
never be indexed go to the dead-letter topic.`,
		Example: `  # One replica against a local Kafka and OpenSearch, metrics on 127.0.0.1:8082
  kubesearch indexer --kafka-brokers 127.0.0.1:9092 --opensearch-addresses http://127.0.0.1:9200

  # OpenSearch over TLS with credentials from a mounted Secret, three primary shards per index
  kubesearch indexer --kafka-brokers kafka:9092 --opensearch-addresses https://opensearch:9200 \
    --opensearch-ca-file /etc/opensearch/ca.pem --opensearch-secret-dir /secrets/opensearch \
    --index-shards 3 --index-replicas 1 --listen :8082`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc {
		options := indexerFlags(g)
		return func(ctx context.Context, log *slog.Logger) error {
			o := options()
			o.Logger = log
			ix, err := indexer.New(o)
			if err != nil {
				return err
			}
			return ix.Run(ctx)
		}
	})
}

// indexerFlags registers the indexer's flags and returns the Options they set.
func indexerFlags(g flagGroups) func() indexer.Options {
	var o indexer.Options
	o.SetDefaults()
	o.DeadLetterTopic = "" // default follows --topic
	brokers := stringList{"127.0.0.1:9092"}
	var addresses stringList
	g.add("Kafka", func(fs *pflag.FlagSet) {
		fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
		fs.StringVar(&o.Topic, "topic", o.Topic, "Kafka topic of the event stream")
		fs.StringVar(&o.GroupID, "group", o.GroupID, "Kafka consumer group shared by the indexer replicas")
		fs.StringVar(&o.DeadLetterTopic, "dlq-topic", "", "topic of events that can never be indexed (default <topic>.dlq)")
		fs.StringVar(&o.ChangesTopic, "changes-topic", "", "publish the change feed (every change written to the index, which the query API's watch cache follows) to this topic, with as many partitions as --topic (default <topic>.changes; none: no feed)")
		fs.IntVar(&o.FetchMaxBytes, "kafka-fetch-max-bytes", o.FetchMaxBytes, "largest fetch from one partition; at least 4 MiB, above the largest event")
		fs.IntVar(&o.MaxMessageBytes, "kafka-max-message-bytes", o.MaxMessageBytes, "largest dead letter (an event plus headers); the dead-letter topic's max.message.bytes when the indexer creates it")
	})
	kafkaSecurityFlags(g, &o.Kafka)
	g.add("OpenSearch", func(fs *pflag.FlagSet) {
		fs.Var(&addresses, "opensearch-addresses", "comma-separated OpenSearch node URLs (default: the registries' spec.backendStore.openSearch.addresses)")
		fs.StringVar(&o.Registry, "registry", "", "ResourceRegistry file or folder whose spec.backendStore.openSearch names the OpenSearch to write to")
		fs.StringVar(&o.OpenSearch.UsernameFile, "opensearch-username-file", "", "file holding the OpenSearch username")
		fs.StringVar(&o.OpenSearch.PasswordFile, "opensearch-password-file", "", "file holding the OpenSearch password")
		fs.StringVar(&o.OpenSearch.SecretDir, "opensearch-secret-dir", "", "mounted Secret folder with files username (or userName) and password")
		fs.StringVar(&o.OpenSearch.CAFile, "opensearch-ca-file", "", "PEM CA certificates that sign OpenSearch's certificate")
		fs.BoolVar(&o.OpenSearch.InsecureSkipVerify, "opensearch-insecure-skip-verify", false, "accept any OpenSearch certificate; for demos only")
	})
	g.add("Indices", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.Index.Prefix, "index-prefix", "", "prefix of every index and template name, for installations sharing an OpenSearch")
		fs.IntVar(&o.Index.Shards, "index-shards", 1, "primary shards of each new index")
		o.Index.Replicas = mappings.AutoReplicas
		fs.Var(&funcValue{typ: "auto|N", value: "auto", set: func(v string) error {
			if v == "auto" {
				o.Index.Replicas = mappings.AutoReplicas
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("want auto or a number of replicas, got %q", v)
			}
			o.Index.Replicas = n
			return nil
		}}, "index-replicas", "replicas of each new index: auto (one once OpenSearch has a second data node) or a number")
		fs.DurationVar(&o.Index.RefreshInterval, "index-refresh-interval", 0, "refresh_interval of new indices (0: 1s; negative: off)")
	})
	g.add("Tuning", func(fs *pflag.FlagSet) {
		fs.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "most events per batch (one commit)")
		fs.IntVar(&o.BatchBytes, "batch-bytes", o.BatchBytes, "most bytes of events per batch; a larger event makes a batch alone")
		fs.DurationVar(&o.BatchInterval, "batch-interval", o.BatchInterval, "how long a batch waits for more events before it is written while the indexer is idle (while it writes, the next batch fills meanwhile)")
		fs.DurationVar(&o.WatermarkInterval, "watermark-interval", o.WatermarkInterval, "how often writes are made searchable and watermarks stored")
		fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "longest OpenSearch request")
	})
	g.add("Serving", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ListenAddr, "listen", "127.0.0.1:8082", "address of /healthz and /readyz (open) and /metrics (with credentials once a Security flag authenticates; else a warning off loopback); empty disables")
		fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "longest wait to write and commit the batch in flight on shutdown")
	})
	endpointsFlags(g, &o.Endpoints)
	return func() indexer.Options {
		o.Brokers, o.OpenSearchAddresses = brokers, addresses
		return o
	}
}
