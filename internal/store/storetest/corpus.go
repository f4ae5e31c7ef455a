package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Base is the corpus' reference time: every timestamp of the corpus is an offset from it.
var Base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Now is the instant every query of the suite is parsed at (query.Parse's now), so relative times
// ("35d") select the same objects on every run.
var Now = Base.Add(40 * 24 * time.Hour)

// Clusters are the corpus' member clusters. The same Deployments, Services and Nodes exist in
// every one, as in a fleet.
var Clusters = []string{"prod-eu", "prod-us", "staging"}

// Epoch is the epoch of the corpus' first list of every scope.
const Epoch int64 = 100

// Object is one Kubernetes object of the corpus as the generator knows it: enough to compute what
// a query should answer without asking a backend.
type Object struct {
	Cluster, Group, Version, Resource, Kind string
	Namespace, Name, UID                    string
	// ResourceVersion is the member's, as text (not always an integer: see unversioned writes).
	ResourceVersion string
	Epoch           int64
	Created         time.Time
	Changed         time.Time
	Labels          map[string]string
	Annotations     map[string]string
	Owners          []OwnerRef
	// Body is the rest of the object: spec, status, data.
	Body map[string]any

	// doc is the document the builder made of the object's last write; leaves its flattened
	// object, the paths and values a field selector can match.
	doc    []byte
	leaves map[string][]string
	text   []string
}

// OwnerRef is one owner reference.
type OwnerRef struct{ Kind, Name, UID string }

// Key names the object in answers and messages: cluster/kind/namespace/name.
func (o *Object) Key() string {
	return o.Cluster + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name
}

// id is the object's document id (store.DocID).
func (o *Object) id() string { return store.DocID(o.Cluster, o.UID) }

// Pair is the object's pair.
func (o *Object) Pair() store.Pair {
	return store.Pair{Cluster: o.Cluster, Group: o.Group, Resource: o.Resource}
}

// RV is the resourceVersion as the document holds it: 0 when not an integer.
func (o *Object) RV() int64 {
	n, err := strconv.ParseInt(o.ResourceVersion, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func (o *Object) clone() *Object {
	c := *o
	c.Labels = maps.Clone(o.Labels)
	c.Annotations = maps.Clone(o.Annotations)
	c.Body = cloneMap(o.Body)
	c.doc, c.leaves, c.text = nil, nil, nil
	return &c
}

func cloneMap(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // maps of JSON values only
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// JSON is the object as a member serves it, with what collectors prune left in for the builder
// to drop (managedFields, the last-applied annotation).
func (o *Object) JSON() []byte {
	apiVersion := o.Version
	if o.Group != "" {
		apiVersion = o.Group + "/" + o.Version
	}
	meta := map[string]any{
		"name": o.Name, "uid": o.UID, "resourceVersion": o.ResourceVersion,
		"creationTimestamp": o.Created.UTC().Format(time.RFC3339),
		"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update",
			"time": o.Changed.UTC().Format(time.RFC3339), "fieldsType": "FieldsV1"}},
	}
	if o.Namespace != "" {
		meta["namespace"] = o.Namespace
	}
	if len(o.Labels) > 0 {
		meta["labels"] = o.Labels
	}
	ann := maps.Clone(o.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[document.LastAppliedAnnotation] = `{"kind":"` + o.Kind + `"}`
	meta["annotations"] = ann
	if len(o.Owners) > 0 {
		var refs []any
		for _, r := range o.Owners {
			refs = append(refs, map[string]any{"apiVersion": "apps/v1", "kind": r.Kind, "name": r.Name, "uid": r.UID,
				"controller": true, "blockOwnerDeletion": true})
		}
		meta["ownerReferences"] = refs
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": o.Kind, "metadata": meta}
	maps.Copy(obj, o.Body)
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err) // maps of JSON values only
	}
	return b
}

// Event is the envelope a collector publishes for the object's current state.
func (o *Object) Event(typ envelope.Type) *envelope.Event {
	ev := &envelope.Event{V: envelope.Version, Type: typ, Cluster: o.Cluster, Group: o.Group, Version: o.Version,
		Resource: o.Resource, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID,
		ResourceVersion: o.ResourceVersion, Epoch: o.Epoch, ObservedAt: o.Changed.Add(time.Second), ChangedAt: o.Changed,
		Object: o.JSON()}
	return ev
}

// Ops turns events into the store's writes exactly as the indexer does (indexer/consumer.go,
// decode): the envelope as it travels (marshalled, then envelope.Unmarshal), the document from
// document.BuildDecoded for ADDED and MODIFIED, a delete for DELETED, versioned when the
// resourceVersion is a non-negative integer.
func Ops(evs ...*envelope.Event) ([]store.Op, error) {
	var ops []store.Op
	for _, in := range evs {
		msg, err := in.Marshal()
		if err != nil {
			return nil, err
		}
		ev, err := envelope.Unmarshal(msg)
		if err != nil {
			return nil, err
		}
		var op store.Op
		switch ev.Type {
		case envelope.Added, envelope.Modified:
			doc, err := document.BuildDecoded(ev)
			if err != nil {
				return nil, err
			}
			op = store.Op{Kind: ev.Kind, Cluster: ev.Cluster, UID: ev.UID, Doc: doc, Epoch: ev.Epoch}
		case envelope.Deleted:
			op = store.Op{Delete: true, Kind: ev.Kind, Cluster: ev.Cluster, UID: ev.UID, Epoch: ev.Epoch}
		default:
			return nil, fmt.Errorf("storetest: a %s event is a marker, not a write", ev.Type)
		}
		if rv, err := strconv.ParseInt(ev.ResourceVersion, 10, 64); err == nil && rv >= 0 {
			op.Versioned, op.Version = true, rv
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// Corpus is the fleet's objects as the backends should hold them: the generator's objects, then
// what the cases wrote and deleted.
type Corpus struct {
	objects []*Object      // live objects, in the order they were made
	pos     map[string]int // uid → index in objects
	nextRV  map[string]int64
}

// uid is a deterministic UUID for an object.
func uid(parts ...string) string {
	s := sha256.Sum256([]byte(strings.Join(parts, "/")))
	h := fmt.Sprintf("%x", s[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// suffix is a deterministic Pod name suffix, like the ReplicaSet controller's.
func suffix(parts ...string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	s := sha256.Sum256([]byte(strings.Join(parts, "/")))
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[int(s[i])%len(alphabet)]
	}
	return string(b)
}

func (c *Corpus) rv(cluster string) string {
	c.nextRV[cluster]++
	return strconv.FormatInt(c.nextRV[cluster], 10)
}

// deployment is one Deployment of the fleet, present in every cluster.
type deployment struct {
	name, hash, tier string
	replicas         int
	containers       [][2]string // name, image
	init             [][2]string
}

var deployments = map[string][]deployment{
	"shop": {
		{"web", "7d9f8c6b5", "frontend", 3, [][2]string{{"web", "nginx:1.27"}, {"istio-proxy", "istio/proxyv2:1.22"}}, [][2]string{{"migrate", "ghcr.io/acme/migrate:2.1"}}},
		{"api", "5c8d7f9b4", "backend", 2, [][2]string{{"api", "ghcr.io/acme/api:3.2"}, {"istio-proxy", "istio/proxyv2:1.22"}}, nil},
	},
	"payments": {
		{"web", "7d9f8c6b5", "frontend", 3, [][2]string{{"web", "nginx:1.27"}, {"istio-proxy", "istio/proxyv2:1.22"}}, [][2]string{{"migrate", "ghcr.io/acme/migrate:2.1"}}},
		{"api", "5c8d7f9b4", "backend", 2, [][2]string{{"api", "ghcr.io/acme/api:3.2"}, {"istio-proxy", "istio/proxyv2:1.22"}}, nil},
		{"worker", "6b7c5d8f9", "backend", 1, [][2]string{{"worker", "ghcr.io/acme/worker:3.2"}}, nil},
	},
}

// Namespaces are the namespaces of the fleet's applications, in every cluster.
var Namespaces = []string{"shop", "payments"}

// LeaseCount is how many Leases prod-eu's kube-system holds: the objects the paging-while-writing
// case changes.
const LeaseCount = 24

// BigSize is the size of the near-1 MiB ConfigMap value and annotation.
const BigSize = 1000 * 1000

// NewCorpus generates the fleet. It is deterministic: every call gives the same objects.
func NewCorpus() *Corpus {
	c := &Corpus{nextRV: map[string]int64{}, pos: map[string]int{}}
	for ci, cl := range Clusters {
		c.nextRV[cl] = int64(ci+1) * 100000
		for i := 1; i <= 3; i++ {
			c.add(c.node(cl, ci, i))
		}
		for _, ns := range Namespaces {
			for di, d := range deployments[ns] {
				c.add(c.deployment(cl, ns, di, d))
				for i := range d.replicas {
					c.add(c.pod(cl, ci, ns, di, d, i, true))
				}
				if cl == "staging" && ns == "shop" && d.name == "web" {
					c.add(c.pod(cl, ci, ns, di, d, d.replicas, false)) // unscheduled
				}
			}
			for si, name := range []string{"web", "api"} {
				c.add(c.service(cl, ns, si, name))
			}
			c.add(c.configMap(cl, ns, "kube-root-ca.crt", nil, map[string]any{"ca.crt": "-----BEGIN CERTIFICATE-----"}))
			c.add(c.configMap(cl, ns, ns+"-settings", map[string]string{"app.kubernetes.io/part-of": ns, "example.com/tier": "config"},
				map[string]any{"LOG_LEVEL": "info", "REGION": cl, "EMPTY": ""}))
		}
		c.add(c.configMap(cl, "kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"}, map[string]any{"Corefile": ".:53 { forward . /etc/resolv.conf }"}))
	}
	// prod-eu's control plane Leases: the objects that change while a client pages through them.
	for i := range LeaseCount {
		c.add(c.lease("prod-eu", fmt.Sprintf("lease-%02d", i), fmt.Sprintf("node-%d", i%3+1), Base.Add(time.Duration(i)*time.Minute)))
	}
	// Objects near 1 MiB: a dashboard ConfigMap and one whose annotation carries a blob.
	big := c.configMap("prod-eu", "payments", "grafana-dashboards", map[string]string{"app.kubernetes.io/name": "grafana", "grafana_dashboard": "1"},
		map[string]any{"dashboard.json": `{"panels":"` + strings.Repeat("p", BigSize) + `"}`, "small": "yes"})
	c.add(big)
	notes := c.configMap("staging", "shop", "release-notes", map[string]string{"app.kubernetes.io/name": "web"}, map[string]any{"version": "4.2"})
	notes.Annotations["example.com/blob"] = strings.Repeat("n", BigSize)
	c.add(notes)
	return c
}

func (c *Corpus) add(o *Object) {
	if o.Epoch == 0 {
		o.Epoch = Epoch
	}
	c.put(o)
}

func (c *Corpus) node(cl string, ci, i int) *Object {
	name := fmt.Sprintf("node-%d", i)
	labels := map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("%s-%c", cl, 'a'+i-1),
		"kubernetes.io/os": "linux"}
	if i == 1 {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	spec := map[string]any{"podCIDR": fmt.Sprintf("10.%d.%d.0/24", 240+ci, i)}
	ready := "True"
	if cl == "staging" && i == 3 {
		spec["unschedulable"] = true
		ready = "False"
	}
	kubelet := "v1.34.3"
	if cl == "staging" {
		kubelet = "v1.37.2"
	}
	return &Object{Cluster: cl, Version: "v1", Resource: "nodes", Kind: "Node", Name: name, UID: uid(cl, "Node", name),
		ResourceVersion: c.rv(cl), Created: Base.Add(-30*24*time.Hour + time.Duration(i)*24*time.Hour),
		Changed: Base.Add(time.Duration(ci*60+i) * time.Minute), Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		Body: map[string]any{"spec": spec, "status": map[string]any{
			"nodeInfo":   map[string]any{"kubeletVersion": kubelet, "architecture": "amd64"},
			"conditions": []any{map[string]any{"type": "Ready", "status": ready}, map[string]any{"type": "MemoryPressure", "status": "False"}},
			"addresses":  []any{map[string]any{"type": "InternalIP", "address": fmt.Sprintf("10.0.%d.%d", ci, i)}, map[string]any{"type": "Hostname", "address": name}},
		}}}
}

func containerList(cs [][2]string) []any {
	var out []any
	for _, c := range cs {
		out = append(out, map[string]any{"name": c[0], "image": c[1], "imagePullPolicy": "IfNotPresent"})
	}
	return out
}

func (c *Corpus) deployment(cl, ns string, di int, d deployment) *Object {
	labels := map[string]string{"app.kubernetes.io/name": d.name, "example.com/tier": d.tier, "app.kubernetes.io/part-of": ns}
	if ns == "shop" {
		labels["app"] = d.name
	}
	containers := d.containers
	if cl == "prod-us" && d.name == "web" {
		containers = [][2]string{{"web", "nginx:1.26"}, containers[1]} // drift: one member lags behind
	}
	podSpec := map[string]any{"containers": containerList(containers)}
	if d.init != nil {
		podSpec["initContainers"] = containerList(d.init)
	}
	ready := d.replicas
	if cl == "staging" && ns == "shop" && d.name == "web" {
		ready = d.replicas - 1
	}
	team := map[string]string{"shop": "checkout", "payments": "billing"}[ns]
	return &Object{Cluster: cl, Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespace: ns, Name: d.name,
		UID: uid(cl, "Deployment", ns, d.name), ResourceVersion: c.rv(cl), Created: Base.Add(time.Duration(di) * 24 * time.Hour),
		Changed: Base.Add(time.Duration(di)*24*time.Hour + 6*time.Hour), Labels: labels,
		Annotations: map[string]string{"example.com/team": team, "deployment.kubernetes.io/revision": "3"},
		Body: map[string]any{
			"spec": map[string]any{"replicas": d.replicas, "selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": d.name}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": d.name}}, "spec": podSpec}},
			"status": map[string]any{"replicas": d.replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": d.replicas},
		}}
}

func (c *Corpus) pod(cl string, ci int, ns string, di int, d deployment, i int, scheduled bool) *Object {
	rs := d.name + "-" + d.hash
	name := rs + "-" + suffix(cl, ns, d.name, strconv.Itoa(i))
	labels := map[string]string{"app.kubernetes.io/name": d.name, "example.com/tier": d.tier, "pod-template-hash": d.hash}
	if ns == "shop" {
		labels["app"] = d.name
	}
	containers := d.containers
	if cl == "prod-us" && d.name == "web" {
		containers = [][2]string{{"web", "nginx:1.26"}, containers[1]}
	}
	spec := map[string]any{"containers": containerList(containers), "restartPolicy": "Always", "serviceAccountName": "default"}
	if d.init != nil {
		spec["initContainers"] = containerList(d.init)
	}
	var statuses []any
	for k, ct := range containers {
		statuses = append(statuses, map[string]any{"name": ct[0], "image": ct[1], "ready": scheduled, "restartCount": (i + k) % 3})
	}
	status := map[string]any{"phase": "Running", "qosClass": "BestEffort", "containerStatuses": statuses,
		"podIP": fmt.Sprintf("10.%d.%d.%d", 240+ci, i%3+1, 10+di*10+i), "hostIP": fmt.Sprintf("10.0.%d.%d", ci, i%3+1),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "PodScheduled", "status": "True"}}}
	// A few Pods whose STATUS is not their phase, for sort=status: a crash loop, an image that
	// does not pull, a finished run.
	switch {
	case cl == "prod-us" && d.name == "worker":
		statuses[0].(map[string]any)["state"] = map[string]any{"waiting": map[string]any{"reason": "CrashLoopBackOff"}}
	case cl == "staging" && ns == "payments" && d.name == "api" && i == 1:
		statuses[0].(map[string]any)["state"] = map[string]any{"waiting": map[string]any{"reason": "ImagePullBackOff"}}
	case cl == "prod-eu" && d.name == "worker":
		status["phase"] = "Succeeded"
		statuses[0].(map[string]any)["state"] = map[string]any{"terminated": map[string]any{"exitCode": 0, "reason": "Completed"}}
	}
	if scheduled {
		spec["nodeName"] = fmt.Sprintf("node-%d", i%3+1)
	} else {
		status = map[string]any{"phase": "Pending", "qosClass": "BestEffort",
			"conditions": []any{map[string]any{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}}}
	}
	created := Base.Add(10*24*time.Hour + time.Duration(di*4+i)*time.Hour)
	return &Object{Cluster: cl, Version: "v1", Resource: "pods", Kind: "Pod", Namespace: ns, Name: name, UID: uid(cl, "Pod", ns, name),
		ResourceVersion: c.rv(cl), Created: created, Changed: created.Add(time.Duration(ci*7+i) * time.Minute), Labels: labels,
		Owners: []OwnerRef{{Kind: "ReplicaSet", Name: rs, UID: uid(cl, "ReplicaSet", ns, rs)}},
		Body:   map[string]any{"spec": spec, "status": status}}
}

func (c *Corpus) service(cl, ns string, si int, name string) *Object {
	typ := "ClusterIP"
	if ns == "payments" && name == "api" {
		typ = "NodePort"
	}
	return &Object{Cluster: cl, Version: "v1", Resource: "services", Kind: "Service", Namespace: ns, Name: name,
		UID: uid(cl, "Service", ns, name), ResourceVersion: c.rv(cl), Created: Base.Add(24*time.Hour + time.Duration(si)*time.Hour),
		Changed: Base.Add(24*time.Hour + time.Duration(si)*time.Hour), Labels: map[string]string{"app.kubernetes.io/name": name},
		Body: map[string]any{"spec": map[string]any{"type": typ, "clusterIP": fmt.Sprintf("10.96.%d.%d", si, len(ns)),
			"selector": map[string]any{"app.kubernetes.io/name": name},
			"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}}}}}
}

func (c *Corpus) configMap(cl, ns, name string, labels map[string]string, data map[string]any) *Object {
	return &Object{Cluster: cl, Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: ns, Name: name,
		UID: uid(cl, "ConfigMap", ns, name), ResourceVersion: c.rv(cl), Created: Base.Add(2 * 24 * time.Hour),
		Changed: Base.Add(3 * 24 * time.Hour), Labels: labels, Annotations: map[string]string{}, Body: map[string]any{"data": data}}
}

func (c *Corpus) lease(cl, name, holder string, created time.Time) *Object {
	return &Object{Cluster: cl, Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Kind: "Lease", Namespace: "kube-system",
		Name: name, UID: uid(cl, "Lease", "kube-system", name), ResourceVersion: c.rv(cl), Epoch: Epoch, Created: created, Changed: created,
		Labels: map[string]string{"example.com/holder": holder, "example.com/round": "1"},
		Body:   map[string]any{"spec": map[string]any{"holderIdentity": holder, "leaseDurationSeconds": 40}}}
}

// Live is every object the backends should hold now.
func (c *Corpus) Live() []*Object { return c.objects }

// find returns the live object of key (cluster/kind/namespace/name), or nil.
func (c *Corpus) find(key string) *Object {
	for _, o := range c.objects {
		if o.Key() == key {
			return o
		}
	}
	return nil
}

// put records o as the live state of its (cluster, uid) (replacing the one before): a uid is
// unique within one member only.
func (c *Corpus) put(o *Object) {
	if i, ok := c.pos[o.id()]; ok {
		c.objects[i] = o
		return
	}
	c.pos[o.id()] = len(c.objects)
	c.objects = append(c.objects, o)
}

// remove forgets the objects for which gone says true, returning how many.
func (c *Corpus) remove(gone func(*Object) bool) int {
	kept := c.objects[:0]
	n := 0
	for _, o := range c.objects {
		if gone(o) {
			n++
			continue
		}
		kept = append(kept, o)
	}
	clear(c.objects[len(kept):])
	c.objects = kept
	clear(c.pos)
	for i, o := range c.objects {
		c.pos[o.id()] = i
	}
	return n
}
