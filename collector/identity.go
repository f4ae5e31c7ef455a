package collector

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// One member registered twice (a kubeconfig context copied under a second name, a migration from
// one name to another) is collected twice. Documents are keyed by (cluster, uid), so each name
// keeps its own copy and neither overwrites the other, but every object is indexed, and every
// fleet answer holds it, once per name. The collector says so: it reads each member's kube-system
// namespace uid, which a cluster keeps for its life, and warns in /status and its log when two of
// its members share one. It does not refuse either: clusters restored or cloned from one etcd
// snapshot share that uid (and every older object's uid) while being different clusters now, and a
// migration registers the new name before it removes the old.

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// readIdentity reads the uid of the member's kube-system namespace. Unknown (not permitted, not
// reachable) leaves the identity as it was: no warning is better than a wrong one.
func (m *member) readIdentity(ctx context.Context) {
	ns, err := m.dynamic.Resource(namespacesGVR).Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		m.log.Debug("cannot read the kube-system namespace; duplicate registrations of this member go unnoticed", "err", err)
		return
	}
	if uid := string(ns.GetUID()); uid != "" {
		m.mu.Lock()
		m.identity = uid
		m.mu.Unlock()
	}
	m.c.logSameClusters()
}

// logSameClusters logs each group of members that look like one cluster once per process: members
// learn their identities in any order, some before the collector's view lists them all, so every
// reconcile asks again.
func (c *Collector) logSameClusters() {
	for _, s := range c.sameClusters() {
		msg := s.String()
		c.warnedMu.Lock()
		seen := c.warned[msg]
		if !seen {
			if c.warned == nil {
				c.warned = map[string]bool{}
			}
			c.warned[msg] = true
		}
		c.warnedMu.Unlock()
		if !seen {
			c.log.Warn(msg, "kubeSystemUID", s.uid, "clusters", s.names)
		}
	}
}

func (m *member) identityOf() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.identity
}

// sameCluster is members of one collector that share a kube-system namespace uid.
type sameCluster struct {
	uid   string
	names []string // sorted
}

func (s sameCluster) String() string {
	return fmt.Sprintf("%s look like the same cluster: kube-system uid %s; every object is indexed under each name "+
		"(unless they were cloned from one etcd snapshot and are different clusters now)", strings.Join(s.names, " and "), s.uid)
}

// sameClusters are the groups of members that share a kube-system uid, in order.
func (c *Collector) sameClusters() []sameCluster {
	byUID := map[string][]string{}
	for _, m := range c.viewMembers() {
		if uid := m.identityOf(); uid != "" {
			byUID[uid] = append(byUID[uid], m.cluster.Name)
		}
	}
	var out []sameCluster
	for uid, names := range byUID {
		if len(names) > 1 {
			slices.Sort(names)
			out = append(out, sameCluster{uid: uid, names: names})
		}
	}
	slices.SortFunc(out, func(a, b sameCluster) int { return strings.Compare(a.names[0], b.names[0]) })
	return out
}

// Warnings are what /status says besides its rows: members that look like one cluster.
func (c *Collector) Warnings() []string {
	var out []string
	for _, s := range c.sameClusters() {
		out = append(out, s.String())
	}
	return out
}
