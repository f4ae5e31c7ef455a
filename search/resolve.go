package search

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// kinds resolves what the user types into the resources the REST search takes, through the facade's
// discovery: the REST search takes plurals only (pods, deployments.apps), and kubectl users type short
// names (po, deploy), singulars and kinds (Pod). Discovery lists what the fleet caches, so a kind
// no member caches is an error here, as kubectl's "doesn't have a resource type", rather than a
// search that silently finds nothing. It asks the server only when needed, once.
type kinds struct {
	mapper meta.RESTMapperWithContext
}

func newKinds(cfg *rest.Config, hc *http.Client, warn func(string)) (*kinds, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	cached := memory.NewMemCacheClientWithContext(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached)
	return &kinds{mapper: restmapper.NewShortcutExpanderWithContext(mapper, dc, warn)}, nil
}

// resolve maps one typed resource (pods, po, pod, Pod, deployments.apps, deployments.v1.apps,
// Deployment.apps) the way kubectl's resource builder does: as a resource first, then as a kind.
func (k *kinds) resolve(ctx context.Context, arg string) (*meta.RESTMapping, error) {
	full, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if full != nil {
		gvk, _ = k.mapper.KindForWithContext(ctx, *full)
	}
	if gvk.Empty() {
		gvk, _ = k.mapper.KindForWithContext(ctx, gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return k.mapping(ctx, arg, gvk.GroupKind(), gvk.Version)
	}
	fullKind, gk := schema.ParseKindArg(arg)
	if fullKind != nil {
		if m, err := k.mapping(ctx, arg, fullKind.GroupKind(), fullKind.Version); err == nil {
			return m, nil
		}
	}
	return k.mapping(ctx, arg, gk)
}

func (k *kinds) mapping(ctx context.Context, arg string, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := k.mapper.RESTMappingWithContext(ctx, gk, versions...)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("resource %q: the fleet caches no such resource type (kubectl api-resources through the facade lists those it does)", arg)
	}
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", arg, err)
	}
	return m, nil
}

// kindOf maps an object's apiVersion and kind back to its resource, for its table columns.
func (k *kinds) kindOf(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	m, err := k.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	return m.Resource, true
}

// searchName is a resource as the REST search's resources parameter names it; ".core" keeps the core
// group's pods from matching a CRD of the same plural, as kubectl's mapping means the core one.
func searchName(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource + ".core"
	}
	return gr.Resource + "." + gr.Group
}

// imagePaths are where each kind keeps its containers' images: the REST search matches a path
// through lists, so one requirement matches any container.
var imagePaths = map[schema.GroupResource]string{
	{Resource: "pods"}:                        "spec.containers.image",
	{Resource: "replicationcontrollers"}:      "spec.template.spec.containers.image",
	{Resource: "podtemplates"}:                "template.spec.containers.image",
	{Group: "apps", Resource: "deployments"}:  "spec.template.spec.containers.image",
	{Group: "apps", Resource: "replicasets"}:  "spec.template.spec.containers.image",
	{Group: "apps", Resource: "statefulsets"}: "spec.template.spec.containers.image",
	{Group: "apps", Resource: "daemonsets"}:   "spec.template.spec.containers.image",
	{Group: "batch", Resource: "jobs"}:        "spec.template.spec.containers.image",
	{Group: "batch", Resource: "cronjobs"}:    "spec.jobTemplate.spec.template.spec.containers.image",
}

// imagePath is the one path of the kinds' images. A field selector's requirements all hold at once,
// so kinds keeping images at different paths cannot be searched by image together.
func imagePath(grs []schema.GroupResource) (string, error) {
	paths := map[string][]string{}
	for _, gr := range grs {
		p, ok := imagePaths[gr]
		if !ok {
			return "", fmt.Errorf("--image: %s has no containers kubectl search knows of (it knows pods and the workloads' pod templates)", gr)
		}
		paths[p] = append(paths[p], gr.String())
	}
	if len(paths) > 1 {
		var each []string
		for p, names := range paths {
			each = append(each, strings.Join(names, ",")+" at "+p)
		}
		slices.Sort(each)
		return "", fmt.Errorf("--image: the kinds keep images at different paths (%s); search them one kind at a time", strings.Join(each, "; "))
	}
	for p := range paths {
		return p, nil
	}
	return "", nil
}
