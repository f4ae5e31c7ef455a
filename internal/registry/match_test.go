package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMatches(t *testing.T) {
	eu := Cluster{Name: "member1", Labels: map[string]string{"env": "prod", "team": "a"},
		Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a"}
	bare := Cluster{Name: "member2"} // no labels, no provider, region or zone

	fields := func(exprs ...corev1.NodeSelectorRequirement) *FieldSelector {
		return &FieldSelector{MatchExpressions: exprs}
	}
	in := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	notIn := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: values}
	}
	labels := func(kv ...string) *metav1.LabelSelector {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &metav1.LabelSelector{MatchLabels: m}
	}

	tests := []struct {
		name     string
		affinity ClusterAffinity
		cluster  Cluster
		want     bool
	}{
		{"empty affinity matches all", ClusterAffinity{}, eu, true},
		{"empty affinity matches a bare cluster", ClusterAffinity{}, bare, true},
		{"names include", ClusterAffinity{ClusterNames: []string{"member0", "member1"}}, eu, true},
		{"names exclude others", ClusterAffinity{ClusterNames: []string{"member0"}}, eu, false},
		{"exclude", ClusterAffinity{ExcludeClusters: []string{"member1"}}, eu, false},
		{"exclude wins over names", ClusterAffinity{ClusterNames: []string{"member1"}, ExcludeClusters: []string{"member1"}}, eu, false},
		{"exclude another", ClusterAffinity{ExcludeClusters: []string{"member2"}}, eu, true},
		{"labels match", ClusterAffinity{LabelSelector: labels("env", "prod")}, eu, true},
		{"labels differ", ClusterAffinity{LabelSelector: labels("env", "staging")}, eu, false},
		{"labels absent", ClusterAffinity{LabelSelector: labels("env", "prod")}, bare, false},
		{"empty label selector matches all", ClusterAffinity{LabelSelector: &metav1.LabelSelector{}}, bare, true},
		{"label expression", ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}}, eu, true},
		{"invalid label selector matches nothing", ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Bogus"}}}}, eu, false},
		{"labels and names both needed", ClusterAffinity{LabelSelector: labels("env", "prod"), ClusterNames: []string{"member9"}}, eu, false},
		{"provider in", ClusterAffinity{FieldSelector: fields(in("provider", "aws", "gcp"))}, eu, true},
		{"provider not in", ClusterAffinity{FieldSelector: fields(in("provider", "gcp"))}, eu, false},
		{"region notin", ClusterAffinity{FieldSelector: fields(notIn("region", "us-east-1"))}, eu, true},
		{"region notin excludes", ClusterAffinity{FieldSelector: fields(notIn("region", "eu-west-1"))}, eu, false},
		{"zone in", ClusterAffinity{FieldSelector: fields(in("zone", "eu-west-1a"))}, eu, true},
		{"expressions are ANDed", ClusterAffinity{FieldSelector: fields(in("provider", "aws"), in("zone", "eu-west-1b"))}, eu, false},
		{"unset field fails In", ClusterAffinity{FieldSelector: fields(in("provider", "aws"))}, bare, false},
		{"unset field passes NotIn", ClusterAffinity{FieldSelector: fields(notIn("provider", "aws"))}, bare, true},
		{"In without values matches nothing", ClusterAffinity{FieldSelector: fields(in("provider"))}, eu, false},
		{"unsupported operator matches nothing", ClusterAffinity{FieldSelector: fields(
			corev1.NodeSelectorRequirement{Key: "provider", Operator: corev1.NodeSelectorOpExists})}, eu, false},
		{"labels and fields both needed", ClusterAffinity{LabelSelector: labels("env", "prod"), FieldSelector: fields(in("provider", "gcp"))}, eu, false},
		{"everything set and matching", ClusterAffinity{LabelSelector: labels("env", "prod"), FieldSelector: fields(in("region", "eu-west-1")),
			ClusterNames: []string{"member1"}, ExcludeClusters: []string{"member2"}}, eu, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Matches(tt.affinity, tt.cluster); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}
