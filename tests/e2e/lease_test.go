//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// leaseTakeoverGoal is the documented bound of a takeover after kill -9 or SIGSTOP of the replica
// collecting a member (README, "High availability"): the group's session timeout (10 s), a heartbeat
// and a join, then the member's first list. Reported beside each figure, not asserted (see haConverge).
const leaseTakeoverGoal = 30 * time.Second

// replica is one collector process of the collector "lease" (--lease).
type replica struct {
	name string
	proc *process
	base string
}

// Two replicas of one collector (--lease, the same --name) share the members, each member collected
// by exactly one of them. Whichever collects member1 is killed (-9), hung (SIGSTOP) and stopped
// (SIGTERM) in turn, while every member changes: the other takes every member over and the index
// equals the members, nothing restarted; once the first is back (started again, or SIGCONT: it
// lost its members while hung and must not collect them any more) the members are shared again and
// the index still equals the members — 0 lost, 0 ghosts, and no epoch of the hung replica winning
// over its successor's.
func TestCollectorLease(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startIndexing(t, env, f)
	start := func(name string) *replica {
		proc, base := startCollector(t, env, p.registries, p.topic, "--lease", "--name", "lease")
		waitHTTP(t, base+"/readyz", 3*time.Minute)
		return &replica{name: name, proc: proc, base: base}
	}
	reps := []*replica{start("a"), start("b")}
	waitShared(t, env, reps, time.Minute)
	p.waitIndexMatchesMembers(t, "two replicas", 2*time.Minute)

	faults := []struct {
		name string
		do   func(r *replica)
		back func(r *replica) *replica
	}{
		{"kill -9", func(r *replica) { r.proc.kill() }, func(r *replica) *replica { return start(r.name) }},
		{"SIGSTOP", func(r *replica) { r.proc.signal(syscall.SIGSTOP) }, func(r *replica) *replica { r.proc.signal(syscall.SIGCONT); return r }},
		{"SIGTERM", func(r *replica) { _ = r.proc.stop(30 * time.Second) }, func(r *replica) *replica { return start(r.name) }},
	}
	for i, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			owners := holders(t, reps)
			vi := slices.IndexFunc(reps, func(r *replica) bool { return slices.Contains(owners[env.Clusters[0]], r.name) })
			if vi < 0 {
				t.Fatalf("no replica collects %s: %v", env.Clusters[0], owners)
			}
			victim, survivor := reps[vi], reps[1-vi]
			t.Logf("replica %s collects %v; %s the others", victim.name, heldBy(owners, victim.name), survivor.name)
			fault.do(victim)
			lost := time.Now()
			haChurn(t, env, f, fmt.Sprintf("lease-%d-down", i))
			waitHolds(t, env, survivor, haConverge)
			took := time.Since(lost)
			p.waitIndexMatchesMembers(t, "replica "+victim.name+" lost", haConverge)
			t.Logf("%s of replica %s: %s took every member over %s after the fault (goal %s); the index equals the members %s after it",
				fault.name, victim.name, survivor.name, within(took, leaseTakeoverGoal), leaseTakeoverGoal, time.Since(lost).Round(100*time.Millisecond))

			reps[vi] = fault.back(victim)
			back := time.Now()
			waitShared(t, env, reps, haConverge)
			haChurn(t, env, f, fmt.Sprintf("lease-%d-back", i))
			p.waitIndexMatchesMembers(t, "replica "+victim.name+" back", haConverge)
			t.Logf("replica %s back: the members are shared again and the index equals them %s later", victim.name, time.Since(back).Round(100*time.Millisecond))
		})
	}
}

// holders reads every replica's /status: which replicas collect each cluster. A replica that does
// not answer within a second (hung) collects nothing it can show.
func holders(t *testing.T, reps []*replica) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range reps {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/status", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			continue
		}
		var body struct {
			Items []struct {
				Cluster string `json:"cluster"`
			} `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("replica %s: /status: %v", r.name, err)
		}
		seen := map[string]bool{}
		for _, it := range body.Items {
			if !seen[it.Cluster] {
				seen[it.Cluster] = true
				out[it.Cluster] = append(out[it.Cluster], r.name)
			}
		}
	}
	return out
}

func heldBy(owners map[string][]string, replica string) []string {
	var out []string
	for c, rs := range owners {
		if slices.Contains(rs, replica) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// waitShared waits until every member is collected by exactly one replica. (How many each replica
// collects is the shares' hash's: three members may all fall to one.)
func waitShared(t *testing.T, env *testbed.Env, reps []*replica, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		owners := holders(t, reps)
		ok := true
		for _, c := range env.Clusters {
			if len(owners[c]) != 1 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members not collected by exactly one replica each after %s: %v", timeout, owners)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHolds waits until r collects every member.
func waitHolds(t *testing.T, env *testbed.Env, r *replica, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		owners := holders(t, []*replica{r})
		if len(heldBy(owners, r.name)) == len(env.Clusters) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s collects %v after %s, want every member (%s)", r.name, heldBy(owners, r.name), timeout, strings.Join(env.Clusters, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
