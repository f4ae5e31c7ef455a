package progress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// Options configure Run. Rows is required; the rest have defaults.
type Options struct {
	// Rows returns the collector's status rows (registry × cluster × resource); it is called once
	// per Interval and must be safe to call concurrently with the collector.
	Rows func() []registry.ResourceStatus
	// Out receives the table on a terminal and the summary line there. Default os.Stderr.
	Out io.Writer
	// Terminal chooses the form: nil detects it (Out is a terminal, and TERM is not "dumb").
	Terminal *bool
	// Log receives the lines of the plain form. Default: a text logger on Out.
	Log *slog.Logger
	// Interval between looks at the rows (and redraws of the table): 500 ms.
	Interval time.Duration
	// LogInterval between progress lines of the plain form: 5 s.
	LogInterval time.Duration
	// Width and Height bound the table: 0 takes the terminal's size (120×40 when unknown).
	Width, Height int

	now func() time.Time
}

// Summary is the outcome of the first sync, or how far it came when Run was stopped first.
type Summary struct {
	Objects     int // held by the collections that synced
	Resources   int // distinct kinds
	Clusters    int
	Collections int // cluster × kind × namespace
	Failed      int // collections that failed
	Elapsed     time.Duration
	Complete    bool // every collection settled
}

func (s Summary) String() string {
	verb := "synced"
	if !s.Complete {
		verb = "stopped after syncing"
	}
	out := fmt.Sprintf("%s %s objects of %d resources in %d clusters in %s", verb, count(s.Objects),
		s.Resources, s.Clusters, seconds(s.Elapsed))
	if s.Failed > 0 {
		out += fmt.Sprintf(" (%d of %d collections failed)", s.Failed, s.Collections)
	}
	return out
}

// Run shows the progress until every collection has settled or ctx is done, then reports the summary
// (a line on Out on a terminal, a log line otherwise) and returns it. A collection settles once it has
// listed once or failed; Run does not count an empty set of rows as settled, since the collector has
// rows only once it has read its configuration. The error is a failed write to Out.
func Run(ctx context.Context, opts Options) (Summary, error) {
	if opts.Rows == nil {
		return Summary{}, errors.New("progress: Options.Rows is required")
	}
	opts.defaults()
	d := &display{opts: opts, t: newTracker(opts.now())}
	if *opts.Terminal {
		d.draw = d.redraw
	} else {
		d.draw = d.logLines
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for {
		now := opts.now()
		d.t.observe(opts.Rows(), now)
		if err := d.draw(now); err != nil {
			return d.t.summary(now), err
		}
		if d.t.settled() {
			return d.finish(now)
		}
		select {
		case <-ctx.Done():
			return d.finish(opts.now())
		case <-tick.C:
		}
	}
}

func (o *Options) defaults() {
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.LogInterval <= 0 {
		o.LogInterval = 5 * time.Second
	}
	fd, isFile := fileDescriptor(o.Out)
	if o.Terminal == nil {
		tty := isFile && term.IsTerminal(fd) && os.Getenv("TERM") != "dumb"
		o.Terminal = &tty
	}
	if o.Width <= 0 || o.Height <= 0 {
		w, h := 120, 40
		if isFile {
			if tw, th, err := term.GetSize(fd); err == nil && tw > 0 && th > 0 {
				w, h = tw, th
			}
		}
		o.Width, o.Height = cmp.Or(o.Width, w), cmp.Or(o.Height, h)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(o.Out, nil))
	}
}

func fileDescriptor(w io.Writer) (int, bool) {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	return int(f.Fd()), true
}

// display is one of the two forms.
type display struct {
	opts    Options
	t       *tracker
	draw    func(now time.Time) error
	drawn   int       // lines of the table on screen
	lastLog time.Time // last progress line of the plain form
}

