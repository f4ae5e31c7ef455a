package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/kubesearch/kubesearch/collector"
)

func collectorCommand(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
	var o collector.Options
	o.SetDefaults()
	brokers := stringList{"127.0.0.1:9092"}
	fs.StringVar(&o.Registry, "registry", "", "ResourceRegistry file, or a folder of them (required)")
	fs.StringVar(&o.ClustersFile, "clusters", "", "clusters file listing the member clusters")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose every context is a member cluster (instead of --clusters)")
	fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
	kafkaSecurityFlags(fs, &o.Kafka)
	fs.StringVar(&o.Topic, "topic", o.Topic, "Kafka topic of the event stream")
	fs.IntVar(&o.TopicPartitions, "topic-partitions", o.TopicPartitions, "partitions of the topic when the collector creates it")
	fs.IntVar(&o.MaxMessageBytes, "kafka-max-message-bytes", o.MaxMessageBytes, "largest event published; at most the broker's message.max.bytes")
	fs.IntVar(&o.PublishBuffer, "publish-buffer", o.PublishBuffer, "events buffered for Kafka before collection blocks")
	fs.IntVar(&o.PublishBatch, "publish-batch", o.PublishBatch, "most events written to Kafka at once")
	fs.Int64Var(&o.PageSize, "page-size", o.PageSize, "objects per list request")
	qps := fs.Float64("qps", float64(o.QPS), "requests per second to each member cluster")
	fs.IntVar(&o.Burst, "burst", o.Burst, "request burst to each member cluster")
	fs.StringVar(&o.ListenAddr, "listen", "127.0.0.1:8081", "address of /healthz, /readyz, /metrics and /status; empty disables")
	fs.DurationVar(&o.ReloadInterval, "reload-interval", o.ReloadInterval, "how often configuration files are checked for changes")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", o.DiscoveryInterval, "how often each member's API resources are rediscovered")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "longest flush of buffered events on shutdown")
	fs.StringVar(&o.Name, "name", "", "this collector's name in the ledger (<topic>.collectors), unique per collector; with it, a member removed while the collector was down is purged at its next start")
	return func(ctx context.Context, log *slog.Logger) error {
		o.Brokers, o.QPS, o.Logger = brokers, float32(*qps), log
		c, err := collector.New(o)
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
}
