package queryapi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// Watch parameters.
const (
	paramAllowWatchBookmarks = "allowWatchBookmarks"
	paramSendInitialEvents   = "sendInitialEvents"
	paramTimeoutSeconds      = "timeoutSeconds"
)

// initialEventsEnd is the annotation of the bookmark that ends a watch's initial events
// (streaming lists): client-go waits for it before it counts an informer synced.
const initialEventsEnd = "k8s.io/initial-events-end"

// maxWatchSeconds bounds timeoutSeconds: a day.
const maxWatchSeconds = 86400

// maxUnjudged bounds how long an open watch goes on while its credentials cannot be checked
// again: longer than the token reviewer's usual blips, shorter than a revoked token should last.
const maxUnjudged = time.Minute

// bookmarkEvery is how often an idle watch that asked for bookmarks gets one.
const bookmarkEvery = 10 * time.Second

// watchStarter places watches: the watch cache (package watchcache), which turns the event stream
// into watch events of every pair. A watcher filters them (selectors, namespace, the subject's
// scope) and renders them for its view.
type watchStarter interface {
	// Start places a watch of pairs, each after its position in from (a member's
	// resourceVersion): watchcache.ErrTooOld when the window may lack an event after one (410),
	// watchcache.ErrTooNew when the stream did not reach one before ctx ended (504).
	Start(ctx context.Context, pairs []store.Pair, from map[store.Pair]int64) (*watchcache.Watch, error)
}

// watcher is one WATCH request being served.
type watcher struct {
	s   *Server
	c   *gin.Context
	r   *facadeRequest
	res apiResource
	out *renderer
	q   *query.Query
	// clusters are the view's clusters the subject may watch (viewClusters); pairs those the
	// watch reads (fewer for a qualified name).
	clusters []string
	pairs    []store.Pair
	covered  map[store.Pair]bool // pairs as a set
	// feed is where the watch reads its pairs' events from the watch cache.
	feed *watchcache.Watch
	// from is, per cluster, where the watch started: every event after it is sent, in the
	// stream's order (a re-list's events do not come in resourceVersion order). pos is where a
	// client that got what was sent may resume: bookmarks and the fleet views' event
	// resourceVersions carry it, as at writes it (nil: as the JSON map, or a one-cluster view's).
	from, pos rvVector
	at        *watchPosition
	// after is, per pair, the seq of the event the watch resumed after, when its position was an
	// event of a re-list in progress (watchcache.Watch.After): the pair's events are then sent by their
	// place in the stream, not by resourceVersion.
	after map[store.Pair]uint64
	// present are the objects the client holds, with the resourceVersion it got; nil when the
	// watch resumed from a resourceVersion without initial events (the client's list is not
	// known then), or once the subject's watches hold as many objects as they may (presence).
	present *presence
	// unjudgedSince is when rechecks began to get no judgement of the credentials (the token
	// reviewer away or throttled); zero while they get one.
	unjudgedSince time.Time
	bookmarks     bool
	tableFirst    bool
	buf           bytes.Buffer
}