// redraw replaces the table on screen with the current one, in a single write.
func (d *display) redraw(now time.Time) error {
	lines := d.t.table(now, d.opts.Width, d.opts.Height-1)
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\r\x1b[%dA\x1b[J", d.drawn)
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	d.drawn = len(lines)
	_, err := io.WriteString(d.opts.Out, b.String())
	return err
}

// logLines logs each collection that settled since the last look, and the progress every LogInterval.
func (d *display) logLines(now time.Time) error {
	for _, r := range d.t.newlySettled() {
		attrs := []any{"cluster", r.status.Cluster, "resource", r.resource()}
		if r.status.Namespace != "" {
			attrs = append(attrs, "namespace", r.status.Namespace)
		}
		if r.status.State == registry.StateFailed {
			d.opts.Log.Warn("first list failed", append(attrs, "err", r.status.Reason)...)
			continue
		}
		attrs = append(attrs, "objects", r.status.TotalNum)
		if !r.listStart.IsZero() {
			attrs = append(attrs, "elapsed", r.doneAt.Sub(r.listStart).Round(time.Millisecond))
		}
		d.opts.Log.Info("first list done", attrs...)
	}
	if d.lastLog.IsZero() {
		d.lastLog = now
	}
	if now.Sub(d.lastLog) >= d.opts.LogInterval && !d.t.settled() {
		d.lastLog = now
		p := d.t.progress()
		attrs := []any{"settled", p.settled, "collections", p.collections, "listed", p.listed,
			"elapsed", now.Sub(d.t.start).Round(time.Second)}
		if len(p.listing) > 0 {
			attrs = append(attrs, "listing", strings.Join(p.listing, ","))
		}
		d.opts.Log.Info("first sync in progress", attrs...)
	}
	return nil
}

func (d *display) finish(now time.Time) (Summary, error) {
	s := d.t.summary(now)
	if !*d.opts.Terminal {
		d.opts.Log.Info(s.String(), "objects", s.Objects, "resources", s.Resources, "clusters", s.Clusters,
			"collections", s.Collections, "failed", s.Failed, "elapsed", s.Elapsed.Round(time.Millisecond))
		return s, nil
	}
	if err := d.redraw(now); err != nil {
		return s, err
	}
	_, err := fmt.Fprintln(d.opts.Out, s.String())
	return s, err
}

// tracker follows the collections across looks at the rows: when each list was first seen under way
// and when it settled, which the rows themselves do not say.
type tracker struct {
	start time.Time
	rows  map[rowKey]*row
	order []*row // sorted by cluster, resource, namespace
}

// rowKey is a collection: the rows of registries sharing one are one row here.
type rowKey struct{ cluster, group, kind, namespace string }

type row struct {
	status    registry.ResourceStatus
	listStart time.Time // first seen listing; zero if it was never seen under way
	doneAt    time.Time // first seen settled
	reported  bool      // the plain form logged its completion
}

func newTracker(start time.Time) *tracker { return &tracker{start: start, rows: map[rowKey]*row{}} }

func (t *tracker) observe(rows []registry.ResourceStatus, now time.Time) {
	seen := map[rowKey]bool{}
	for _, s := range rows {
		k := rowKey{s.Cluster, s.Group, s.Kind, s.Namespace}
		if seen[k] {
			continue
		}
		seen[k] = true
		r, ok := t.rows[k]
		if !ok {
			r = &row{}
			t.rows[k] = r
		}
		if r.doneAt.IsZero() {
			r.status = s // frozen once settled: the table shows the first sync
			if s.Listing && r.listStart.IsZero() {
				r.listStart = now
			}
			if s.Settled() {
				r.doneAt = now
			}
		}
	}
	for k := range t.rows {
		if !seen[k] { // no longer selected
			delete(t.rows, k)
		}
	}
	t.order = t.order[:0]
	for _, r := range t.rows {
		t.order = append(t.order, r)
	}
	slices.SortFunc(t.order, func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.status.Cluster, b.status.Cluster), cmp.Compare(a.resource(), b.resource()),
			cmp.Compare(a.status.Namespace, b.status.Namespace))
	})
}

func (t *tracker) settled() bool {
	if len(t.order) == 0 {
		return false
	}
	for _, r := range t.order {
		if r.doneAt.IsZero() {
			return false
		}
	}
	return true
}

func (t *tracker) newlySettled() []*row {
	var out []*row
	for _, r := range t.order {
		if !r.doneAt.IsZero() && !r.reported {
			r.reported = true
			out = append(out, r)
		}
	}
	return out
}

type progressCounts struct {
	settled, collections, listed int
	listing                      []string // cluster/resource of the lists under way
}

func (t *tracker) progress() progressCounts {
	p := progressCounts{collections: len(t.order)}
	for _, r := range t.order {
		p.listed += r.listed()
		if !r.doneAt.IsZero() {
			p.settled++
		} else if r.status.Listing {
			p.listing = append(p.listing, r.status.Cluster+"/"+r.resource())
		}
	}
	return p
}

func (t *tracker) summary(now time.Time) Summary {
	s := Summary{Collections: len(t.order), Elapsed: now.Sub(t.start), Complete: t.settled()}
	kinds, clusters := map[[2]string]bool{}, map[string]bool{}
	for _, r := range t.order {
		kinds[[2]string{r.status.Group, r.status.Kind}] = true
		clusters[r.status.Cluster] = true
		switch {
		case r.status.State == registry.StateFailed:
			s.Failed++
		case r.status.Settled():
			s.Objects += r.status.TotalNum
		}
	}
	s.Resources, s.Clusters = len(kinds), len(clusters)
	return s
}

