// Command controllerruntime runs a controller-runtime manager, with its cache, against one context
// of a kubeconfig (in TestRealClients, a view of the kubesearch facade) and a reconciler on Pods that
// reports what it sees, one JSON line on stdout each: every reconcile (the Pod as the manager's cache
// holds it, or that it is gone), the cache's Pods once it has synced, and every Warning the server
// sent. It runs until SIGTERM or SIGINT. It decides nothing: the test compares what it reports with
// the members. client-go's feature gates apply as usual (KUBE_FEATURE_WatchListClient=false makes
// the cache LIST instead of streaming its list).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// clusterAnnotation names the member a facade object came from.
const clusterAnnotation = "resource.karmada.io/cached-from-cluster"

// report is one line of output.
type report struct {
	Kind    string            `json:"kind"` // reconcile, synced or warning
	Key     string            `json:"key,omitempty"`
	Cluster string            `json:"cluster,omitempty"`
	UID     string            `json:"uid,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Gone    bool              `json:"gone,omitempty"`
	Keys    []string          `json:"keys,omitempty"` // synced: namespace/name of every cached Pod
	Text    string            `json:"text,omitempty"` // warning
}

// reporter writes reports as JSON lines; it is also the rest.Config's warning handler, so every
// Warning header of every response (the cache's lists and watches included) is reported.
type reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
	log *slog.Logger
}

func (r *reporter) report(rep report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enc.Encode(rep); err != nil {
		r.log.Error("write report", "err", err)
	}
}

func (r *reporter) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	r.report(report{Kind: "warning", Text: text})
}

// podReconciler reports each Pod it is asked about as the manager's cache holds it.
type podReconciler struct {
	cache client.Reader
	out   *reporter
}

func (p *podReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	err := p.cache.Get(ctx, req.NamespacedName, &pod)
	switch {
	case apierrors.IsNotFound(err):
		p.out.report(report{Kind: "reconcile", Key: req.String(), Gone: true})
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("get pod %s: %w", req, err)
	}
	p.out.report(report{Kind: "reconcile", Key: req.String(), Cluster: pod.Annotations[clusterAnnotation],
		UID: string(pod.UID), Labels: pod.Labels})
	return reconcile.Result{}, nil
}

func main() {
	// A FlagSet of its own: controller-runtime registers --kubeconfig on flag.CommandLine.
	flags := flag.NewFlagSet("controllerruntime", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig file")
	kubeContext := flags.String("context", "", "context of the kubeconfig (default: its current one)")
	_ = flags.Parse(os.Args[1:]) // ExitOnError: it exits itself
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *kubeconfig, *kubeContext, os.Stdout); err != nil {
		log.Error("controllerruntime", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, kubeconfig, kubeContext string, stdout io.Writer) error {
	if kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	out := &reporter{enc: json.NewEncoder(stdout), log: log}
	cfg.WarningHandlerWithContext = out
	// Nothing served: no metrics or probe listeners, no leader election (a read-only facade has
	// no Leases to take).
	mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Named("pods").
		Complete(&podReconciler{cache: mgr.GetCache(), out: out}); err != nil {
		return fmt.Errorf("new controller: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(ctx) })
	g.Go(func() error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopped before
		}
		var pods corev1.PodList
		if err := mgr.GetCache().List(ctx, &pods); err != nil {
			return fmt.Errorf("list the cache's pods: %w", err)
		}
		keys := make([]string, 0, len(pods.Items))
		for _, p := range pods.Items {
			keys = append(keys, p.Namespace+"/"+p.Name)
		}
		slices.Sort(keys)
		out.report(report{Kind: "synced", Keys: keys})
		return nil
	})
	return g.Wait()
}
