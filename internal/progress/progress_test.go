package progress

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/registry"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pods(cluster string, listed int, total int64) registry.ResourceStatus {
	return registry.ResourceStatus{Registry: "r", Cluster: cluster, Version: "v1", Resource: "pods", Kind: "Pod",
		State: registry.StateUnknown, Listing: true, Listed: listed, ListTotal: total}
}

func synced(s registry.ResourceStatus, n int) registry.ResourceStatus {
	s.State, s.Epoch, s.TotalNum, s.Listing, s.Listed, s.ListTotal = registry.StateRunning, 1, n, false, n, int64(n)
	return s
}

func deployments(cluster string) registry.ResourceStatus {
	return registry.ResourceStatus{Registry: "r", Cluster: cluster, Group: "apps", Resource: "deployments", Kind: "Deployment", State: registry.StateUnknown}
}

func failed(s registry.ResourceStatus, why string) registry.ResourceStatus {
	s.State, s.Reason, s.Listing = registry.StateFailed, why, false
	return s
}

// script is a fake collector: each look at the rows returns the next snapshot (the last one repeats),
// and each look at the clock is 500 ms after the previous one.
type script struct {
	mu    sync.Mutex
	steps [][]registry.ResourceStatus
	calls int
	clock time.Time
}

func (s *script) rows() []registry.ResourceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.steps)-1)
	s.calls++
	return s.steps[i]
}

func (s *script) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock.IsZero() {
		s.clock = t0
	} else {
		s.clock = s.clock.Add(500 * time.Millisecond)
	}
	return s.clock
}

// firstSync: member1 lists 3,000 pods in pages and its deployments at once; member2's pods fail.
func firstSync() *script {
	return &script{steps: [][]registry.ResourceStatus{
		{},
		{pods("member1", 0, 0), deployments("member1"), pods("member2", 0, 0)},
		{pods("member1", 1000, 3000), synced(deployments("member1"), 12), pods("member2", 0, 0)},
		{pods("member1", 2000, 3000), synced(deployments("member1"), 12), failed(pods("member2", 0, 0), "connection refused")},
		{synced(pods("member1", 0, 0), 3000), synced(deployments("member1"), 12), failed(pods("member2", 0, 0), "connection refused")},
	}}
}