// table renders the current state in at most height lines of at most width columns (a line longer
// than the terminal would wrap, and the next redraw would then move up too few lines). When the rows do
// not fit, the unsettled ones are shown first.
func (t *tracker) table(now time.Time, width, height int) []string {
	p := t.progress()
	head := fmt.Sprintf("first sync: %d of %d collections settled, %s objects listed, %s", p.settled,
		p.collections, count(p.listed), seconds(now.Sub(t.start)))
	if p.collections == 0 {
		head = "first sync: waiting for the collector's configuration, " + seconds(now.Sub(t.start))
	}
	shown := t.order
	hidden := 0
	if room := max(height-2, 1); len(shown) > room { // head and column titles
		shown = slices.Clone(t.order)
		slices.SortStableFunc(shown, func(a, b *row) int { return cmp.Compare(rank(a), rank(b)) })
		hidden = len(shown) - (room - 1) // the last line says how many are hidden
		shown = shown[:room-1]
		slices.SortFunc(shown, func(a, b *row) int { return cmp.Compare(slices.Index(t.order, a), slices.Index(t.order, b)) })
	}
	cells := [][]string{{"CLUSTER", "RESOURCE", "LISTED", "TOTAL", "OBJ/S", "STATE"}}
	for _, r := range shown {
		cells = append(cells, r.cells(now))
	}
	lines := []string{clip(head, width)}
	if len(t.order) > 0 {
		for _, l := range align(cells, map[int]bool{2: true, 3: true, 4: true}) {
			lines = append(lines, clip(l, width))
		}
	}
	if hidden > 0 {
		lines = append(lines, clip(fmt.Sprintf("... and %d more settled", hidden), width))
	}
	return lines
}

// rank orders rows for a table that does not fit: lists under way, then waiting, then settled.
func rank(r *row) int {
	switch {
	case r.doneAt.IsZero() && r.status.Listing:
		return 0
	case r.doneAt.IsZero():
		return 1
	default:
		return 2
	}
}

func (r *row) resource() string {
	name := r.status.Resource
	if name == "" { // not resolved through discovery yet
		name = strings.ToLower(r.status.Kind)
	}
	if r.status.Group != "" {
		name += "." + r.status.Group
	}
	return name
}

// listed is how many objects the row's first list has read.
func (r *row) listed() int {
	if r.status.Listing || r.status.Listed > 0 {
		return r.status.Listed
	}
	if r.status.Settled() {
		return r.status.TotalNum
	}
	return 0
}

func (r *row) cells(now time.Time) []string {
	s := r.status
	res := r.resource()
	if s.Namespace != "" {
		res += " -n " + s.Namespace
	}
	listed, total, rate := "-", "-", "-"
	if s.Listing || s.Settled() && s.State != registry.StateFailed {
		listed = count(r.listed())
	}
	if s.ListTotal > 0 {
		total = count(int(s.ListTotal))
	}
	end := now
	if !r.doneAt.IsZero() {
		end = r.doneAt
	}
	if el := end.Sub(r.listStart); !r.listStart.IsZero() && el >= 100*time.Millisecond && r.listed() > 0 {
		rate = count(int(float64(r.listed()) / el.Seconds()))
	}
	var state string
	switch {
	case s.State == registry.StateFailed:
		state = "failed: " + s.Reason
	case s.Settled():
		state = "synced"
	case s.Listing && s.ListTotal > 0:
		state = fmt.Sprintf("listing %d%%", min(100, int64(r.listed())*100/s.ListTotal))
	case s.Listing:
		state = "listing"
	default:
		state = "waiting"
	}
	return []string{s.Cluster, res, listed, total, rate, state}
}

// align pads columns to their widest cell, two spaces apart; right-aligned where right says so.
func align(cells [][]string, right map[int]bool) []string {
	var widths []int
	for _, row := range cells {
		for i, c := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	out := make([]string, 0, len(cells))
	for _, row := range cells {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			switch {
			case right[i]:
				b.WriteString(pad + c)
			case i == len(row)-1:
				b.WriteString(c)
			default:
				b.WriteString(c + pad)
			}
		}
		out = append(out, b.String())
	}
	return out
}

func clip(s string, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) <= width {
		return s
	}
	if width <= 3 {
		return string(r[:width])
	}
	return string(r[:width-3]) + "..."
}

// count writes n with thousands separators: 12,345.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}
