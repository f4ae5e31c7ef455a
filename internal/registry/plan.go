package registry

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SelectionKey identifies a selection within one cluster. The version is deliberately not part of
// it: members serve different versions of the same objects.
type SelectionKey struct {
	Group string
	Kind  string
	// Namespace is the one namespace collected; empty means every namespace.
	Namespace string
}

func (k SelectionKey) String() string {
	gk := schema.GroupKind{Group: k.Group, Kind: k.Kind}.String() // "Deployment.apps", or "Pod"
	if k.Namespace == "" {
		return gk
	}
	return gk + " in namespace " + k.Namespace
}

// Selection is one resource type, in one namespace or all, collected from one cluster.
type Selection struct {
	SelectionKey
	// Version is the version to try first: that of the first selector choosing this selection. The
	// collector resolves the version the member actually serves through discovery.
	Version string
	// SecretData says the data and stringData of Secrets are kept; false redacts them. Only ever true
	// for core Secrets.
	SecretData bool
	// Sources are the selectors that chose it, in registry order, including the namespaced ones a
	// cluster-wide selection absorbed.
	Sources []Source
}

// Source is one selector of one registry.
type Source struct {
	Registry string
	// Index is the selector's position in spec.resourceSelectors.
	Index      int
	APIVersion string
	// Namespace is what the selector asked for, which may be narrower than the selection's.
	Namespace string
}

// Registries returns the names of the registries that chose the selection, without repeats, in
// registry order: the registries whose status it feeds.
func (s Selection) Registries() []string {
	var names []string
	for _, src := range s.Sources {
		if !slices.Contains(names, src.Registry) {
			names = append(names, src.Registry)
		}
	}
	return names
}

// IsSecret reports whether the selection collects core Secrets, whose data needs redaction.
func (k SelectionKey) IsSecret() bool { return k.Group == "" && k.Kind == "Secret" }

// ClusterPlan is what to collect from one cluster.
type ClusterPlan struct {
	Cluster Cluster
	// Selections are sorted by group, kind and namespace.
	Selections []Selection
}

// Plan is the union of the registries over the clusters: for every cluster that at least one
// registry selects, what to collect from it. Plans are plain values; compare two with Diff.
type Plan struct {
	// Clusters are sorted by name.
	Clusters []ClusterPlan
}

// Cluster returns the plan of the named cluster; false when nothing is collected from it.
func (p Plan) Cluster(name string) (ClusterPlan, bool) {
	i, ok := slices.BinarySearchFunc(p.Clusters, name, func(c ClusterPlan, name string) int {
		return cmp.Compare(c.Cluster.Name, name)
	})
	if !ok {
		return ClusterPlan{}, false
	}
	return p.Clusters[i], true
}

