package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"

	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/standalone"
)

func standaloneCommand(fs *flag.FlagSet) func(context.Context, *slog.Logger) error {
	var o standalone.Options
	o.Collector.SetDefaults()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose every context is a member cluster (default: the first file of $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.ClustersFile, "clusters", "", "clusters file listing the member clusters (instead of --kubeconfig)")
	fs.StringVar(&o.Registry, "registry", "", "ResourceRegistry file, or a folder of them (default: pods, workloads, services, ingresses, nodes, namespaces, configmaps, events and PVCs of every member)")
	fs.StringVar(&o.DataDir, "data-dir", "", "folder of the index and what survives a restart (default: "+standalone.DefaultDataDir()+")")
	fs.StringVar(&o.ListenAddr, "listen", "127.0.0.1:8080", "address of REST search, the Kubernetes facade, /healthz, /readyz and /metrics")
	securityFlags(fs, &o.QueryAPI, true, "let requests without credentials in as system:anonymous: the default, for a laptop's 127.0.0.1, and said loudly at start; --anonymous=false with --token-auth-file or --client-ca-file locks it down")
	fs.Int64Var(&o.Collector.PageSize, "page-size", o.Collector.PageSize, "objects per list request to a member")
	qps := fs.Float64("qps", float64(o.Collector.QPS), "requests per second to each member cluster")
	fs.IntVar(&o.Collector.Burst, "burst", o.Collector.Burst, "request burst to each member cluster")
	fs.Func("watch-window", "bound of the watch cache's window of recent events: a number of events or a size such as 128Mi (default)", func(v string) error {
		events, bytes, err := queryapi.ParseWatchWindow(v)
		o.QueryAPI.WatchWindowEvents, o.QueryAPI.WatchWindowBytes = events, bytes
		return err
	})
	return func(ctx context.Context, log *slog.Logger) error {
		o.Collector.QPS, o.Logger, o.Progress = float32(*qps), log, os.Stdout
		// Anonymous access is the default on loopback only: listening wider needs credentials
		// unless --anonymous says otherwise.
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "anonymous" })
		if !explicit && !loopback(o.ListenAddr) {
			o.QueryAPI.Authentication.Anonymous = false
		}
		s, err := standalone.New(o)
		if err != nil {
			return err
		}
		return s.Run(ctx)
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
