package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/standalone"
)

func standaloneCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "standalone",
		GroupID: componentsGroup,
		Short:   "The whole pipeline in one process on an embedded store: REST search and the facade over every member",
		Long: `Run the collector, the indexer and the query API in one process: an in-process log instead of
Kafka, an embedded on-disk index instead of OpenSearch, the same configuration files and APIs.
Without flags, every context of the first file of $KUBECONFIG (else ~/.kube/config) is a member,
the default registry selects pods, workloads, services, ingresses, nodes, namespaces, configmaps,
events and PVCs, and REST search and the Kubernetes facade listen on 127.0.0.1:8080.

Anonymous access is the default on a loopback address only (and said loudly at start): on any
other address it is off unless --anonymous is given.`,
		Example: `  # Every member of ~/.kube/config on a laptop
  kubesearch standalone
  kubesearch kubeconfig --server http://127.0.0.1:8080 > /tmp/fleet.kubeconfig
  kubectl --kubeconfig /tmp/fleet.kubeconfig get deploy -A

  # Locked down on every interface: HTTPS and bearer tokens
  kubesearch standalone --listen 0.0.0.0:8443 --anonymous=false --token-auth-file tokens.csv \
    --tls-cert-file tls.crt --tls-private-key-file tls.key`,
	}
	return subcommand(cmd, env, func(g flagGroups) runFunc {
		options := standaloneFlags(g)
		return func(ctx context.Context, log *slog.Logger) error {
			o := options()
			o.Logger = log
			s, err := standalone.New(o)
			if err != nil {
				return err
			}
			return s.Run(ctx)
		}
	})
}

// standaloneFlags registers the standalone mode's flags and returns the Options they set; what it
// does at start is printed on the command's output.
func standaloneFlags(g flagGroups) func() standalone.Options {
	var o standalone.Options
	o.Collector.SetDefaults()
	var qps float64
	g.add("Members", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose every context is a member cluster (default: the first file of $KUBECONFIG, else ~/.kube/config)")
		fs.StringVar(&o.ClustersFile, "clusters", "", "clusters file listing the member clusters (instead of --kubeconfig)")
		fs.StringVar(&o.KarmadaKubeconfig, "karmada-kubeconfig", "", "kubeconfig of a Karmada control plane whose Push-mode Cluster objects are the member clusters (instead of --kubeconfig, --clusters)")
		fs.BoolVar(&o.KarmadaRegistries, "karmada-registries", false, "read the ResourceRegistry objects the control plane of --karmada-kubeconfig stores (resourceregistries.karmada.kubesearch.io), and serve them under search.karmada.io/v1alpha1 to users its aggregation layer names")
		fs.StringVar(&o.Registry, "registry", "", "ResourceRegistry file, or a folder of them (default: pods, workloads, services, ingresses, nodes, namespaces, configmaps, events and PVCs of every member; none with --karmada-registries)")
	})
	g.add("Serving", func(fs *pflag.FlagSet) {
		fs.StringVar(&o.DataDir, "data-dir", "", "folder of the index and what survives a restart (default: "+standalone.DefaultDataDir()+")")
		fs.StringVar(&o.ListenAddr, "listen", "127.0.0.1:8080", "address of REST search, the Kubernetes facade, /healthz, /readyz and /metrics")
	})
	securityFlags(g, &o.QueryAPI, true, "let requests without credentials in as system:anonymous: the default, for a laptop's 127.0.0.1, and said loudly at start; --anonymous=false with --token-auth-file or --client-ca-file locks it down")
	g.add("Tuning", func(fs *pflag.FlagSet) {
		fs.Int64Var(&o.Collector.PageSize, "page-size", o.Collector.PageSize, "objects per list request to a member")
		fs.Float64Var(&qps, "qps", float64(o.Collector.QPS), "requests per second to each member cluster")
		fs.IntVar(&o.Collector.Burst, "burst", o.Collector.Burst, "request burst to each member cluster")
		fs.Var(&funcValue{typ: "events|size", set: func(v string) error {
			events, bytes, err := queryapi.ParseWatchWindow(v)
			o.QueryAPI.WatchWindowEvents, o.QueryAPI.WatchWindowBytes = events, bytes
			return err
		}}, "watch-window", "bound of the watch cache's window of recent events: a number of events or a size such as 128Mi (default)")
	})
	return func() standalone.Options {
		o.Collector.QPS, o.Progress = float32(qps), g.cmd.OutOrStdout()
		// Anonymous access is the default on loopback only: listening wider needs credentials
		// unless --anonymous says otherwise (on the command line, in the environment or the file).
		if !g.cmd.Flags().Changed("anonymous") && !loopback(o.ListenAddr) {
			o.QueryAPI.Authentication.Anonymous = false
		}
		return o
	}
}

// loopback says whether a listen address is on the loopback interface only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
