package storetest

import (
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
)

// The corpus builds into documents as the indexer would, twice alike, and every case has a name
// of its own (answers are compared by name).
func TestCorpusAndCases(t *testing.T) {
	a, b := NewCorpus(), NewCorpus()
	if len(a.Live()) != len(b.Live()) {
		t.Fatalf("two corpora of %d and %d objects", len(a.Live()), len(b.Live()))
	}
	for i, o := range a.Live() {
		ops, err := Ops(o.Event(envelope.Added), b.Live()[i].Event(envelope.Added))
		if err != nil {
			t.Fatalf("%s: %v", o.Key(), err)
		}
		if string(ops[0].Doc) != string(ops[1].Doc) {
			t.Errorf("%s: the corpus is not deterministic", o.Key())
		}
		if !ops[0].Versioned || ops[0].Epoch != Epoch {
			t.Errorf("%s: op %+v", o.Key(), ops[0])
		}
		o.setDoc(ops[0].Doc)
	}
	if n := len(a.find("prod-eu/ConfigMap/payments/grafana-dashboards").JSON()); n < BigSize {
		t.Errorf("the big ConfigMap has %d bytes", n)
	}
	// Arrays: any element matches.
	pod := a.Live()[slicesIndex(a, "Pod")]
	if !pod.Matches(&query.Query{Fields: []query.Requirement{{Key: "spec.containers.name", Op: query.Equals, Values: []string{"istio-proxy"}}}}) {
		t.Errorf("%s: spec.containers.name=istio-proxy does not match: %v", pod.Key(), pod.Leaves("spec.containers.name"))
	}
	// sort=status has something to order: statuses of several values, and objects without one.
	statuses, without := map[string]int{}, 0
	for _, o := range a.Live() {
		if st := o.status(); st.Exists() {
			statuses[st.Str]++
		} else {
			without++
		}
	}
	for _, want := range []string{"Running", "Pending", "CrashLoopBackOff", "ImagePullBackOff", "Completed", "Ready", "NotReady,SchedulingDisabled"} {
		if statuses[want] == 0 {
			t.Errorf("no object of status %q: %v", want, statuses)
		}
	}
	if without == 0 {
		t.Error("every object has a status: sort=status's missing-last rule goes untested")
	}
	// sort=columns.<id> has something to order: Pods of several restart counts and nodes, and
	// Pods without a node (pending) for the missing-last rule.
	restarts, nodes, noNode := map[string]bool{}, map[string]bool{}, 0
	for _, o := range a.Live() {
		if o.Kind != "Pod" {
			continue
		}
		restarts[o.column("restarts").Str] = true
		if n := o.column("node"); n.Exists() {
			nodes[n.Str] = true
		} else {
			noNode++
		}
	}
	if len(restarts) < 3 || len(nodes) < 3 || noNode == 0 {
		t.Errorf("Pods' restart keys %d, node keys %d, Pods without a node %d: too few for the column sorts", len(restarts), len(nodes), noNode)
	}
	seen := map[string]bool{}
	for _, c := range Cases() {
		if seen[c.Name] {
			t.Errorf("two cases named %q", c.Name)
		}
		seen[c.Name] = true
	}
}

func slicesIndex(c *Corpus, kind string) int {
	for i, o := range c.Live() {
		if o.Kind == kind {
			return i
		}
	}
	return -1
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"worker", "wokrer", 1}, {"payments", "pymants", 2}, {"api", "apj", 1}, {"web", "wbe", 1}, {"abc", "xyz", 3}, {"", "ab", 2}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
