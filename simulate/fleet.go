package simulate

import (
	"fmt"
	"strconv"

	"github.com/kubesearch/kubesearch/internal/fixtures"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// kind is one resource type of the simulated members, described as their discovery describes it.
type kind struct {
	group, resource, kind string
	namespaced            bool
	singular              string
	shortNames            []string
	categories            []string
	// version is the version cluster i (1-based) serves, "" when it does not serve the kind.
	version func(i int) string
	// weight is the kind's share of the churn; creatable kinds are also created and deleted by it.
	weight    int
	creatable bool
}

// id is how --kinds names the kind: its resource, dotted with the group unless core.
func (k *kind) id() string {
	if k.group == "" {
		return k.resource
	}
	return k.resource + "." + k.group
}

func always(v string) func(int) string { return func(int) string { return v } }

// Indices of kinds, in the order clusters list them.
const (
	kCRD = iota
	kDeployment
	kReplicaSet
	kService
	kConfigMap
	kPod
	kEvent
	kWidget
	kGadget
	kindCount
)

// widgetVersion: every third cluster still serves widgets.example.com at v1beta1 only (an older
// chart of the operator), the others at v1.
func widgetVersion(i int) string {
	if i%3 == 0 {
		return "v1beta1"
	}
	return "v1"
}

// gadgetVersion: gadgets.ops.example.com is not installed in every fourth cluster; it is served at
// v1 in even clusters and at v1alpha1 in odd ones.
func gadgetVersion(i int) string {
	switch {
	case i%4 == 0:
		return ""
	case i%2 == 0:
		return "v1"
	}
	return "v1alpha1"
}

var kinds = [kindCount]kind{
	kCRD: {group: "apiextensions.k8s.io", resource: "customresourcedefinitions", kind: "CustomResourceDefinition", singular: "customresourcedefinition",
		shortNames: []string{"crd", "crds"}, categories: []string{"api-extensions"}, version: always("v1")},
	kDeployment: {group: "apps", resource: "deployments", kind: "Deployment", namespaced: true, singular: "deployment",
		shortNames: []string{"deploy"}, categories: []string{"all"}, version: always("v1"), weight: 5},
	kReplicaSet: {group: "apps", resource: "replicasets", kind: "ReplicaSet", namespaced: true, singular: "replicaset",
		shortNames: []string{"rs"}, categories: []string{"all"}, version: always("v1"), weight: 5},
	kService: {resource: "services", kind: "Service", namespaced: true, singular: "service",
		shortNames: []string{"svc"}, categories: []string{"all"}, version: always("v1"), weight: 2},
	kConfigMap: {resource: "configmaps", kind: "ConfigMap", namespaced: true, singular: "configmap",
		shortNames: []string{"cm"}, version: always("v1"), weight: 8, creatable: true},
	kPod: {resource: "pods", kind: "Pod", namespaced: true, singular: "pod",
		shortNames: []string{"po"}, categories: []string{"all"}, version: always("v1"), weight: 55, creatable: true},
	kEvent: {resource: "events", kind: "Event", namespaced: true, singular: "event",
		shortNames: []string{"ev"}, version: always("v1"), weight: 20, creatable: true},
	kWidget: {group: "example.com", resource: "widgets", kind: "Widget", namespaced: true, singular: "widget",
		shortNames: []string{"wd"}, categories: []string{"all"}, version: widgetVersion, weight: 3},
	kGadget: {group: "ops.example.com", resource: "gadgets", kind: "Gadget", namespaced: true, singular: "gadget",
		version: gadgetVersion, weight: 2},
}

// KindNames are the names --kinds accepts, in the order clusters list them.
func KindNames() []string {
	out := make([]string, 0, kindCount)
	for i := range kinds {
		out = append(out, kinds[i].id())
	}
	return out
}

// record is the ledger's selection record of kind k as cluster i serves it.
func (k *kind) record(cluster string, version string) registry.SelectionRecord {
	return registry.SelectionRecord{V: registry.LedgerVersion, Cluster: cluster, Group: k.group, Version: version,
		Resource: k.resource, Kind: k.kind, Namespaced: k.namespaced, Singular: k.singular,
		ShortNames: k.shortNames, Categories: k.categories}
}

// Names of the fleet's applications and the namespaces (teams) they run in: a fleet's apps are a
// few dozen services, each rolled out to every cluster.
var (
	appNames = []string{"checkout", "cart", "catalog", "payments", "frontend", "search", "recommendations", "shipping",
		"inventory", "auth", "notifications", "orders", "pricing", "reviews", "accounts", "gateway", "ledger", "fraud",
		"loyalty", "media", "analytics", "reporting", "scheduler", "billing", "invoices", "coupons", "wishlist",
		"profile", "sessions", "geo", "tax", "returns", "support", "chat", "emails", "sms", "webhooks", "audit",
		"exports", "imports"}
	namespaces = []string{"shop", "payments", "platform", "identity", "data", "comms", "ops", "growth"}
	regions    = []string{"eu-west-1", "us-east-1", "ap-southeast-2", "eu-central-1", "us-west-2", "sa-east-1"}
)

// app is the i-th application of the fleet (0-based), the same in every cluster.
type app struct {
	fixtures.App
	hash, oldHash string // pod-template-hash of the current and of the previous ReplicaSet
	// previous is the version before Version: what the last ring of the rollout still runs.
	previous string
}

// app is the i-th app. Every app a cluster runs is made by New (addApps), and none after, so the
// writers read them without a lock.
func (s *Simulator) app(i int) *app { return s.apps[i] }

// addApps makes the apps up to the i-th.
func (s *Simulator) addApps(i int) *app {
	for len(s.apps) <= i {
		s.apps = append(s.apps, s.newApp(len(s.apps)))
	}
	return s.apps[i]
}

func (s *Simulator) newApp(i int) *app {
	h := mix(s.seed, 0xa11, uint64(i))
	name := appNames[i%len(appNames)]
	if n := i / len(appNames); n > 0 {
		name += "-" + strconv.Itoa(n+1)
	}
	ns := namespaces[h%uint64(len(namespaces))]
	a := &app{App: fixtures.App{
		Name: name, Namespace: ns, Team: ns + "-team",
		Image:    "registry.example.com/" + ns + "/" + name,
		Version:  fmt.Sprintf("%d.%d.%d", 1+h>>8%3, h>>16%20, 1+h>>24%9),
		Replicas: int32(3 + h>>32%8), // 3–10: Pods are about half of a cluster's objects
		Sidecars: int(h >> 40 % 3),
	}}
	a.previous = fmt.Sprintf("%d.%d.%d", 1+h>>8%3, h>>16%20, h>>24%9)
	a.hash, a.oldHash = podTemplateHash(mix(s.seed, 0x7e3, uint64(i), 2)), podTemplateHash(mix(s.seed, 0x7e3, uint64(i), 1))
	return a
}

// version is the app's version in cluster c: every tenth cluster lags one patch release behind (the
// last ring of a rollout), so "which clusters still run X" has an answer.
func (a *app) version(c *cluster) string {
	if c.i%10 != 0 {
		return a.Version
	}
	return a.previous
}

// clusterName is the name of cluster i (1-based) of a fleet of n.
func clusterName(prefix string, i, n int) string {
	width := max(4, len(strconv.Itoa(n)))
	return fmt.Sprintf("%s%0*d", prefix, width, i)
}
