package registry

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reg builds a registry targeting the named clusters (all when none); selectors are written
// "apiVersion kind [namespace]".
func reg(name string, clusters []string, selectors ...string) ResourceRegistry {
	r := ResourceRegistry{ObjectMeta: metav1.ObjectMeta{Name: name}}
	r.Spec.TargetCluster.ClusterNames = clusters
	for _, s := range selectors {
		f := strings.Fields(s)
		sel := ResourceSelector{APIVersion: f[0], Kind: f[1]}
		if len(f) > 2 {
			sel.Namespace = f[2]
		}
		r.Spec.ResourceSelectors = append(r.Spec.ResourceSelectors, sel)
	}
	return r
}

func includeSecrets(r ResourceRegistry) ResourceRegistry {
	r.Annotations = map[string]string{SecretDataAnnotation: SecretDataInclude}
	return r
}

func kubeconfigCluster(name string) Cluster {
	return Cluster{Name: name, Kubeconfig: "/etc/kubesearch/kubeconfig", Context: name}
}

func TestNewPlan(t *testing.T) {
	m1, m2, m3 := kubeconfigCluster("member1"), kubeconfigCluster("member2"), kubeconfigCluster("member3")
	all := []Cluster{m3, m1, m2} // NewPlan sorts them
	tests := []struct {
		name       string
		registries []ResourceRegistry
		clusters   []Cluster
		want       Plan
	}{
		{
			name:       "cluster-wide absorbs namespaced, across registries",
			registries: []ResourceRegistry{reg("a", nil, "v1 Pod team-a", "v1 Pod team-b"), reg("b", nil, "v1 Pod")},
			clusters:   []Cluster{m1},
			want: Plan{Clusters: []ClusterPlan{{Cluster: m1, Selections: []Selection{{
				SelectionKey: SelectionKey{Kind: "Pod"}, Version: "v1",
				Sources: []Source{
					{Registry: "a", Index: 0, APIVersion: "v1", Namespace: "team-a"},
					{Registry: "a", Index: 1, APIVersion: "v1", Namespace: "team-b"},
					{Registry: "b", Index: 0, APIVersion: "v1"},
				},
			}}}}},
		},
		{
			name:       "namespaces stay apart without a cluster-wide selection",
			registries: []ResourceRegistry{reg("a", nil, "v1 ConfigMap y", "v1 ConfigMap x", "v1 ConfigMap y")},
			clusters:   []Cluster{m1},
			want: Plan{Clusters: []ClusterPlan{{Cluster: m1, Selections: []Selection{
				{SelectionKey: SelectionKey{Kind: "ConfigMap", Namespace: "x"}, Version: "v1",
					Sources: []Source{{Registry: "a", Index: 1, APIVersion: "v1", Namespace: "x"}}},
				{SelectionKey: SelectionKey{Kind: "ConfigMap", Namespace: "y"}, Version: "v1",
					Sources: []Source{
						{Registry: "a", Index: 0, APIVersion: "v1", Namespace: "y"},
						{Registry: "a", Index: 2, APIVersion: "v1", Namespace: "y"},
					}},
			}}}},
		},
		{
			name: "version is not identity; the first selector's version is preferred",
			registries: []ResourceRegistry{
				reg("a", nil, "autoscaling/v2 HorizontalPodAutoscaler"),
				reg("b", nil, "autoscaling/v1 HorizontalPodAutoscaler"),
			},
			clusters: []Cluster{m1},
			want: Plan{Clusters: []ClusterPlan{{Cluster: m1, Selections: []Selection{{
				SelectionKey: SelectionKey{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, Version: "v2",
				Sources: []Source{
					{Registry: "a", Index: 0, APIVersion: "autoscaling/v2"},
					{Registry: "b", Index: 0, APIVersion: "autoscaling/v1"},
				},
			}}}}},
		},
		{
			name: "per cluster, sorted; a cluster nothing selects is left out",
			registries: []ResourceRegistry{
				reg("a", []string{"member1", "member2"}, "apps/v1 Deployment"),
				reg("b", []string{"member2"}, "v1 Pod kube-system"),
			},
			clusters: all,
			want: Plan{Clusters: []ClusterPlan{
				{Cluster: m1, Selections: []Selection{
					{SelectionKey: SelectionKey{Group: "apps", Kind: "Deployment"}, Version: "v1",
						Sources: []Source{{Registry: "a", APIVersion: "apps/v1"}}},
				}},
				{Cluster: m2, Selections: []Selection{
					{SelectionKey: SelectionKey{Kind: "Pod", Namespace: "kube-system"}, Version: "v1",
						Sources: []Source{{Registry: "b", APIVersion: "v1", Namespace: "kube-system"}}},
					{SelectionKey: SelectionKey{Group: "apps", Kind: "Deployment"}, Version: "v1",
						Sources: []Source{{Registry: "a", APIVersion: "apps/v1"}}},
				}},
			}},
		},
		{
			name:       "secrets are redacted by default",
			registries: []ResourceRegistry{reg("a", nil, "v1 Secret")},
			clusters:   []Cluster{m1},
			want: Plan{Clusters: []ClusterPlan{{Cluster: m1, Selections: []Selection{
				{SelectionKey: SelectionKey{Kind: "Secret"}, Version: "v1", SecretData: false,
					Sources: []Source{{Registry: "a", APIVersion: "v1"}}},
			}}}},
		},
		{
			name: "secret data kept when every registry selecting them opts in",
			registries: []ResourceRegistry{
				includeSecrets(reg("a", nil, "v1 Secret payments", "v1 ConfigMap")),
				includeSecrets(reg("b", nil, "v1 Secret")),
			},
			clusters: []Cluster{m1},
			want: Plan{Clusters: []ClusterPlan{{Cluster: m1, Selections: []Selection{
				{SelectionKey: SelectionKey{Kind: "ConfigMap"}, Version: "v1", SecretData: false,
					Sources: []Source{{Registry: "a", Index: 1, APIVersion: "v1"}}},
				{SelectionKey: SelectionKey{Kind: "Secret"}, Version: "v1", SecretData: true,
					Sources: []Source{
						{Registry: "a", APIVersion: "v1", Namespace: "payments"},
						{Registry: "b", APIVersion: "v1"},
					}},
			}}}},
		},
		{
			name: "registries disagreeing on secret data in different clusters",
			registries: []ResourceRegistry{
				includeSecrets(reg("a", []string{"member1"}, "v1 Secret")),
				reg("b", []string{"member2"}, "v1 Secret"),
			},
			clusters: []Cluster{m1, m2},
			want: Plan{Clusters: []ClusterPlan{
				{Cluster: m1, Selections: []Selection{{SelectionKey: SelectionKey{Kind: "Secret"}, Version: "v1",
					SecretData: true, Sources: []Source{{Registry: "a", APIVersion: "v1"}}}}},
				{Cluster: m2, Selections: []Selection{{SelectionKey: SelectionKey{Kind: "Secret"}, Version: "v1",
					Sources: []Source{{Registry: "b", APIVersion: "v1"}}}}},
			}},
		},
		{
			name:       "no registries",
			registries: nil,
			clusters:   all,
			want:       Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewPlan(tt.registries, tt.clusters)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NewPlan:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNewPlanErrors(t *testing.T) {
	m1 := kubeconfigCluster("member1")
	tests := []struct {
		name       string
		registries []ResourceRegistry
		clusters   []Cluster
		want       []string
	}{
		{
			name:       "kind in two groups",
			registries: []ResourceRegistry{reg("a", nil, "v1 Event"), reg("b", []string{"member9"}, "events.k8s.io/v1 Event")},
			clusters:   []Cluster{m1},
			want: []string{`plan: registry "b": spec.resourceSelectors[0].kind: Invalid value: "Event": ` +
				`kind Event is also selected in API group "" (core) by registry "a" spec.resourceSelectors[0]; both would be stored in index kubernetes-event`},
		},
		{
			name: "secret data disagreement where both select",
			registries: []ResourceRegistry{
				reg("a", nil, "v1 Pod", "v1 Secret"),
				includeSecrets(reg("b", nil, "v1 Secret payments")),
			},
			clusters: []Cluster{m1},
			want: []string{`plan: cluster "member1": Secret: registry "b" spec.resourceSelectors[0] keeps Secret data ` +
				`(annotation kubesearch.io/secret-data: include) but registry "a" spec.resourceSelectors[1] redacts it`},
		},
		{
			name:       "invalid clusters",
			registries: []ResourceRegistry{reg("a", nil, "v1 Pod")},
			clusters:   []Cluster{m1, m1},
			want:       []string{`plan: clusters[1].name: Duplicate value: "member1"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.registries, tt.clusters)
			assertPrefixes(t, errorLines(err), tt.want)
		})
	}
}

func TestSelectionHelpers(t *testing.T) {
	s := Selection{SelectionKey: SelectionKey{Group: "apps", Kind: "Deployment", Namespace: "x"},
		Sources: []Source{{Registry: "b"}, {Registry: "a"}, {Registry: "b", Index: 1}}}
	if got := s.Registries(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("Registries = %q", got)
	}
	if got := s.String(); got != "Deployment.apps in namespace x" {
		t.Errorf("String = %q", got)
	}
	if got := (SelectionKey{Kind: "Secret"}).String(); got != "Secret" {
		t.Errorf("String = %q", got)
	}
	if s.IsSecret() || !(SelectionKey{Kind: "Secret"}).IsSecret() || (SelectionKey{Group: "x.io", Kind: "Secret"}).IsSecret() {
		t.Error("IsSecret is wrong")
	}
}

func TestDiff(t *testing.T) {
	m1, m2, m3 := kubeconfigCluster("member1"), kubeconfigCluster("member2"), kubeconfigCluster("member3")
	plan := func(t *testing.T, clusters []Cluster, registries ...ResourceRegistry) Plan {
		t.Helper()
		p, err := NewPlan(registries, clusters)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pods := SelectionKey{Kind: "Pod"}
	deployments := SelectionKey{Group: "apps", Kind: "Deployment"}
	keys := func(sels []Selection) []SelectionKey {
		var k []SelectionKey
		for _, s := range sels {
			k = append(k, s.SelectionKey)
		}
		return k
	}
	// summary flattens a change for comparison: the keys added, removed and updated.
	type summary struct {
		Cluster                 string
		Added, Removed, Updated []SelectionKey
		Reconnect, NeedsRestart bool
	}
	summarize := func(changes []ClusterChange) []summary {
		var out []summary
		for _, c := range changes {
			s := summary{Cluster: c.Cluster, Added: keys(c.Added), Removed: keys(c.Removed), Reconnect: c.Reconnect}
			for _, u := range c.Updated {
				s.Updated = append(s.Updated, u.New.SelectionKey)
				s.NeedsRestart = s.NeedsRestart || u.NeedsRestart()
			}
			out = append(out, s)
		}
		return out
	}
	moved := m2
	moved.Context = "member2-admin"

	tests := []struct {
		name     string
		from, to func(t *testing.T) Plan
		want     []summary
	}{
		{
			name: "identical plans",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod")) },
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod")) },
		},
		{
			name: "selection added in one cluster, removed in another",
			from: func(t *testing.T) Plan {
				return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod"), reg("b", []string{"member2"}, "apps/v1 Deployment"))
			},
			to: func(t *testing.T) Plan {
				return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod"), reg("b", []string{"member1"}, "apps/v1 Deployment"))
			},
			want: []summary{
				{Cluster: "member1", Added: []SelectionKey{deployments}},
				{Cluster: "member2", Removed: []SelectionKey{deployments}},
			},
		},
		{
			name: "cluster joins and leaves",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod")) },
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m2, m3}, reg("a", nil, "v1 Pod")) },
			want: []summary{
				{Cluster: "member1", Removed: []SelectionKey{pods}},
				{Cluster: "member3", Added: []SelectionKey{pods}},
			},
		},
		{
			name: "narrowing to namespaces removes the cluster-wide selection",
			from: func(t *testing.T) Plan {
				return plan(t, []Cluster{m1}, reg("a", nil, "v1 Pod x"), reg("b", nil, "v1 Pod"))
			},
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m1}, reg("a", nil, "v1 Pod x")) },
			want: []summary{{Cluster: "member1", Added: []SelectionKey{{Kind: "Pod", Namespace: "x"}}, Removed: []SelectionKey{pods}}},
		},
		{
			name: "another registry joins a selection: update without restart",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1}, reg("a", nil, "v1 Pod")) },
			to: func(t *testing.T) Plan {
				return plan(t, []Cluster{m1}, reg("a", nil, "v1 Pod"), reg("b", nil, "v1 Pod"))
			},
			want: []summary{{Cluster: "member1", Updated: []SelectionKey{pods}}},
		},
		{
			name: "preferred version changes: restart",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1}, reg("a", nil, "apps/v1 Deployment")) },
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m1}, reg("a", nil, "apps/v1beta2 Deployment")) },
			want: []summary{{Cluster: "member1", Updated: []SelectionKey{deployments}, NeedsRestart: true}},
		},
		{
			name: "secret data switched on: restart",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1}, reg("a", nil, "v1 Secret")) },
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m1}, includeSecrets(reg("a", nil, "v1 Secret"))) },
			want: []summary{{Cluster: "member1", Updated: []SelectionKey{{Kind: "Secret"}}, NeedsRestart: true}},
		},
		{
			name: "cluster reached another way: reconnect",
			from: func(t *testing.T) Plan { return plan(t, []Cluster{m1, m2}, reg("a", nil, "v1 Pod")) },
			to:   func(t *testing.T) Plan { return plan(t, []Cluster{m1, moved}, reg("a", nil, "v1 Pod")) },
			want: []summary{{Cluster: "member2", Reconnect: true}},
		},
		{
			name: "relabelled cluster leaves a label-selected registry",
			from: func(t *testing.T) Plan {
				c := m1
				c.Labels = map[string]string{"env": "prod"}
				r := reg("a", nil, "v1 Pod")
				r.Spec.TargetCluster.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
				return plan(t, []Cluster{c}, r, reg("b", nil, "v1 Node"))
			},
			to: func(t *testing.T) Plan {
				c := m1
				c.Labels = map[string]string{"env": "dev"}
				r := reg("a", nil, "v1 Pod")
				r.Spec.TargetCluster.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
				return plan(t, []Cluster{c}, r, reg("b", nil, "v1 Node"))
			},
			want: []summary{{Cluster: "member1", Removed: []SelectionKey{pods}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(Diff(tt.from(t), tt.to(t)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestPlanCluster(t *testing.T) {
	p, err := NewPlan([]ResourceRegistry{reg("a", []string{"member2"}, "v1 Pod")},
		[]Cluster{kubeconfigCluster("member1"), kubeconfigCluster("member2")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Cluster("member1"); ok {
		t.Error("member1 is selected by nothing but has a plan")
	}
	cp, ok := p.Cluster("member2")
	if !ok || len(cp.Selections) != 1 || cp.Selections[0].Kind != "Pod" {
		t.Errorf("Cluster(member2) = %+v, %v", cp, ok)
	}
}