func TestTable(t *testing.T) {
	s := firstSync()
	tr := newTracker(t0)
	var frames []string
	for i := range s.steps {
		now := t0.Add(time.Duration(i) * time.Second)
		tr.observe(s.steps[i], now)
		frames = append(frames, strings.Join(tr.table(now, 100, 40), "\n"))
	}
	want := []string{
		`first sync: waiting for the collector's configuration, 0.0s`,
		`first sync: 0 of 3 collections settled, 0 objects listed, 1.0s
CLUSTER  RESOURCE          LISTED  TOTAL  OBJ/S  STATE
member1  deployments.apps       -      -      -  waiting
member1  pods                   0      -      -  listing
member2  pods                   0      -      -  listing`,
		`first sync: 1 of 3 collections settled, 1,012 objects listed, 2.0s
CLUSTER  RESOURCE          LISTED  TOTAL  OBJ/S  STATE
member1  deployments.apps      12     12      -  synced
member1  pods               1,000  3,000  1,000  listing 33%
member2  pods                   0      -      -  listing`,
		`first sync: 2 of 3 collections settled, 2,012 objects listed, 3.0s
CLUSTER  RESOURCE          LISTED  TOTAL  OBJ/S  STATE
member1  deployments.apps      12     12      -  synced
member1  pods               2,000  3,000  1,000  listing 66%
member2  pods                   -      -      -  failed: connection refused`,
		`first sync: 3 of 3 collections settled, 3,012 objects listed, 4.0s
CLUSTER  RESOURCE          LISTED  TOTAL  OBJ/S  STATE
member1  deployments.apps      12     12      -  synced
member1  pods               3,000  3,000  1,000  synced
member2  pods                   -      -      -  failed: connection refused`,
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d:\n%s\nwant:\n%s", i, frames[i], want[i])
		}
	}
	if !tr.settled() {
		t.Error("not settled after every row listed or failed")
	}
	got := tr.summary(t0.Add(4 * time.Second)).String()
	if want := "synced 3,012 objects of 2 resources in 2 clusters in 4.0s (1 of 3 collections failed)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestTableFits(t *testing.T) {
	var rows []registry.ResourceStatus
	for _, c := range []string{"a", "b", "c", "d", "e"} {
		rows = append(rows, synced(deployments(c), 1))
	}
	rows = append(rows, pods("e", 5, 10), registry.ResourceStatus{Cluster: "a", Kind: "ConfigMap",
		Namespace: "kube-system", State: registry.StateUnknown})
	tr := newTracker(t0)
	tr.observe(rows, t0)
	got := strings.Join(tr.table(t0, 40, 6), "\n")
	want := `first sync: 5 of 7 collections settle...
CLUSTER  RESOURCE                  LI...
a        configmap -n kube-system    ...
a        deployments.apps            ...
e        pods                        ...
... and 4 more settled`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestRunTerminal(t *testing.T) {
	s := firstSync()
	var out bytes.Buffer
	tty := true
	sum, err := Run(t.Context(), Options{Rows: s.rows, Out: &out, Terminal: &tty, Interval: time.Millisecond,
		Width: 100, Height: 40, now: s.now})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.Objects != 3012 || sum.Failed != 1 || sum.Clusters != 2 || sum.Resources != 2 {
		t.Errorf("summary %+v", sum)
	}
	got := out.String()
	// Every frame after the first moves up over the previous one and clears it.
	if n := strings.Count(got, "\x1b[J"); n != len(s.steps) { // one frame per step, and the final one
		t.Errorf("%d redraws, want %d:\n%q", n, len(s.steps), got)
	}
	if !strings.Contains(got, "\r\x1b[5A\x1b[J") {
		t.Errorf("no move up over the 5-line table:\n%q", got)
	}
	if want := "synced 3,012 objects of 2 resources in 2 clusters in 2.5s (1 of 3 collections failed)\n"; !strings.HasSuffix(got, want) {
		t.Errorf("output ends\n%q\nwant the summary\n%q", got[max(0, len(got)-200):], want)
	}
}

func TestRunPlain(t *testing.T) {
	s := firstSync()
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	plain := false
	if _, err := Run(t.Context(), Options{Rows: s.rows, Out: &out, Terminal: &plain, Log: log,
		Interval: time.Millisecond, LogInterval: time.Second, now: s.now}); err != nil {
		t.Fatal(err)
	}
	want := `level=INFO msg="first list done" cluster=member1 resource=deployments.apps objects=12
level=INFO msg="first sync in progress" settled=1 collections=3 listed=1012 elapsed=2s listing=member1/pods,member2/pods
level=WARN msg="first list failed" cluster=member2 resource=pods err="connection refused"
level=INFO msg="first list done" cluster=member1 resource=pods objects=3000 elapsed=1.5s
level=INFO msg="synced 3,012 objects of 2 resources in 2 clusters in 2.5s (1 of 3 collections failed)" objects=3012 resources=2 clusters=2 collections=3 failed=1 elapsed=2.5s
`
	if got := out.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	looks := 0
	rows := func() []registry.ResourceStatus {
		mu.Lock()
		defer mu.Unlock()
		if looks++; looks == 3 {
			cancel()
		}
		return []registry.ResourceStatus{pods("member1", 10, 0)}
	}
	var out bytes.Buffer
	plain := false
	sum, err := Run(ctx, Options{Rows: rows, Out: &out, Terminal: &plain, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Complete {
		t.Errorf("complete with a list still under way: %+v", sum)
	}
	if !strings.Contains(out.String(), "stopped after syncing 0 objects of 1 resources in 1 clusters") {
		t.Errorf("no stop summary in\n%s", out.String())
	}
}

func TestRunNeedsRows(t *testing.T) {
	if _, err := Run(t.Context(), Options{}); err == nil {
		t.Error("Run without Rows did not fail")
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
