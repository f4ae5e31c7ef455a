package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// collection lists and watches one scope with a client-go Reflector into a store.
type collection struct {
	scope    scope
	client   dynamic.Interface
	raw      rest.Interface
	store    *store
	status   *statusEntry
	pageSize int64
	log      *slog.Logger
	metrics  *metrics
	// notFound, when set, learns that a list answered 404: the kind may no longer be served (a CRD
	// deleted), which only the member's discovery can tell; the reflector retries meanwhile.
	notFound func()
}

// run blocks until ctx is done. The reflector retries lists and watches with backoff on its own.
func (c *collection) run(ctx context.Context) {
	lw := &listWatch{c: c}
	logger := klog.FromContext(ctx)
	bo := reflectorBackoff()
	r := cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, c.store, cache.ReflectorOptions{
		Name:            fmt.Sprintf("%s/%s", c.scope.cluster, c.scope.gvr),
		TypeDescription: c.scope.gvr.String(),
		Logger:          &logger,
		Backoff:         &bo,
	})
	r.RunWithContext(ctx)
}

// reflectorBackoff paces a collection's retries while its member is away. client-go's default
// (0.8 s doubling to 30 s, with a jitter of up to 100 %) waits up to a minute between tries after an
// outage of half a minute, so a member whose kube-apiserver came back was collected again only
// 30–90 s later (make chaos: 92 s after a kill -9 and restart). Capped at 5 s like the collector's
// other retries, a member is collected again within about 6 s of answering, at the cost of one
// list or watch every 5 s per collection while it is away.
func reflectorBackoff() wait.Backoff {
	return wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
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
//
// Pages are read as bytes and their items decoded one at a time: a page decoded whole (as the dynamic
// client does) costs about ten times its JSON in memory, and was the collector's peak. The next
// pages are fetched while one is published (fetchPages): the member serves them meanwhile, so a
// list takes about as long as the slower of the two, not their sum.
func (lw *listWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	c := lw.c
	epoch, err := c.store.beginList()
	if err != nil {
		c.status.failed(fmt.Errorf("list %s: %w", c.scope.gvr.Resource, err))
		return nil, err
	}
	start, lastLog := time.Now(), time.Now()
	count, rv, cont := 0, "", ""
	var total int64 // as the member reports it; 0 unknown
	c.status.listProgress(0, 0)
	apiVersion := c.scope.gvr.GroupVersion().String()
	fetchCtx, stopFetch := context.WithCancel(ctx)
	// One page published, one waiting, one being fetched: the member, which a list waits on (the
	// publisher keeps up), is never left idle while a page is published more slowly than the next is
	// served — a GC, a Publish waiting for Kafka, the scheduler of two busy cores. Unbuffered, the
	// fetcher stood still from a page's arrival until the one before it was published: 2–7% of a
	// 3,000-Pod list's time, traced by hand on the test bed.
	pages := make(chan listPage, 1)
	var fetcher sync.WaitGroup
	fetcher.Go(func() {
		defer close(pages)
		lw.fetchPages(fetchCtx, options, pages)
	})
	defer func() {
		stopFetch()
		for range pages {
		}
		fetcher.Wait()
	}()
	for pg := range pages {
		if pg.err != nil {
			c.status.failed(fmt.Errorf("list %s: %w", c.scope.gvr.Resource, pg.err))
			if apierrors.IsNotFound(pg.err) && c.notFound != nil {
				c.notFound()
			}
			return nil, pg.err
		}
		page := pg.body
		if rv == "" {
			// Every page of a paginated list is served at the first page's resourceVersion.
			// Cloned: a part of the page would keep all of it.
			rv = strings.Clone(gjson.Get(page, "metadata.resourceVersion").String())
		}
		var itemErr error
		gjson.Get(page, "items").ForEach(func(_, item gjson.Result) bool {
			if it, ok := readRawItem(item.Raw, apiVersion, c.scope.kind, c.store.scope.redact); ok {
				if itemErr = c.store.listedRaw(it); itemErr != nil {
					return false
				}
				count++
				return true
			}
			obj := &unstructured.Unstructured{}
			// apimachinery's decoder keeps integers int64, as the dynamic client's does.
			if itemErr = utiljson.Unmarshal([]byte(item.Raw), &obj.Object); itemErr != nil {
				itemErr = fmt.Errorf("decode %s item: %w", c.scope.gvr.Resource, itemErr)
				return false
			}
			// List items carry no apiVersion and kind; the objects published must.
			obj.SetAPIVersion(apiVersion)
			obj.SetKind(c.scope.kind)
			if itemErr = c.store.listed(obj); itemErr != nil {
				return false
			}
			count++
			return true
		})
		if itemErr != nil {
			return nil, itemErr
		}
		c.metrics.listed.WithLabelValues(c.scope.cluster, c.scope.gvr.Resource).Set(float64(count))
		cont = pg.cont
		if t := listTotal(page, count, cont == ""); t != 0 {
			total = t
		}
		c.status.listProgress(count, total)
		if time.Since(lastLog) >= 5*time.Second {
			c.log.Info("listing", "listed", count, "elapsed", time.Since(start).Round(time.Millisecond))
			lastLog = time.Now()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the fetcher stopped without the last page
	}
	c.log.Info("listed", "objects", count, "resourceVersion", rv, "epoch", epoch, "elapsed", time.Since(start).Round(time.Millisecond))
	list := &unstructured.UnstructuredList{}
	list.SetResourceVersion(rv)
	return list, nil
}

// listPage is one page of a list as fetchPages hands it over: its JSON and continue token, or why
// it could not be fetched. The JSON is a string, made once from the bytes read, so that gjson reads
// the page where it is: gjson.GetBytes copies what it finds, and a copy of a page's items (1.2 MiB
// for 100 Pods) lived beside the page while it was published.
type listPage struct {
	body string
	cont string
	err  error
}

// fetchPages fetches the pages of a list one after another into pages, each as soon as the previous
// one is queued, until the last page, an error (sent as the last page), or ctx's end.
func (lw *listWatch) fetchPages(ctx context.Context, options metav1.ListOptions, pages chan<- listPage) {
	c := lw.c
	cont := ""
	for {
		req := c.raw.Get().AbsPath(lw.path()...).Param("limit", strconv.FormatInt(c.pageSize, 10))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if options.LabelSelector != "" {
			req = req.Param("labelSelector", options.LabelSelector)
		}
		if options.FieldSelector != "" {
			req = req.Param("fieldSelector", options.FieldSelector)
		}
		raw, err := req.DoRaw(ctx)
		var pg listPage
		if err != nil {
			pg = listPage{err: statusError(raw, err)}
		} else {
			page := string(raw) // the bytes are garbage from here on
			// metadata comes first in a list: found without reading the items. Cloned: a part of
			// the page would keep all of it.
			cont = strings.Clone(gjson.Get(page, "metadata.continue").String())
			pg = listPage{body: page, cont: cont}
		}
		select {
		case pages <- pg:
		case <-ctx.Done():
			return
		}
		if err != nil || cont == "" {
			return
		}
	}
}

// listTotal is the size of the whole list as the member reports it after a page: the objects read so
// far plus the page's remainingItemCount, which apiservers set on pages of unfiltered lists only; 0
// when unknown. After the last page it is what was read.
func listTotal(page string, read int, last bool) int64 {
	if last {
		return int64(read)
	}
	if rem := gjson.Get(page, "metadata.remainingItemCount"); rem.Exists() {
		return int64(read) + rem.Int()
	}
	return 0
}

// path is the REST path of the scope's collection.
func (lw *listWatch) path() []string { return resourcePath(lw.c.scope.gvr, lw.c.scope.namespace) }

// resourcePath is the REST path of a resource's collection: /api/v1/... for the core group,
// /apis/<group>/... otherwise, with /namespaces/<ns> when namespace is set.
func resourcePath(gvr schema.GroupVersionResource, namespace string) []string {
	p := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		p = []string{"/api", gvr.Version}
	}
	if namespace != "" {
		p = append(p, "namespaces", namespace)
	}
	return append(p, gvr.Resource)
}

func (lw *listWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	if err := lw.wentBack(ctx, options.ResourceVersion); err != nil {
		lw.c.status.failed(fmt.Errorf("watch %s: %w", lw.c.scope.gvr.Resource, err))
		return nil, err
	}
	w, err := lw.resource().Watch(ctx, options)
	if err != nil {
		lw.c.status.failed(fmt.Errorf("watch %s: %w", lw.c.scope.gvr.Resource, err))
		if apierrors.IsNotFound(err) && lw.c.notFound != nil {
			lw.c.notFound()
		}
		return nil, err
	}
	lw.c.status.running()
	return w, nil
}

// wentBack answers 410 Gone when the member's resourceVersion is below the one a watch would start
// from: its etcd was restored from a backup without --bump-revision, or the cluster rebuilt.
// kube-apiserver accepts a watch from a resourceVersion it has not reached and sends nothing until its
// counter passes it, so every change until then would be skipped without a word. The 410 makes the
// reflector list again: a new epoch in the member's new numbering, which the epoch rule carries
// through the index and the watch caches. Asking costs a consistent list of one object per watch
// the reflector starts (every few minutes per collection). When the question fails, so does the
// watch, and the reflector tries again after its backoff: a watch let through then would be accepted
// by a member just restored — whose kube-apiserver answers the watch but not yet the list, as it
// starts — and sent nothing for minutes (found in CI: the restore test's informer waited 3 minutes
// for a collection that never listed again).
func (lw *listWatch) wentBack(ctx context.Context, from string) error {
	seen, err := strconv.ParseInt(from, 10, 64)
	if err != nil || seen <= 0 {
		return nil
	}
	page, err := lw.c.raw.Get().AbsPath(lw.path()...).Param("limit", "1").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("ask the member's resourceVersion before watching from %d: %w", seen, statusError(page, err))
	}
	now, err := strconv.ParseInt(gjson.GetBytes(page, "metadata.resourceVersion").String(), 10, 64)
	if err != nil || now >= seen {
		return nil
	}
	lw.c.log.Warn("the member's resourceVersions went back (etcd restored or the cluster rebuilt): listing again",
		"cluster", lw.c.scope.cluster, "gvr", lw.c.scope.gvr.String(), "namespace", lw.c.scope.namespace, "seen", seen, "now", now)
	return apierrors.NewResourceExpired(fmt.Sprintf("the member is at resourceVersion %d, below the %d already seen: its etcd was restored or the cluster rebuilt", now, seen))
}

// statusError is the member's own Status when a raw request failed with one: the discovery client
// that lists pages as bytes cannot decode it, and says "unknown" where the member said why (a 403
// naming the resource and the user, say). The error stays an apierrors.APIStatus either way.
func statusError(body []byte, err error) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Message == "" {
		return err
	}
	return &apierrors.StatusError{ErrStatus: st}
}
