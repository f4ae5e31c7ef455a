//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// The goals of issue 26, reported beside each figure: the index equals the members again within
// haLossGoal after a broker or an OpenSearch node is lost, with nothing restarted, and within
// haBackGoal once the node is back. A hung or cut-off OpenSearch node holds the writes of every shard
// with a copy on it until the cluster removes it: the HA test bed sets OpenSearch's fault detection
// as README "High availability" asks an operator to (checks of 5 s, not 10 s), which bounds that
// within haLossGoal even when the node was the cluster manager (3 leader checks, an election, then
// 3 follower checks).
//
// The tests assert convergence, not its speed: a busy machine stretches every figure, and a test
// that fails on time proves nothing about loss. haConverge is when waiting stops: past it the
// pipeline is stuck, not slow. The figures go to the log, and make chaos reports them against the
// goals.
const (
	haLossGoal = 60 * time.Second
	haBackGoal = 30 * time.Second
	haConverge = 4 * time.Minute
)

// haFault is one node of the HA test bed lost: killed (kill -9), hung (SIGSTOP) or cut off from
// everything else while it runs (a partition: the test bed's proxy in front of it drops every
// packet, tests/testbed/cutproxy).
type haFault struct {
	service string
	how     string // "kill -9", "SIGSTOP", "partition"
}

// On the HA test bed (three brokers, three OpenSearch nodes: make e2e-ha), a pipeline at the
// product's defaults replicates what it creates — its topics 3 times with 2 in sync, its indices
// once — and keeps the index equal to the members while a broker or an OpenSearch node is killed
// (kill -9), with no process restarted, and again once the node is back. CI runs it (make check).
// Broker 1 and node 1 stay up: they are the test bed's own address for its checks.
func TestHANodeLoss(t *testing.T) {
	haFaults(t, haFault{"kafka-2", "kill -9"}, haFault{"opensearch-2", "kill -9"})
}

// TestHANodePartition is TestHANodeLoss with a broker and an OpenSearch node cut off by a network
// partition instead, still running: the rest carries on without them (the clients skip a node that
// does not answer) and takes them back once the partition heals. Node 3 of each is the one behind the
// test bed's partition proxy.
func TestHANodePartition(t *testing.T) {
	haFaults(t, haFault{"kafka-3", "partition"}, haFault{"opensearch-3", "partition"})
}

// TestHANodeFaultKinds is CI's subset of the fault run (issue 26 item 6): one fault of each kind on
// the HA test bed — a broker and an OpenSearch node killed (kill -9), a broker hung (SIGSTOP), an
// OpenSearch node cut off (partition) — on one pipeline, so the set-up is paid once.
func TestHANodeFaultKinds(t *testing.T) {
	haFaults(t, haFault{"kafka-2", "kill -9"}, haFault{"opensearch-2", "kill -9"},
		haFault{"kafka-3", "SIGSTOP"}, haFault{"opensearch-3", "partition"})
}

func haFaults(t *testing.T, faults ...haFault) {
	env := testbed.Get(t)
	if !env.HA {
		t.Skip("needs the HA test bed (three brokers, three OpenSearch nodes): make e2e-ha")
	}
	f := seedFleet(t, env)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)
	checkReplicated(t, env, p)

	for i, fault := range faults {
		how := fault.how
		t.Run(fault.service+" "+how, func(t *testing.T) {
			restored := false
			restore := func() {
				if !restored {
					restored = true
					switch how {
					case "SIGSTOP":
						env.Resume(t, fault.service)
					case "partition":
						env.Heal(t, fault.service)
					default:
						env.Start(t, fault.service)
					}
				}
			}
			t.Cleanup(restore) // a failed check leaves the test bed whole for the next test
			switch how {
			case "SIGSTOP":
				env.Pause(t, fault.service)
			case "partition":
				env.Cut(t, fault.service, "blackhole")
			default:
				env.Kill(t, fault.service)
			}
			lost := time.Now()
			haChurn(t, env, f, fmt.Sprintf("ha-%d-down", i))
			goal := haLossGoal
			p.waitIndexMatchesMembers(t, fault.service+" lost", haConverge)
			t.Logf("%s (%s): the index equals the members %s after the loss, nothing restarted (goal %s)", fault.service, how, within(time.Since(lost), goal), goal)

			restore()
			back := time.Now()
			haChurn(t, env, f, fmt.Sprintf("ha-%d-back", i))
			p.waitIndexMatchesMembers(t, fault.service+" back", haConverge)
			t.Logf("%s back: the index equals the members %s later (goal %s)", fault.service, within(time.Since(back), haBackGoal), haBackGoal)
		})
	}
}

