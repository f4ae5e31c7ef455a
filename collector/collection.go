package collector

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// collection lists and watches one scope with a client-go Reflector into a store.
type collection struct {
	scope    scope
	client   dynamic.Interface
	store    *store
	status   *statusEntry
	pageSize int64
	log      *slog.Logger
	metrics  *metrics
}

// run blocks until ctx is done. The reflector retries lists and watches with backoff on its own.
func (c *collection) run(ctx context.Context) {
	lw := &listWatch{c: c}
	logger := klog.FromContext(ctx)
	r := cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, c.store, cache.ReflectorOptions{
		Name:            fmt.Sprintf("%s/%s", c.scope.cluster, c.scope.gvr),
		TypeDescription: c.scope.gvr.String(),
		Logger:          &logger,
	})
	r.RunWithContext(ctx)
}

// listWatch pages through a list itself, streaming each page into the store, so neither the collector
// nor the reflector ever holds a whole list. It reports the outcome of every list and watch call to the
// collection's status, since the reflector keeps its errors to itself.
type listWatch struct{ c *collection }

// IsWatchListSemanticsUnSupported turns off client-go's streaming list for this reflector: the
// reflector would gather the streamed objects in a temporary store, a full copy of the list in memory.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *listWatch) resource() dynamic.ResourceInterface {
	nri := lw.c.client.Resource(lw.c.scope.gvr)
	if lw.c.scope.namespace != "" {
		return nri.Namespace(lw.c.scope.namespace)
	}
	return nri
}

func (lw *listWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(lw.c.store.ctx, options)
}

func (lw *listWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(lw.c.store.ctx, options)
}

// ListWithContext lists the latest state (resourceVersion "", a consistent read — never older than
// what the reflector asked for), page by page, publishing as it goes. It returns an empty list carrying
// the list's resourceVersion; the reflector hands that to store.Replace, which closes the epoch.
func (lw *listWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	c := lw.c
	epoch := c.store.beginList()
	start, lastLog := time.Now(), time.Now()
	opts := metav1.ListOptions{Limit: c.pageSize, LabelSelector: options.LabelSelector, FieldSelector: options.FieldSelector}
	count, rv := 0, ""
	for {
		page, err := lw.resource().List(ctx, opts)
		if err != nil {
			c.status.failed(fmt.Errorf("list %s: %w", c.scope.gvr.Resource, err))
			return nil, err
		}
		if rv == "" {
			// Every page of a paginated list is served at the first page's resourceVersion.
			rv = page.GetResourceVersion()
		}
		for i := range page.Items {
			if err := c.store.listed(&page.Items[i]); err != nil {
				return nil, err
			}
		}
		count += len(page.Items)
		c.metrics.listed.WithLabelValues(c.scope.cluster, c.scope.gvr.Resource).Set(float64(count))
		if time.Since(lastLog) >= 5*time.Second {
			c.log.Info("listing", "listed", count, "elapsed", time.Since(start).Round(time.Millisecond))
			lastLog = time.Now()
		}
		opts.Continue = page.GetContinue()
		if opts.Continue == "" {
			break
		}
	}
	c.log.Info("listed", "objects", count, "resourceVersion", rv, "epoch", epoch, "elapsed", time.Since(start).Round(time.Millisecond))
	list := &unstructured.UnstructuredList{}
	list.SetResourceVersion(rv)
	return list, nil
}

func (lw *listWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.resource().Watch(ctx, options)
	if err != nil {
		lw.c.status.failed(fmt.Errorf("watch %s: %w", lw.c.scope.gvr.Resource, err))
		return nil, err
	}
	lw.c.status.running()
	return w, nil
}
