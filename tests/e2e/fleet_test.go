//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// fleet is test data shaped like a real fleet's, created in every member: the same Deployment
// everywhere (names repeat across clusters), ConfigMaps in a selected and an unselected namespace, a
// Secret, a CRD with instances, label keys with dots and slashes.
type fleet struct {
	shop, payments string // namespaces: shop is selected, payments only partly
}

var (
	gvrDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrPods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrConfigMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrSecrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrWidgets     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func seedFleet(t *testing.T, env *testbed.Env) fleet {
	t.Helper()
	f := fleet{shop: uniqueName("shop"), payments: uniqueName("payments")}
	for _, cluster := range env.Clusters {
		env.KubectlRun(t, cluster, []byte(widgetCRD), "apply", "-f", "-")
		env.KubectlRun(t, cluster, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com")
		var b strings.Builder
		for _, ns := range []string{f.shop, f.payments} {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {team.example.com/owner: commerce}}\n", ns)
		}
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
  labels: {app: web, app.kubernetes.io/name: web, app.kubernetes.io/part-of: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: web}}
  template:
    metadata: {labels: {app: web, app.kubernetes.io/name: web}}
    spec:
      containers:
      - {name: nginx, image: "nginx:1.27", ports: [{containerPort: 80}]}
      - {name: envoy, image: "envoyproxy/envoy:v1.31"}
---
apiVersion: v1
kind: Secret
metadata: {name: db-credentials, namespace: %[1]s, labels: {app.kubernetes.io/name: db}}
stringData: {password: hunter2, username: shop}
`, f.shop)
		for i := range 5 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config-%d, namespace: %s, labels: {app.kubernetes.io/name: web, config.example.com/tier: \"%d\"}}\ndata: {cluster: %s, settings.yaml: \"%s\"}\n",
				i, f.shop, i%3, cluster, strings.Repeat("x", 2000))
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: pay-config-%d, namespace: %s}\ndata: {k: v}\n", i, f.payments)
		}
		for i := range 3 {
			fmt.Fprintf(&b, "---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: widget-%d, namespace: %s, labels: {app.kubernetes.io/name: web}}\nspec: {size: large}\n", i, f.shop)
		}
		applyFresh(t, env, cluster, []byte(b.String()))
	}
	t.Cleanup(func() {
		for _, cluster := range env.Clusters {
			dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
			for _, ns := range []string{f.shop, f.payments} {
				_ = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
			}
		}
	})
	return f
}

// registries writes the ResourceRegistry files the fleet tests collect with: some kinds cluster-wide,
// some in one namespace, across two registries.
func (f fleet) registries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps.yaml"), appsRegistry(f, f.shop, false))
	writeFile(t, filepath.Join(dir, "crds.yaml"), `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: fleet-crds}
spec:
  resourceSelectors:
  - {apiVersion: example.com/v1, kind: Widget}
`)
	return dir
}

// appsRegistry is the fleet's apps registry with ConfigMaps selected in configMapNS ("" = every
// namespace) and Secrets in the shop namespace unless dropSecrets.
func appsRegistry(f fleet, configMapNS string, dropSecrets bool) string {
	cm := "  - {apiVersion: v1, kind: ConfigMap}\n"
	if configMapNS != "" {
		cm = fmt.Sprintf("  - {apiVersion: v1, kind: ConfigMap, namespace: %s}\n", configMapNS)
	}
	secrets := fmt.Sprintf("  - {apiVersion: v1, kind: Secret, namespace: %s}\n", f.shop)
	if dropSecrets {
		secrets = ""
	}
	return `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: fleet-apps}
spec:
  targetCluster:
    clusterNames: [member1, member2, member3]
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment}
  - {apiVersion: v1, kind: Pod}
` + cm + secrets
}

// selected are the pairs the fleet registries select in each member, with their namespace scope.
func (f fleet) selected() map[schema.GroupVersionResource]string {
	return map[schema.GroupVersionResource]string{
		gvrDeployments: "", gvrPods: "", gvrConfigMaps: f.shop, gvrSecrets: f.shop, gvrWidgets: "",
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitPodsRunning waits until every member's Deployment pods run, so lists are not racing the rollout.
func waitRolledOut(t *testing.T, env *testbed.Env, ns string) {
	t.Helper()
	for _, cluster := range env.Clusters {
		env.KubectlRun(t, cluster, nil, "-n", ns, "rollout", "status", "deployment/web", "--timeout=120s")
	}
}

func discoveryServes(t *testing.T, env *testbed.Env, cluster string, gvr schema.GroupVersionResource) bool {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.RESTConfig(t, cluster))
	list, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

// applyFresh applies manifests that use a just-established CRD. Established does not mean kubectl's
// discovery lists the kind yet, so the apply (idempotent) is retried until every kind maps.
func applyFresh(t *testing.T, env *testbed.Env, cluster string, manifests []byte) {
	t.Helper()
	pollUntil(t, "kubectl apply on "+cluster, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.KubectlOutput(ctx, cluster, manifests, "apply", "-f", "-")
		if err != nil {
			t.Logf("retrying: %v", err)
		}
		return err == nil, nil
	})
}

func pollUntil(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