// watch serves a WATCH: initial events when asked for (sendInitialEvents, or no resourceVersion,
// as kube-apiserver does), then every later change from the watch cache, until the client goes,
// timeoutSeconds pass, the view's member clusters change (fleet views: clients re-list), or the
// position falls out of the window (an ERROR event with 410 Expired).
func (s *Server) watch(c *gin.Context, r *facadeRequest, res apiResource, out *renderer, params url.Values) {
	subj := subjectOf(c)
	done, ok := s.openWatch(c, subj)
	if !ok {
		return
	}
	defer done()
	if s.cache == nil {
		writeStatus(c, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"watch is served from the event stream: start the query API with --kafka-brokers", nil)
		return
	}
	if params.Get(query.ParamContinue) != "" {
		writeParamErrors(c, query.Errors{{Param: query.ParamContinue, Message: "a watch takes no continue token"}})
		return
	}
	sel := url.Values{}
	for _, p := range []string{query.ParamLabelSelector, query.ParamFieldSelector} {
		sel[p] = params[p]
	}
	if r.name != "" {
		// A watch of one object (/pods/<name>?watch=1): its name as a field selector.
		fs := "metadata.name=" + r.name
		if x := params.Get(query.ParamFieldSelector); x != "" {
			fs += "," + x
		}
		sel.Set(query.ParamFieldSelector, fs)
	}
	var changed <-chan struct{}
	if r.cluster == "" {
		changed = s.catalog.changes() // before the clusters are read: a change in between is seen
	}
	clusters := s.viewClusters(subj, authz.VerbWatch, r, res)
	q, err := s.baseQuery(c, r, res, sel, authz.VerbWatch, clusters)
	if err != nil {
		writeParamErrors(c, err)
		return
	}
	w := &watcher{s: s, c: c, r: r, res: res, out: out, q: q, clusters: clusters, bookmarks: boolParam(params.Get(paramAllowWatchBookmarks)), tableFirst: true}
	for _, cl := range q.Clusters {
		w.pairs = append(w.pairs, res.pair(cl))
	}
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	timeout := 30*time.Minute + time.Duration(rand.Int64N(int64(30*time.Minute))) // kube-apiserver's spread
	if t := params.Get(paramTimeoutSeconds); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > maxWatchSeconds {
			writeParamErrors(c, query.Errors{{Param: paramTimeoutSeconds, Message: fmt.Sprintf("%q is not an integer from 0 to %d", t, maxWatchSeconds)}})
			return
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	ctx, stop := context.WithTimeout(ctx, timeout)
	defer stop()

	rv := params.Get(paramResourceVersion)
	initial := boolParam(params.Get(paramSendInitialEvents))
	if params.Has(paramSendInitialEvents) && initial {
		if params.Get(paramResourceVersionMatch) != string(metav1.ResourceVersionMatchNotOlderThan) {
			writeStatusObject(c, newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				"resourceVersionMatch: sendInitialEvents=true needs resourceVersionMatch=NotOlderThan"))
			return
		}
		if !w.bookmarks {
			writeStatusObject(c, newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				"allowWatchBookmarks: sendInitialEvents=true needs allowWatchBookmarks=true"))
			return
		}
	}
	// Without a resourceVersion kube-apiserver starts a watch with the current state as ADDED
	// events, unless sendInitialEvents=false says to start from now.
	fromList := initial || (!params.Has(paramSendInitialEvents) && (rv == "" || rv == "0"))
	switch {
	case !fromList && (rv == "" || rv == "0"):
		w.pos = s.indexedVector(res, clusters)
	case fromList:
		// The list's position first, then the cursor: the window is read from its start, so no
		// event after the position is missed however long the list takes.
		// sendInitialEvents with "" is a consistent read of the initial state, with "0" any state,
		// with a resourceVersion one not older; a watch without sendInitialEvents starts from the
		// index as it is.
		lp := url.Values{}
		switch {
		case initial && rv == "":
		case initial && rv != "0":
			lp.Set(paramResourceVersion, rv)
			lp.Set(paramResourceVersionMatch, string(metav1.ResourceVersionMatchNotOlderThan))
		default:
			lp.Set(paramResourceVersion, "0")
		}
		vec, _, st := s.listResourceVersion(ctx, r, res, lp, clusters) // a Warning cannot follow a 200 already sent
		if st != nil {
			writeStatusObject(c, st)
			return
		}
		w.pos = vec
	default:
		dctx, cancel := context.WithTimeout(ctx, s.opts.ResourceVersionWait)
		vec, st := s.decodeRV(dctx, rv, r.view, res, clusters)
		cancel()
		if st != nil {
			writeStatusObject(c, st)
			return
		}
		for _, p := range w.pairs {
			if _, ok := vec[p.Cluster]; !ok {
				// A member that joined since the client listed: it has to list again.
				writeStatusObject(c, newStatus(http.StatusGone, metav1.StatusReasonExpired, fmt.Sprintf(
					"too old resource version: %s lacks cluster %s, which joined the fleet since; list again", rv, p.Cluster)))
				return
			}
		}
		// Only the clusters of the view the subject sees: a vector's other members are not
		// this watch's, and a bookmark echoes none of them.
		w.pos = rvVector{}
		for _, cl := range clusters {
			if rv, ok := vec[cl]; ok {
				w.pos[cl] = rv
			}
		}
	}
	startCtx, cancelStart := context.WithTimeout(ctx, s.opts.ResourceVersionWait)
	w.from = maps.Clone(w.pos)
	w.feed, err = s.cache.Start(startCtx, w.pairs, w.positions())
	cancelStart()
	if err == nil {
		defer w.feed.Stop()
	}
	switch {
	case errors.Is(err, watchcache.ErrTooOld):
		writeStatusObject(c, newStatus(http.StatusGone, metav1.StatusReasonExpired, err.Error()))
		return
	case errors.Is(err, watchcache.ErrTooNew):
		st := newStatus(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, err.Error())
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}}
		writeStatusObject(c, st)
		return
	case err != nil:
		writeStatusObject(c, newStatus(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			"the watch cache is still reading the event stream; retry: "+err.Error()))
		return
	}

	listDone := func() {}
	if fromList {
		// Initial events stream every page, as a LIST without a limit does: the same bound.
		if listDone, ok = s.startFullList(c); !ok {
			return
		}
	} else {
		w.after = w.feed.After() // a list's position is never inside a re-list (watermarks wait for the SYNC)
		w.startPosition()
	}
	c.Header("Content-Type", "application/json")
	c.Header("Transfer-Encoding", "chunked")
	c.Status(http.StatusOK)
	if fromList {
		w.present = newPresence(s.watchObjects, subj.user.Name)
		defer func() { w.present.release() }()
		err := w.initialEvents(ctx)
		listDone()
		if err != nil {
			s.log.Warn("watch initial events broken off", "path", r.path, "err", err)
			return
		}
		if initial {
			w.bookmark(true)
		}
	}
	if !w.flush() {
		return
	}
	tick := time.NewTicker(bookmarkEvery)
	defer tick.Stop()
	recheck := time.NewTicker(cmp.Or(s.opts.SessionRecheckInterval, defaultSessionRecheck))
	defer recheck.Stop()
	lastBookmark := time.Now()
	for {
		evs, stable, next, err := w.feed.Read()
		if err != nil {
			w.status(newStatus(http.StatusGone, metav1.StatusReasonExpired, err.Error()))
			w.flush()
			return
		}
		w.at.read(w.feed.Unevented(), w.pos)
		for _, e := range evs {
			w.event(e)
			// A watch far behind reads a long backlog at once: it goes out as it is written,
			// not held whole in memory first.
			if w.buf.Len() >= flushBytes && !w.flush() {
				return
			}
		}
		settleRead(w.pos, w.at, stable, w.feed.Mark())
		bookmark := w.bookmarks && time.Since(lastBookmark) >= bookmarkEvery
		if bookmark {
			w.bookmark(false)
			lastBookmark = time.Now()
		}
		if !w.flush() {
			return
		}
		select {
		case <-next:
		case <-tick.C:
		case <-changed:
			// What the fleet caches changed: the watch ends, and its client lists again, when
			// the clusters it covers changed. Changes elsewhere (another resource, a member the
			// subject cannot see) leave it open: at 1,000 members they are frequent, and a
			// watch ended by a hidden member's change would tell its subject of that member.
			// Asked with reviews of their own, bounded as a new request's (the watch's first
			// ones were its start's); reviews that could not all be asked decide nothing, and
			// the recheck deals with them.
			changed = s.catalog.changes()
			fresh := s.reviewedAgain(ctx, subj)
			if cl := s.viewClusters(fresh, authz.VerbWatch, r, res); fresh.reviewErr() == nil && !slices.Equal(cl, clusters) {
				return
			}
		case <-recheck.C:
			if st := w.recheck(); st != nil {
				w.status(st)
				w.flush()
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func boolParam(s string) bool { return s == "true" || s == "1" }

// recheck authenticates and authorizes the watch's request again, with the token file, policy and
// reviews in force now, so that revoking a subject ends its open watches within the reload and
// cache intervals plus SessionRecheckInterval. It answers the ERROR that ends the watch, nil to
// go on: 401 when the credentials are no longer accepted; 403 when the subject may no longer
// watch the resource; 410 Expired when what it may see of it changed, so that its client lists
// again under the new scope (objects it may no longer see leave its cache) — the same scope goes
// on. A token reviewer that is away or throttled is no revocation, nor are SubjectAccessReviews
// past their bounds (authz.IncompleteError): the watch goes on while it is judged within
// maxUnjudged, then ends with a 503 (a revoked token must not outlive an outage).
func (w *watcher) recheck() *metav1.Status {
	// Judged: the request's context may say its source failed too often (auth.KnownOnly), which
	// would refuse a revoked token unjudged, and again at every recheck.
	subj, err := w.s.authenticateRequest(w.c.Request.WithContext(auth.Judged(w.c.Request.Context())))
	switch {
	case errors.Is(err, auth.ErrUnavailable), errors.Is(err, auth.ErrThrottled):
		// Not an answer about the credentials: asked again at the next recheck, for a while.
		return w.unjudged(err)
	case err != nil:
		return newStatus(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
	}
	old := subjectOf(w.c)
	if !subj.allowed(authz.VerbWatch, w.r.authzCluster(), w.r.authzNamespace(w.res.Namespaced), w.r.group, w.r.resource) {
		if err := subj.reviewErr(); err != nil {
			return w.unjudged(err)
		}
		return newStatus(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("%s is forbidden: User %q cannot watch %s",
			w.r.resource, old.user.Name, resourceWhat(w.r.cluster, w.r.namespace, w.r.group, w.r.resource)))
	}
	// The query restrict saw when the watch began (a qualified name narrows Clusters after).
	q := &query.Query{Namespaces: w.q.Namespaces, Resources: []query.Resource{{Resource: w.res.Resource, Group: w.res.Group}}}
	subj.restrictView(q, authz.VerbWatch, w.clusters)
	w.res.storedQuery(q)
	clusters := w.s.viewClusters(subj, authz.VerbWatch, w.r, w.res)
	if err := subj.reviewErr(); err != nil {
		return w.unjudged(err)
	}
	w.unjudgedSince = time.Time{}
	if subj.user.Name != old.user.Name || !reflect.DeepEqual(q.Scope, w.q.Scope) || !slices.Equal(clusters, w.clusters) {
		return newStatus(http.StatusGone, metav1.StatusReasonExpired, "what this subject may see changed since the watch began; list again")
	}
	return nil
}

// unjudged is the recheck that got no judgement (err says why): nil, the watch goes on, until
// rechecks have got none for maxUnjudged; then the 503 that ends it.
func (w *watcher) unjudged(err error) *metav1.Status {
	if w.unjudgedSince.IsZero() {
		w.unjudgedSince = time.Now()
	}
	if time.Since(w.unjudgedSince) > maxUnjudged {
		return newStatus(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("the watch's subject could not be judged again for %s: %v; watch again", maxUnjudged, err))
	}
	return nil
}

// startPosition starts tracking the watch's sealed position at w.pos, and tells the feed where
// that is in the stream, so that its first read names the moves without events since.
func (w *watcher) startPosition() {
	w.at = w.s.newWatchPosition(w.r.view, w.res, w.pos, w.pairs)
	if w.at != nil {
		w.feed.From(w.at.mark)
	}
}

// positions are the watch's position per pair.
func (w *watcher) positions() map[store.Pair]int64 {
	out := make(map[store.Pair]int64, len(w.pairs))
	for _, p := range w.pairs {
		out[p] = w.pos[p.Cluster]
	}
	return out
}

// initialEvents sends an ADDED event for every object the index shows, page by page on one
// snapshot, as a LIST would.
func (w *watcher) initialEvents(ctx context.Context) error {
	q := *w.q
	q.Limit, q.Drain = query.MaxLimit, true
	w.s.cover(ctx, w.res, w.pos, w.s.listingClusters(w.res, w.clusters))
	w.from = maps.Clone(w.pos)
	w.startPosition()
	for first := true; ; first = false {
		sctx, cancel := context.WithTimeout(ctx, w.s.opts.RequestTimeout)
		page, err := w.s.store.Search(sctx, &q)
		cancel()
		if err != nil {
			return err
		}
		if first {
			// Nothing is written yet: the headers can still say what the LIST would have said.
			warnRepeatedNames(w.c, w.r, w.out, page.Items, "watch's initial events")
		}
		for _, it := range page.Items {
			cl := clusterOf(it)
			rv, _ := strconv.ParseInt(gjson.GetBytes(it, "metadata.resourceVersion").Str, 10, 64)
			w.hold(store.DocID(cl, gjson.GetBytes(it, "metadata.uid").Str), rv)
			w.send(watch.Added, it, nil, rvVector{cl: rv}.encode(w.r.view))
		}
		if !w.flush() {
			w.s.store.Release(ctx, page.Continue)
			return errors.New("client went away")
		}
		if page.Continue == "" {
			return nil
		}
		q.Continue = page.Continue
	}
}

// event sends what a cache event means to this watch, if anything: events of other resources,
// clusters or namespaces, events the client has seen (at or below its position), and objects
// outside its selectors are skipped; an object entering the selectors is ADDED, one leaving them
// DELETED, as kube-apiserver does.
func (w *watcher) event(e *watchcache.Event) {
	if !w.covers(e.Pair) {
		return
	}
	// The pair's position moves whatever the event's namespace: a client that got this watch's
	// events up to here has every event of its namespaces up to here (as a bookmark says), and
	// a sealed position then stays one mark (position.go) instead of listing each cluster whose
	// other namespaces moved.
	old := w.pos[e.Pair.Cluster]
	w.pos[e.Pair.Cluster] = max(old, e.Stable)
	w.at.moved(e.Pair.Cluster, old, w.pos[e.Pair.Cluster], e.Stable, e.Offset)
	if (w.r.namespace != "" && e.Namespace != w.r.namespace) || !w.q.Scope.Allows(e.Pair.Cluster, e.Namespace, e.Pair.Group, e.Pair.Resource) {
		return
	}
	if seq, ok := w.after[e.Pair]; ok {
		if e.Seq <= seq {
			return // the client had it when the watch started
		}
	} else if e.RV <= w.from[e.Pair.Cluster] && e.RV != 0 {
		return // the client had it when the watch started
	}
	id := store.DocID(e.Pair.Cluster, e.UID) // a uid is unique within one member only
	if w.present != nil {
		if seen, ok := w.present.get(id); ok && e.Type != watch.Deleted && e.RV != 0 && e.RV <= seen {
			return // the initial events showed this state or a newer one
		}
	}
	match := matches(w.q, e.Object)
	wasKnown, had := false, false
	switch {
	case w.present != nil:
		_, had = w.present.get(id)
		wasKnown = true
	case e.Type == watch.Added:
	default:
		// Resumed: whether the client holds the object is judged by its previous state, while
		// the window has it; else by its previous labels alone (a field selector is then taken
		// to have matched).
		if prev := w.feed.Previous(e); prev != nil {
			had, wasKnown = matches(w.q, prev), true
		} else if e.PrevLabels != "" {
			had, wasKnown = matches(&query.Query{Labels: w.q.Labels}, []byte(`{"metadata":{"labels":`+e.PrevLabels+`}}`)), true
		}
	}
	typ := e.Type
	switch {
	case e.Type == watch.Deleted:
		if wasKnown && !had {
			return
		}
	case match && wasKnown && !had:
		typ = watch.Added
	case match && wasKnown && had && typ == watch.Added:
		typ = watch.Modified
	case match:
		// ADDED or MODIFIED as the cache says
	case wasKnown && had:
		typ = watch.Deleted // left the selectors
	default:
		return
	}
	if w.present != nil {
		if typ == watch.Deleted {
			w.present.remove(id)
		} else {
			w.hold(id, e.RV)
		}
	}
	w.send(typ, e.Object, e, w.at.encode(w.r.view, w.pos))
}

func (w *watcher) covers(p store.Pair) bool {
	if w.covered == nil {
		w.covered = make(map[store.Pair]bool, len(w.pairs)) // a fleet view's are 1,000 and more
		for _, q := range w.pairs {
			w.covered[q] = true
		}
	}
	return w.covered[p]
}

// send writes one event, the object as the view shows it at the resourceVersion rv; from, when not
// nil, is the cache's event stored is the object of (its metadata located already).
func (w *watcher) send(typ watch.EventType, stored []byte, from *watchcache.Event, rv string) {
	if w.out.shape != shapeTable && w.out.shape != shapeMetadata {
		// The object straight into the buffer, grown first so that appending allocates nothing.
		w.buf.Grow(len(stored) + len(rv) + 64)
		line := append(w.buf.AvailableBuffer(), `{"type":"`...)
		line = append(line, typ...)
		line = append(line, `","object":`...)
		var err error
		if from != nil {
			line, err = w.out.appendEventAt(line, from, rv)
		} else {
			line, err = w.out.appendObjectAt(line, stored, rv)
		}
		if err != nil {
			w.s.log.Warn("watch event skipped", "path", w.r.path, "err", err)
			return
		}
		w.buf.Write(append(line, "}\n"...))
		return
	}
	obj, err := w.out.objectAt(stored, rv)
	if err != nil {
		w.s.log.Warn("watch event skipped", "path", w.r.path, "err", err)
		return
	}
	fmt.Fprintf(&w.buf, `{"type":%q,"object":`, typ)
	switch w.out.shape {
	case shapeTable:
		w.tableEvent(stored, obj)
	case shapeMetadata:
		writePartial(&w.buf, obj)
	default:
		w.buf.Write(obj)
	}
	w.buf.WriteString("}\n")
}

// tableEvent writes a Table of one row; the first of a watch carries the column definitions.
func (w *watcher) tableEvent(stored, obj []byte) {
	meta := metav1.ListMeta{ResourceVersion: gjson.GetBytes(obj, "metadata.resourceVersion").Str}
	if w.tableFirst {
		w.out.tableHeadMeta(&w.buf, meta)
		w.tableFirst = false
	} else {
		fmt.Fprintf(&w.buf, `{"kind":"Table","apiVersion":"meta.k8s.io/%s","metadata":`, w.out.tableVersion)
		writeJSON(&w.buf, meta)
		w.buf.WriteString(`,"columnDefinitions":null,"rows":[`)
	}
	if err := w.out.row(&w.buf, stored, obj, true, time.Now()); err != nil {
		w.s.log.Warn("watch table row", "err", err)
	}
	w.buf.WriteString("]}")
}

// bookmark writes a BOOKMARK at the watch's position; the one ending the initial events says so.
func (w *watcher) bookmark(initialEnd bool) {
	meta := metav1.ObjectMeta{ResourceVersion: w.at.encode(w.r.view, w.pos)}
	if initialEnd {
		meta.Annotations = map[string]string{initialEventsEnd: "true"}
	}
	kind, apiVersion := w.res.Kind, w.res.groupVersion()
	switch w.out.shape {
	case shapeTable:
		kind, apiVersion = "Table", "meta.k8s.io/"+w.out.tableVersion
	case shapeMetadata:
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	}
	fmt.Fprintf(&w.buf, `{"type":"BOOKMARK","object":{"kind":%q,"apiVersion":%q,"metadata":`, kind, apiVersion)
	writeJSON(&w.buf, meta)
	w.buf.WriteString("}}\n")
}

// status writes an ERROR event.
func (w *watcher) status(st *metav1.Status) {
	w.buf.WriteString(`{"type":"ERROR","object":`)
	writeJSON(&w.buf, st)
	w.buf.WriteString("}\n")
}

// flush sends what was written; false when the client went away.
func (w *watcher) flush() bool {
	if w.buf.Len() > 0 {
		if _, err := w.c.Writer.Write(w.buf.Bytes()); err != nil {
			return false
		}
		w.buf.Reset()
	}
	w.c.Writer.Flush()
	return w.c.Request.Context().Err() == nil
}
