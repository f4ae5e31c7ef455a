package registry

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Matches reports whether the affinity selects the cluster, with Karmada's semantics: an excluded
// cluster never matches; otherwise the label selector, the field selector and the name list must
// each match when set, and an empty affinity matches every cluster. An invalid selector matches
// nothing, as in Karmada (validation reports it).
func Matches(affinity ClusterAffinity, cluster Cluster) bool {
	if slices.Contains(affinity.ExcludeClusters, cluster.Name) {
		return false
	}
	if affinity.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(affinity.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(cluster.Labels)) {
			return false
		}
	}
	if affinity.FieldSelector != nil && !fieldsMatch(affinity.FieldSelector.MatchExpressions, cluster) {
		return false
	}
	return len(affinity.ClusterNames) == 0 || slices.Contains(affinity.ClusterNames, cluster.Name)
}

// fieldsMatch evaluates the expressions like label requirements over provider, region and zone: an
// unset field is absent, so In fails on it and NotIn holds.
func fieldsMatch(exprs []corev1.NodeSelectorRequirement, c Cluster) bool {
	fields := map[string]string{}
	for k, v := range map[string]string{ProviderField: c.Provider, RegionField: c.Region, ZoneField: c.Zone} {
		if v != "" {
			fields[k] = v
		}
	}
	for _, e := range exprs {
		v, ok := fields[e.Key]
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			if len(e.Values) == 0 || !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if len(e.Values) == 0 || ok && slices.Contains(e.Values, v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