// NewPlan computes what to collect from each cluster. The registries and clusters are validated
// first. For each cluster, every selector of every registry whose targetCluster matches it is
// merged by (group, kind, namespace); a cluster-wide selection absorbs the namespaced ones of its
// group and kind. Registries whose merged Secret selections disagree about keeping Secret data are
// an error, since the index holds one copy of each Secret.
func NewPlan(registries []ResourceRegistry, clusters []Cluster) (Plan, error) {
	if err := errors.Join(Validate(registries), ValidateClusters(clusters)); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, func(a, b Cluster) int { return cmp.Compare(a.Name, b.Name) })

	var (
		plan Plan
		errs []error
	)
	for _, c := range sorted {
		selections, err := planCluster(registries, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(selections) > 0 {
			plan.Clusters = append(plan.Clusters, ClusterPlan{Cluster: c, Selections: selections})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	return plan, nil
}

// planCluster merges the selectors of every registry matching the cluster.
func planCluster(registries []ResourceRegistry, c Cluster) ([]Selection, error) {
	type groupKind struct{ group, kind string }
	// byGK keeps the sources of each group and kind in registry order; order lists the group-kinds as
	// first seen, so that errors come out in a stable order.
	byGK := map[groupKind][]Source{}
	var order []groupKind
	secretData := map[string]bool{} // registry name -> keeps Secret data

	for i := range registries {
		r := &registries[i]
		if !Matches(r.Spec.TargetCluster, c) {
			continue
		}
		secretData[r.Name] = r.Annotations[SecretDataAnnotation] == SecretDataInclude
		for k, sel := range r.Spec.ResourceSelectors {
			gv, err := schema.ParseGroupVersion(sel.APIVersion)
			if err != nil {
				return nil, fmt.Errorf("registry %q: %s: %w", r.Name,
					field.NewPath("spec", "resourceSelectors").Index(k).Child("apiVersion"), err)
			}
			gk := groupKind{gv.Group, sel.Kind}
			if _, seen := byGK[gk]; !seen {
				order = append(order, gk)
			}
			byGK[gk] = append(byGK[gk], Source{Registry: r.Name, Index: k, APIVersion: sel.APIVersion,
				Namespace: sel.Namespace})
		}
	}

	var (
		selections []Selection
		errs       []error
	)
	for _, gk := range order {
		sources := byGK[gk]
		clusterWide := slices.ContainsFunc(sources, func(s Source) bool { return s.Namespace == "" })
		// Group sources into selections by namespace, keeping the order of first appearance.
		var keys []SelectionKey
		merged := map[SelectionKey][]Source{}
		for _, src := range sources {
			key := SelectionKey{Group: gk.group, Kind: gk.kind, Namespace: src.Namespace}
			if clusterWide {
				key.Namespace = ""
			}
			if _, seen := merged[key]; !seen {
				keys = append(keys, key)
			}
			merged[key] = append(merged[key], src)
		}
		for _, key := range keys {
			srcs := merged[key]
			s := Selection{SelectionKey: key, Version: versionOf(srcs[0].APIVersion), Sources: srcs}
			if key.IsSecret() {
				keep, err := agreeOnSecretData(c.Name, key, srcs, secretData)
				if err != nil {
					errs = append(errs, err)
				}
				s.SecretData = keep
			}
			selections = append(selections, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(selections, func(a, b Selection) int { return compareKeys(a.SelectionKey, b.SelectionKey) })
	return selections, nil
}

// agreeOnSecretData returns whether the sources of a Secret selection keep Secret data, or an error
// naming two sources that disagree.
func agreeOnSecretData(cluster string, key SelectionKey, srcs []Source, keep map[string]bool) (bool, error) {
	first := srcs[0]
	for _, src := range srcs[1:] {
		if keep[src.Registry] == keep[first.Registry] {
			continue
		}
		in, out := first, src
		if !keep[in.Registry] {
			in, out = out, in
		}
		return false, fmt.Errorf("cluster %q: %s: registry %q %s keeps Secret data (annotation %s: %s) but registry %q %s redacts it; the index holds one copy of each Secret, so make them agree",
			cluster, key, in.Registry, selectorPath(in.Index), SecretDataAnnotation, SecretDataInclude,
			out.Registry, selectorPath(out.Index))
	}
	return keep[first.Registry], nil
}

func selectorPath(i int) string {
	return field.NewPath("spec", "resourceSelectors").Index(i).String()
}

func versionOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Version
}

func compareKeys(a, b SelectionKey) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace))
}

// ClusterChange is what changed for one cluster between two plans.
type ClusterChange struct {
	Cluster string
	// Added selections are to start; Removed ones to stop, and their documents to purge.
	Added   []Selection
	Removed []Selection
	// Updated selections kept their key but changed their preferred version, SecretData or sources.
	Updated []SelectionUpdate
	// Reconnect says the way to reach the cluster changed: every selection that remains needs a new
	// client.
	Reconnect bool
}

// SelectionUpdate is a selection in the old and in the new plan.
type SelectionUpdate struct {
	Old, New Selection
}

// NeedsRestart reports whether collection must start over (a new list, a new epoch): the preferred
// version or the Secret redaction changed, not merely which registries chose the selection.
func (u SelectionUpdate) NeedsRestart() bool {
	return u.Old.Version != u.New.Version || u.Old.SecretData != u.New.SecretData
}

// Diff lists, per cluster in name order, what a reload from one plan to the next changes; clusters without
// changes are left out. A cluster present in only one plan has all its selections added or removed.
// A narrowing from all namespaces to some shows as the cluster-wide selection removed and namespaced
// ones added: purge the removed one before starting the added ones, or the purge deletes their
// documents too.
func Diff(from, to Plan) []ClusterChange {
	names := map[string]struct{}{}
	for _, c := range from.Clusters {
		names[c.Cluster.Name] = struct{}{}
	}
	for _, c := range to.Clusters {
		names[c.Cluster.Name] = struct{}{}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)

	var changes []ClusterChange
	for _, name := range sorted {
		o, inOld := from.Cluster(name)
		n, inNew := to.Cluster(name)
		ch := ClusterChange{Cluster: name, Reconnect: inOld && inNew && !sameConnection(o.Cluster, n.Cluster)}
		oldSel := map[SelectionKey]Selection{}
		for _, s := range o.Selections {
			oldSel[s.SelectionKey] = s
		}
		newKeys := map[SelectionKey]bool{}
		for _, s := range n.Selections {
			newKeys[s.SelectionKey] = true
			prev, ok := oldSel[s.SelectionKey]
			switch {
			case !ok:
				ch.Added = append(ch.Added, s)
			case !sameSelection(prev, s):
				ch.Updated = append(ch.Updated, SelectionUpdate{Old: prev, New: s})
			}
		}
		for _, s := range o.Selections {
			if !newKeys[s.SelectionKey] {
				ch.Removed = append(ch.Removed, s)
			}
		}
		if ch.Reconnect || len(ch.Added)+len(ch.Removed)+len(ch.Updated) > 0 {
			changes = append(changes, ch)
		}
	}
	return changes
}

func sameSelection(a, b Selection) bool {
	return a.SelectionKey == b.SelectionKey && a.Version == b.Version && a.SecretData == b.SecretData &&
		slices.Equal(a.Sources, b.Sources)
}
