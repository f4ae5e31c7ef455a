package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/simulate"
)

func simulateCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "simulate",
		GroupID: toolsGroup,
		Short:   "Write a simulated fleet to the event stream, as its collectors would",
		Long: `Write to the Kafka topic what collectors would write for --clusters member clusters of --objects
objects each (Pods, Deployments, ReplicaSets, Services, ConfigMaps, Events, two custom resources
whose served versions differ between clusters, their CustomResourceDefinitions): the ledger's
records, a list per cluster and resource (ADDED events, a SYNC marker), then --churn-rate changes
per second for --churn-duration. The fleet is deterministic from --seed. Clusters are named
<--cluster-prefix><number> (sim-0001, ...), apart from real members, which can share the topic.

Started again with fewer --kinds or --clusters, it purges what it no longer simulates, as a
restarted collector does; --clusters 0 removes every simulated cluster. With --listen it serves the
collectors' /status of the simulated clusters (give it to the query API's --collector-status-urls)
and keeps running until interrupted; without, it ends once the churn is over.`,
		Example: `  # 200 clusters of 2,000 objects, then 100 changes per second until Ctrl-C, /status on :8083
  kubesearch simulate --kafka-brokers 127.0.0.1:9092 --clusters 200 --objects 2000 \
    --churn-rate 100 --listen 127.0.0.1:8083

  # Remove every simulated cluster from the index again
  kubesearch simulate --kafka-brokers 127.0.0.1:9092 --clusters 0`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc {
		options := simulateFlags(g)
		return func(ctx context.Context, log *slog.Logger) error {
			o := options()
			o.Logger = log
			s, err := simulate.New(o)
			if err != nil {
				return err
			}
			return s.Run(ctx)
		}
	})
}

// simulateFlags registers the simulator's flags and returns the Options they set.
func simulateFlags(g flagGroups) func() simulate.Options {
	var o simulate.Options
	o.SetDefaults()
	o.Logger = nil
	o.Clusters, o.Objects, o.Seed = 10, 1000, 1
	brokers := stringList{"127.0.0.1:9092"}
	var kinds stringList
	g.add("Fleet", func(fs *pflag.FlagSet) {
		fs.Uint64Var(&o.Seed, "seed", o.Seed, "makes the fleet: the same seed, the same clusters, objects and churn operations")
		fs.IntVar(&o.Clusters, "clusters", o.Clusters, "member clusters simulated; 0 removes every cluster an earlier simulation of this --name made")
		fs.IntVar(&o.Objects, "objects", o.Objects, "objects each cluster holds at start, about half of them Pods")
		fs.StringVar(&o.ClusterPrefix, "cluster-prefix", o.ClusterPrefix, "cluster names are the prefix and a number: sim-0001, ...")
		fs.Var(&kinds, "kinds", "comma-separated resources simulated (default all): "+strings.Join(simulate.KindNames(), ","))
		fs.Float64Var(&o.ChurnRate, "churn-rate", 0, "changes per second across the fleet after the lists (creates, updates, deletes)")
		fs.DurationVar(&o.ChurnDuration, "churn-duration", 0, "how long the churn lasts (0: until interrupted)")
	})
	g.add("Kafka", func(fs *pflag.FlagSet) {
		fs.Var(&brokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
		fs.StringVar(&o.Topic, "topic", o.Topic, "Kafka topic of the event stream")
		fs.IntVar(&o.TopicPartitions, "topic-partitions", o.TopicPartitions, "partitions of the topic when the simulator creates it")
		fs.IntVar(&o.MaxMessageBytes, "kafka-max-message-bytes", o.MaxMessageBytes, "max.message.bytes of the topic when the simulator creates it")
		fs.StringVar(&o.Name, "name", o.Name, "the simulator's name in the ledger (<topic>.collectors), as a collector's --name")
	})
	kafkaSecurityFlags(g, &o.Kafka)
	g.add("Tuning", func(fs *pflag.FlagSet) {
		fs.IntVar(&o.Writers, "writers", o.Writers, "clusters published at once, each by its own writer")
		fs.IntVar(&o.PublishBatch, "publish-batch", o.PublishBatch, "most events one writer writes to Kafka at once")
	})
	g.add("Serving", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.ListenAddr, "listen", "", "address of /healthz, /readyz (open) and the collectors' /status of the simulated clusters; empty serves nothing")
		fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "longest stop of the HTTP server")
	})
	endpointsFlags(g, &o.Endpoints)
	return func() simulate.Options {
		o.Brokers, o.Kinds = brokers, kinds
		return o
	}
}