// within prints a figure and whether it met its goal.
func within(d, goal time.Duration) string {
	if d <= goal {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(100*time.Millisecond).String() + " (GOAL MISSED)"
}

// haChurn creates, updates and deletes ConfigMaps in every member's shop namespace, each change
// acknowledged by the member.
func haChurn(t *testing.T, env *testbed.Env, f fleet, prefix string) {
	t.Helper()
	for _, cluster := range env.Clusters {
		cms := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster)).CoreV1().ConfigMaps(f.shop)
		for k := range 6 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, k),
				Labels: map[string]string{"ha.kubesearch.io/step": "created"}}, Data: map[string]string{"k": strings.Repeat("v", 500)}}
			created, err := cms.Create(t.Context(), cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("%s: create: %v", cluster, err)
			}
			switch k % 3 {
			case 1:
				created.Labels["ha.kubesearch.io/step"] = "updated"
				if _, err := cms.Update(t.Context(), created, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("%s: update: %v", cluster, err)
				}
			case 2:
				if err := cms.Delete(t.Context(), created.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatalf("%s: delete: %v", cluster, err)
				}
			}
		}
	}
}

// checkReplicated: the collector's ledger topic (which the collector creates) has 3 replicas and
// min.insync.replicas 2; every index of the pipeline has auto_expand_replicas 0-1 and a started
// replica of every shard on another node.
func checkReplicated(t *testing.T, env *testbed.Env, p *pipeline) {
	t.Helper()
	ledger := p.topic + ".collectors"
	client := &kafka.Client{Addr: kafka.TCP(env.KafkaBrokers...), Timeout: 10 * time.Second}
	md, err := client.Metadata(t.Context(), &kafka.MetadataRequest{Topics: []string{ledger}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("metadata of %s: %+v", ledger, md.Topics)
	}
	for _, part := range md.Topics[0].Partitions {
		if len(part.Replicas) != 3 {
			t.Errorf("%s partition %d: %d replicas, want 3", ledger, part.ID, len(part.Replicas))
		}
	}
	cfg, err := client.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: ledger, ConfigNames: []string{"min.insync.replicas"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Resources[0].ConfigEntries; len(got) != 1 || got[0].ConfigValue != "2" {
		t.Errorf("%s min.insync.replicas: %+v, want 2", ledger, got)
	}

	// Replicas are allocated in the background: wait for green.
	mustHTTP(t, "GET", env.OpenSearchURL+"/_cluster/health/"+p.prefix+"-*?wait_for_status=green&timeout=90s", "")
	settings := mustHTTP(t, "GET", env.OpenSearchURL+"/"+p.prefix+"-*/_settings/index.auto_expand_replicas", "")
	indices := gjson.ParseBytes(settings).Map()
	if len(indices) == 0 {
		t.Fatalf("no index of %s-*", p.prefix)
	}
	for name, s := range indices {
		if v := s.Get("settings.index.auto_expand_replicas").String(); v != "0-1" {
			t.Errorf("%s: auto_expand_replicas %q, want 0-1", name, v)
		}
	}
	shards := mustHTTP(t, "GET", env.OpenSearchURL+"/_cat/shards/"+p.prefix+"-*?format=json&h=index,shard,prirep,state,node", "")
	nodes := map[string]map[string]bool{} // index/shard → nodes holding a started copy
	for _, s := range gjson.ParseBytes(shards).Array() {
		key := s.Get("index").String() + "/" + s.Get("shard").String()
		if nodes[key] == nil {
			nodes[key] = map[string]bool{}
		}
		if s.Get("state").String() == "STARTED" {
			nodes[key][s.Get("node").String()] = true
		}
	}
	for key, on := range nodes {
		if len(on) != 2 {
			t.Errorf("shard %s: started on %d nodes, want 2 (a primary and its replica)", key, len(on))
		}
	}
}
