package simulate

import (
	"math/rand/v2"
	"sync"
	"time"
)

// object is what the simulator keeps of one object of a member: enough to render it again. It is
// 40 bytes, so a fleet of two million objects is 80 MB of them.
type object struct {
	app int32  // the app it belongs to; for a CustomResourceDefinition, which one (0 widgets, 1 gadgets)
	ord uint32 // which of the app's objects of its kind: 0… for the first ones, churnOrd… for later ones
	aux uint32 // kind-specific: a Pod's state, a ReplicaSet's revision (0 current, 1 previous), an Event's reason
	gen uint32 // changes since its creation: restarts, generation, revision, count
	rv  int64
	// created is when it was created (Unix seconds), changed when it last changed (Unix
	// microseconds): the envelope's changedAt.
	created int64
	changed int64
}

// churnOrd is the first ord of an object the churn created.
const churnOrd = 1 << 24

// pair is one resource of one simulated member the simulation selects.
type pair struct {
	k       int    // index in kinds
	version string // the version the member serves it at
	objs    []object
	epoch   int64 // of its last list; 0 before
	listRV  int64
	lastRV  int64 // of the last event published: its list's, or a churn event's
	// publishedAt is when the last event was handed to Kafka and acknowledged.
	publishedAt time.Time
	// last is the pair's last churn event: what its object is now.
	last *Change
}

// cluster is one simulated member. Its state is changed by the one writer that owns it and read by
// the status endpoint, under mu.
type cluster struct {
	mu     sync.Mutex
	i      int // 1-based
	name   string
	region string
	rv     int64 // the member's resourceVersion: its last write's
	pairs  [kindCount]*pair
	served [kindCount]string
	apps   int // the apps [0, apps) run in the cluster
	rng    *rand.Rand
	next   uint32 // the ord of the next object the churn creates
}

// nextRV is the resourceVersion of the member's next write: above its last one, and following the
// clock (see clockRV).
func (c *cluster) nextRV(now time.Time) int64 {
	c.rv = max(c.rv+1, clockRV(now))
	return c.rv
}

// Pod states, by share of the Pods: most run, a few crash-loop, some are Pending, a few were evicted.
func podState(h uint64) uint32 {
	switch v := h % 100; {
	case v < 90:
		return 0 // fixtures.PodRunning
	case v < 94:
		return 1 // fixtures.PodCrashLooping
	case v < 97:
		return 2 // fixtures.PodPending
	}
	return 3 // fixtures.PodFailed
}

// newCluster makes cluster i (1-based) with the objects it holds at start: ms objects, app after app
// — its CustomResourceDefinitions, then each app's Deployment, ReplicaSets, Service, ConfigMap,
// Pods, the Event of its last rollout, and its custom resources — of the kinds the cluster serves.
// Objects of kinds the simulation does not select are counted (the member has them) but not kept.
func (s *Simulator) newCluster(i int, now time.Time) *cluster {
	c := &cluster{i: i, name: clusterName(s.opts.ClusterPrefix, i, s.opts.Clusters), region: regions[(i-1)%len(regions)],
		rng: rand.New(rand.NewPCG(s.seed, uint64(i))), next: churnOrd}
	for k := range kinds {
		c.served[k] = kinds[k].version(i)
		if c.served[k] != "" && s.selected[k] {
			c.pairs[k] = &pair{k: k, version: c.served[k]}
		}
	}
	c.rv = clockRV(now)
	start := now.Unix()
	n := 0
	add := func(k int, o object) {
		if n >= s.opts.Objects || c.served[k] == "" {
			return
		}
		n++
		c.rv++
		o.rv = c.rv
		o.changed = o.created * 1e6
		if p := c.pairs[k]; p != nil {
			p.objs = append(p.objs, o)
		}
	}
	const day = 24 * 3600
	for crd := range 2 {
		add(kCRD, object{app: int32(crd), created: start - 400*day + int64(crd)*day})
	}
	for a := 0; n < s.opts.Objects; a++ {
		ap := s.addApps(a)
		h := mix(s.seed, 0xc1, uint64(i), uint64(a))
		created := start - int64(1+mix(s.seed, 0xa9e, uint64(a))%90)*day // the app's first rollout
		rolled := start - int64(1+h%(12*3600))                           // its last one, in the last 12 hours
		add(kDeployment, object{app: int32(a), gen: 2, created: created})
		add(kReplicaSet, object{app: int32(a), created: rolled})
		if a%2 == 0 {
			add(kReplicaSet, object{app: int32(a), ord: 1, aux: 1, created: created})
		}
		add(kService, object{app: int32(a), created: created})
		add(kConfigMap, object{app: int32(a), created: created})
		for p := range uint32(ap.Replicas) {
			ph := mix(s.seed, 0x90d, uint64(i), uint64(a), uint64(p))
			o := object{app: int32(a), ord: p, aux: podState(ph), created: rolled + int64(p)}
			if o.aux == 1 {
				o.gen = uint32(3 + ph>>8%40)
			}
			add(kPod, o)
		}
		add(kEvent, object{app: int32(a), created: rolled})
		if a%3 == 0 {
			add(kWidget, object{app: int32(a), created: created})
		}
		if a%4 == 1 {
			add(kGadget, object{app: int32(a), created: created})
		}
		c.apps = a + 1
	}
	return c
}
