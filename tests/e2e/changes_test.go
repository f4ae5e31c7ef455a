//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// feedReplica is the fleet as a reader of the change feed alone knows it: the records applied in
// order, nothing else read.
type feedReplica struct {
	objs map[string]replicaObject // cluster/resource/uid
	read int                      // records applied
	// duplicates are records of a state the replica already held (a change published again
	// after a crash); gaps are records that do not follow from the records before them (a change
	// the feed lost).
	duplicates int
	gaps       []string
}

type replicaObject struct {
	namespace, name string
	rv              string
}

func newFeedReplica() *feedReplica { return &feedReplica{objs: map[string]replicaObject{}} }

// apply reads the records not applied yet.
func (r *feedReplica) apply(t *testing.T, values [][]byte) {
	t.Helper()
	for _, v := range values[r.read:] {
		r.read++
		rec, err := changes.Unmarshal(v)
		if err != nil {
			t.Fatalf("feed record %s: %v", v, err)
		}
		if rec.Type == envelope.Sync || rec.Type == envelope.Purge {
			continue
		}
		key := rec.Cluster + "/" + rec.Resource + "/" + rec.UID
		cur, held := r.objs[key]
		what := fmt.Sprintf("%s %s %s %s/%s at %s", rec.Type, rec.Cluster, rec.Resource, rec.Namespace, rec.Name, rec.ResourceVersion)
		switch {
		case rec.Type != envelope.Deleted && held && cur.rv == rec.ResourceVersion,
			rec.Type == envelope.Deleted && !held:
			r.duplicates++
			continue
		case rec.Type == envelope.Added && held:
			r.gaps = append(r.gaps, what+": ADDED over the state at "+cur.rv)
		case rec.Type != envelope.Added && !held:
			r.gaps = append(r.gaps, what+": the feed never added it")
		case rec.Type != envelope.Added && (rec.Previous == nil || rec.Previous.ResourceVersion != cur.rv):
			r.gaps = append(r.gaps, fmt.Sprintf("%s: previous state %+v, the feed's %s", what, rec.Previous, cur.rv))
		}
		if rec.Type == envelope.Deleted {
			delete(r.objs, key)
		} else {
			r.objs[key] = replicaObject{namespace: rec.Namespace, name: rec.Name, rv: rec.ResourceVersion}
		}
	}
}

// problems compares the replica with the members, as indexProblems compares the index.
func (r *feedReplica) problems(t *testing.T, env *testbed.Env, f fleet) []string {
	var out []string
	seen := map[string]bool{}
	for _, cluster := range env.Clusters {
		dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
		for gvr, ns := range f.selected() {
			list, err := resourceIn(dyn, gvr, ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return []string{err.Error()}
			}
			for _, it := range list.Items {
				key := cluster + "/" + gvr.Resource + "/" + string(it.GetUID())
				seen[key] = true
				o, ok := r.objs[key]
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("%s %s %s/%s: never in the feed", cluster, gvr.Resource, it.GetNamespace(), it.GetName()))
				case o.rv != it.GetResourceVersion():
					out = append(out, fmt.Sprintf("%s %s %s/%s: at %s in the feed, %s in the member", cluster, gvr.Resource, it.GetNamespace(), it.GetName(), o.rv, it.GetResourceVersion()))
				}
			}
		}
	}
	for key, o := range r.objs {
		if !seen[key] {
			out = append(out, fmt.Sprintf("%s (%s/%s at %s): in the feed, gone from the member", key, o.namespace, o.name, o.rv))
		}
	}
	slices.Sort(out)
	return out
}

// TestChangeFeed: a reader of the indexer's change feed alone (--changes-topic) holds exactly what
// the members hold — uid and resourceVersion of every selected object — after the first lists,
// churn, deletions only a re-list can tell (a SYNC's collection), and a kill -9 of the indexer in
// the middle of churn; every record follows from the ones before it (no gaps); a re-list of
// unchanged objects publishes nothing; only the crash may repeat records.
func TestChangeFeed(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	topic := uniqueName("pipeline")
	p := startIndexingOn(t, env, f, topic, "--changes-topic", changes.TopicOf(topic))
	feed := &eventLog{t: t, brokers: env.KafkaBrokers, topic: changes.TopicOf(topic), next: map[int]int64{}}
	p.startCollector(t)
	r := newFeedReplica()
	converge := func(what string) {
		t.Helper()
		waitNoProblems(t, what+": the feed does not equal the members", 2*time.Minute, func() []string {
			r.apply(t, feed.rawSnapshot())
			if len(r.gaps) > 0 {
				t.Fatalf("%s: the feed has gaps:\n%s", what, strings.Join(r.gaps, "\n"))
			}
			return r.problems(t, env, f)
		})
		t.Logf("%s: the feed's %d records equal the members (%d duplicates so far)", what, r.read, r.duplicates)
	}
	converge("after the first lists")
	churn(t, env, f, 10)
	converge("after churn")

	// A collector restart re-lists everything: unchanged objects make no records, the objects
	// deleted meanwhile make DELETED records from the SYNC's collection.
	before := r.read
	p.deleteWhileCollectorDown(t)
	converge("after deletes while the collector was down")
	if r.duplicates != 0 {
		t.Errorf("%d records repeated a state the feed had already published (a re-list must publish no unchanged object)", r.duplicates)
	}
	// Other tests share the members' cluster-wide Pods and Deployments, so their changes may
	// appear too; the re-list's own unchanged objects (dozens per member) would far exceed this.
	if n := r.read - before; n > 3*len(env.Clusters)+2*len(env.Clusters)+30 {
		t.Errorf("the re-list published %d records; the members changed 9 objects", n)
	}

	// A kill -9 of the indexer while the members change: records may repeat, none goes missing.
	done := make(chan struct{})
	go func() {
		defer close(done)
		churnTolerant(t, env, f, 8)
	}()
	time.Sleep(2 * time.Second)
	p.indexer.signal(syscall.SIGKILL)
	<-p.indexer.done
	p.startIndexer(t)
	<-done
	converge("after the indexer's kill -9 during churn")
	t.Logf("records: %d, duplicates: %d (all from the crash)", r.read, r.duplicates)
}
