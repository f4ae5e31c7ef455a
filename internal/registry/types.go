package registry

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The types below copy Karmada's search.karmada.io/v1alpha1 ResourceRegistry field for field (with
// policy/v1alpha1 ClusterAffinity and cluster/v1alpha1 LocalSecretReference inlined), so that YAML
// written for Karmada decodes strictly without changes. Status is kept for the same reason: objects
// exported with `kubectl get -o yaml` carry it.

const (
	// Group and Version of the ResourceRegistry API.
	Group   = "search.karmada.io"
	Version = "v1alpha1"
	// APIVersion is the apiVersion a ResourceRegistry document carries.
	APIVersion = Group + "/" + Version
	// Kind is the kind of a ResourceRegistry document.
	Kind = "ResourceRegistry"
	// ListKind is the kind of Karmada's list type, as `kubectl get resourceregistries -o yaml` may
	// write it.
	ListKind = "ResourceRegistryList"

	// SecretDataAnnotation on a ResourceRegistry set to SecretDataInclude keeps the data and
	// stringData of the Secrets it selects; any other registry's Secrets are redacted.
	SecretDataAnnotation = "kubesearch.io/secret-data"
	// SecretDataInclude keeps Secret data; SecretDataRedact, the default, removes it.
	SecretDataInclude = "include"
	SecretDataRedact  = "redact"

	// Field selector keys of a ClusterAffinity, matched against a Cluster's Provider, Region and Zone.
	ProviderField = "provider"
	RegionField   = "region"
	ZoneField     = "zone"
)

// ResourceRegistry says which resources of which clusters are collected.
type ResourceRegistry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceRegistrySpec `json:"spec,omitempty"`
	// Status is accepted so exported objects load; kubesearch never reads it.
	Status ResourceRegistryStatus `json:"status,omitempty"`
}

// ResourceRegistrySpec is the desired scope of collection.
type ResourceRegistrySpec struct {
	// TargetCluster selects the member clusters to collect from; empty selects every cluster.
	TargetCluster ClusterAffinity `json:"targetCluster"`
	// ResourceSelectors lists the resource types to collect.
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`
	// BackendStore names where documents are stored; see OpenSearchBackend.
	BackendStore *BackendStoreConfig `json:"backendStore,omitempty"`
}

// ClusterAffinity selects member clusters (Karmada policy/v1alpha1).
type ClusterAffinity struct {
	// LabelSelector, when set, must match the cluster's labels.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// FieldSelector, when set, must match the cluster's provider, region and zone.
	FieldSelector *FieldSelector `json:"fieldSelector,omitempty"`
	// ClusterNames, when not empty, restricts selection to these clusters.
	ClusterNames []string `json:"clusterNames,omitempty"`
	// ExcludeClusters are never selected.
	ExcludeClusters []string `json:"exclude,omitempty"`
}

// FieldSelector selects clusters by provider, region and zone; its expressions are ANDed.
type FieldSelector struct {
	MatchExpressions []corev1.NodeSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ResourceSelector names one resource type and, optionally, one namespace.
type ResourceSelector struct {
	// APIVersion is group/version, or just the version for the core group.
	APIVersion string `json:"apiVersion"`
	// Kind is the resource's kind, e.g. Deployment.
	Kind string `json:"kind"`
	// Namespace restricts collection to one namespace; empty means all namespaces.
	Namespace string `json:"namespace,omitempty"`
}

// BackendStoreConfig names the store of the collected objects.
type BackendStoreConfig struct {
	OpenSearch *OpenSearchConfig `json:"openSearch,omitempty"`
}

// OpenSearchConfig locates an OpenSearch cluster.
type OpenSearchConfig struct {
	// Addresses are node URLs, e.g. https://localhost:9200.
	Addresses []string `json:"addresses"`
	// SecretRef names the Secret holding the username and password.
	SecretRef LocalSecretReference `json:"secretRef,omitempty"`
}

// LocalSecretReference names a Secret (Karmada cluster/v1alpha1).
type LocalSecretReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ResourceRegistryStatus is Karmada's status, and kubesearch's extension of it (Admitted); kept for
// decoding only: a file's status is never read.
type ResourceRegistryStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Admitted is not Karmada's (its status has conditions only): the collector records there the
	// generation of an object it collects, so that whichever collector reads the object next (a
	// restarted one, another replica) keeps that generation collected when an edit after it is
	// refused. Objects exported from kubesearch's store carry it.
	Admitted *AdmittedGeneration `json:"admitted,omitempty"`
}

// AdmittedGeneration is one generation of a ResourceRegistry object as the collector admitted it:
// the object's uid (a status restored or copied onto another object is not its), the generation
// and its spec.
type AdmittedGeneration struct {
	UID        types.UID            `json:"uid"`
	Generation int64                `json:"generation"`
	Spec       ResourceRegistrySpec `json:"spec"`
}

// resourceRegistryList is Karmada's list type, and also the shape of a `kind: List` document.
type resourceRegistryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceRegistry `json:"items"`
}

// Where ResourceRegistry objects live on a Karmada control plane that kubesearch serves
// search.karmada.io/v1alpha1 for. The group's APIService sends every request of that group version
// to the query API, so a CustomResourceDefinition of it on the control plane would be shadowed (it
// registers a local APIService of the same name); the objects are stored under a group of
// kubesearch's own instead, with Karmada's schema, and the query API serves them under Karmada's
// group, rewriting only the apiVersion. The collector reads them there directly.
const (
	StoreGroup    = "karmada.kubesearch.io"
	StoreVersion  = "v1alpha1"
	StoreResource = "resourceregistries"
)
