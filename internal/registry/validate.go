package registry

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FieldError is one validation error of one registry. Validate and Load return these joined with
// errors.Join, so a caller can list them with errors.As on each or print the whole at once.
type FieldError struct {
	// Source says where the registry was read, e.g. "registries/a.yaml: document 2"; empty when the
	// registry was not loaded from a file.
	Source string
	// Registry is the registry's name.
	Registry string
	// Err names the field path, the bad value and what is wrong.
	Err *field.Error
}

func (e *FieldError) Error() string {
	msg := fmt.Sprintf("registry %q: %v", e.Registry, e.Err)
	if e.Source != "" {
		return e.Source + ": " + msg
	}
	return msg
}

func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks each registry and the registries as a set (unique names; no kind selected in two
// API groups). Every error is returned at once, joined; nil means valid.
func Validate(registries []ResourceRegistry) error {
	return validateSet(registries, nil)
}

// ValidateRegistry checks one registry on its own, as Karmada's admission does, plus kubesearch's
// stricter rules (see the package doc). Paths start at the object's root ("metadata", "spec").
func ValidateRegistry(r *ResourceRegistry) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&r.ObjectMeta, false, apivalidation.NameIsDNSSubdomain,
		field.NewPath("metadata"))
	if v, ok := r.Annotations[SecretDataAnnotation]; ok && v != SecretDataInclude && v != SecretDataRedact {
		allErrs = append(allErrs, field.NotSupported(
			field.NewPath("metadata", "annotations").Key(SecretDataAnnotation), v,
			[]string{SecretDataInclude, SecretDataRedact}))
	}

	spec := field.NewPath("spec")
	allErrs = append(allErrs, validateClusterAffinity(&r.Spec.TargetCluster, spec.Child("targetCluster"))...)
	for i := range r.Spec.ResourceSelectors {
		allErrs = append(allErrs, validateResourceSelector(&r.Spec.ResourceSelectors[i],
			spec.Child("resourceSelectors").Index(i))...)
	}
	allErrs = append(allErrs, validateBackendStore(r.Spec.BackendStore, spec.Child("backendStore"))...)
	return allErrs
}

// validateSet validates every registry and the set; sources, when not nil, says where registry i was
// read, for error messages.
func validateSet(registries []ResourceRegistry, sources []string) error {
	source := func(i int) string {
		if sources == nil {
			return ""
		}
		return sources[i]
	}
	var errs []error
	add := func(i int, list ...*field.Error) {
		for _, e := range list {
			errs = append(errs, &FieldError{Source: source(i), Registry: registries[i].Name, Err: e})
		}
	}

	firstByName := map[string]int{}
	// kinds maps a lower-cased kind (the index name's part) to the first selector that chose it.
	type selectorRef struct {
		registry, index int
		group           string
	}
	kinds := map[string]selectorRef{}

	for i := range registries {
		r := &registries[i]
		add(i, ValidateRegistry(r)...)

		if r.Name != "" {
			if j, dup := firstByName[r.Name]; dup {
				detail := "a registry of this name is already defined"
				if s := source(j); s != "" {
					detail += " in " + s
				}
				add(i, &field.Error{Type: field.ErrorTypeDuplicate, Field: "metadata.name", BadValue: r.Name,
					Detail: detail})
			} else {
				firstByName[r.Name] = i
			}
		}

		for k, sel := range r.Spec.ResourceSelectors {
			gv, err := schema.ParseGroupVersion(sel.APIVersion)
			if err != nil || sel.Kind == "" {
				continue // already reported
			}
			key := strings.ToLower(sel.Kind)
			first, seen := kinds[key]
			if !seen {
				kinds[key] = selectorRef{registry: i, index: k, group: gv.Group}
				continue
			}
			if first.group == gv.Group {
				continue
			}
			msg := fmt.Sprintf("kind %s is also selected in API group %s by registry %q %s; both would be stored in index kubernetes-%s, so select it in one group only",
				sel.Kind, groupName(first.group), registries[first.registry].Name,
				field.NewPath("spec", "resourceSelectors").Index(first.index), key)
			if sel.Kind == "Event" && (gv.Group == "" || gv.Group == EventsGroup) && (first.group == "" || first.group == EventsGroup) {
				// The same objects in two groups, under one document key (cluster, uid): nothing
				// is lost by collecting one.
				msg += " (the query API serves Events in both groups from either)"
			}
			add(i, field.Invalid(field.NewPath("spec", "resourceSelectors").Index(k).Child("kind"), sel.Kind, msg))
		}
	}
	return errors.Join(errs...)
}

func groupName(group string) string {
	if group == "" {
		return `"" (core)`
	}
	return fmt.Sprintf("%q", group)
}

func validateClusterAffinity(a *ClusterAffinity, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if a.LabelSelector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(a.LabelSelector,
			metav1validation.LabelSelectorValidationOptions{}, path.Child("labelSelector"))...)
	}
	if a.FieldSelector != nil {
		exprs := path.Child("fieldSelector", "matchExpressions")
		for i, e := range a.FieldSelector.MatchExpressions {
			p := exprs.Index(i)
			switch e.Key {
			case ProviderField, RegionField, ZoneField:
			default:
				allErrs = append(allErrs, field.NotSupported(p.Child("key"), e.Key,
					[]string{ProviderField, RegionField, ZoneField}))
			}
			switch e.Operator {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
				if len(e.Values) == 0 {
					// Karmada accepts this and then matches no cluster at all; say so instead.
					allErrs = append(allErrs, field.Required(p.Child("values"),
						fmt.Sprintf("operator %s needs at least one value", e.Operator)))
				}
			default:
				allErrs = append(allErrs, field.NotSupported(p.Child("operator"), e.Operator,
					[]corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn}))
			}
		}
	}
	// A name that cannot be a cluster name never matches; it is a typo worth reporting.
	for i, name := range a.ClusterNames {
		for _, msg := range validation.IsDNS1123Label(name) {
			allErrs = append(allErrs, field.Invalid(path.Child("clusterNames").Index(i), name, msg))
		}
	}
	for i, name := range a.ExcludeClusters {
		for _, msg := range validation.IsDNS1123Label(name) {
			allErrs = append(allErrs, field.Invalid(path.Child("exclude").Index(i), name, msg))
		}
	}
	return allErrs
}

func validateResourceSelector(s *ResourceSelector, path *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s.APIVersion == "" {
		// Karmada's CRD requires it too: without a group the kind is ambiguous.
		allErrs = append(allErrs, field.Required(path.Child("apiVersion"), "e.g. v1 or apps/v1"))
	} else if gv, err := schema.ParseGroupVersion(s.APIVersion); err != nil {
		allErrs = append(allErrs, field.Invalid(path.Child("apiVersion"), s.APIVersion, err.Error()))
	} else {
		if gv.Version == "" {
			allErrs = append(allErrs, field.Invalid(path.Child("apiVersion"), s.APIVersion,
				"must name a version, e.g. apps/v1"))
		} else {
			for _, msg := range validation.IsDNS1123Label(gv.Version) {
				allErrs = append(allErrs, field.Invalid(path.Child("apiVersion"), s.APIVersion, "version: "+msg))
			}
		}
		if gv.Group != "" {
			for _, msg := range validation.IsDNS1123Subdomain(gv.Group) {
				allErrs = append(allErrs, field.Invalid(path.Child("apiVersion"), s.APIVersion, "group: "+msg))
			}
		}
	}
	if s.Kind == "" {
		allErrs = append(allErrs, field.Required(path.Child("kind"), "e.g. Deployment"))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(s.Kind)); len(msgs) > 0 {
		// The same rule the API server applies to a CRD's kind.
		allErrs = append(allErrs, field.Invalid(path.Child("kind"), s.Kind,
			"must be a kind such as Deployment: letters, digits and '-', starting with a letter"))
	}
	if s.Namespace != "" {
		for _, msg := range apivalidation.ValidateNamespaceName(s.Namespace, false) {
			allErrs = append(allErrs, field.Invalid(path.Child("namespace"), s.Namespace, msg))
		}
	}
	return allErrs
}

func validateBackendStore(b *BackendStoreConfig, path *field.Path) field.ErrorList {
	if b == nil || b.OpenSearch == nil {
		return nil
	}
	var allErrs field.ErrorList
	osPath := path.Child("openSearch")
	if len(b.OpenSearch.Addresses) == 0 {
		allErrs = append(allErrs, field.Required(osPath.Child("addresses"), "at least one node URL, e.g. https://localhost:9200"))
	}
	for i, addr := range b.OpenSearch.Addresses {
		allErrs = append(allErrs, validateAddress(addr, osPath.Child("addresses").Index(i))...)
	}
	ref := b.OpenSearch.SecretRef
	if ref.Name != "" || ref.Namespace != "" {
		refPath := osPath.Child("secretRef")
		if ref.Namespace == "" {
			allErrs = append(allErrs, field.Required(refPath.Child("namespace"), "the Secret's namespace"))
		} else {
			for _, msg := range apivalidation.ValidateNamespaceName(ref.Namespace, false) {
				allErrs = append(allErrs, field.Invalid(refPath.Child("namespace"), ref.Namespace, msg))
			}
		}
		if ref.Name == "" {
			allErrs = append(allErrs, field.Required(refPath.Child("name"), "the Secret's name"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
				allErrs = append(allErrs, field.Invalid(refPath.Child("name"), ref.Name, msg))
			}
		}
	}
	return allErrs
}

func validateAddress(addr string, path *field.Path) field.ErrorList {
	switch shown, problem := CheckNodeURL(addr); problem {
	case URLUnparsable:
		return field.ErrorList{field.Invalid(path, shown, "not a URL")}
	case URLWithCredentials:
		return field.ErrorList{field.Invalid(path, shown, "must not carry credentials; put them in the Secret named by secretRef")}
	case URLNotHTTP:
		return field.ErrorList{field.Invalid(path, shown, "must be an http or https URL with a host")}
	}
	return nil
}

// CheckAddressFlag checks the node URLs of --opensearch-addresses, one error per bad one.
func CheckAddressFlag(addrs []string) []error {
	var errs []error
	for _, a := range addrs {
		switch shown, problem := CheckNodeURL(a); problem {
		case URLUnparsable:
			errs = append(errs, fmt.Errorf("--opensearch-addresses: %q: not a URL", shown))
		case URLWithCredentials:
			errs = append(errs, fmt.Errorf("--opensearch-addresses: %q: credentials belong in --opensearch-username-file/--opensearch-password-file or --opensearch-secret-dir, not in a URL that ends up in logs", shown))
		case URLNotHTTP:
			errs = append(errs, fmt.Errorf("--opensearch-addresses: %q: want an http or https URL with a host", shown))
		}
	}
	return errs
}

// URLProblem is what CheckNodeURL finds wrong with a node URL.
type URLProblem int

// What a node URL may have wrong.
const (
	URLFine URLProblem = iota
	URLUnparsable
	// URLWithCredentials: credentials in a URL end up in logs; each source of addresses says
	// where they belong instead.
	URLWithCredentials
	URLNotHTTP
)

// CheckNodeURL checks an OpenSearch node URL, wherever it is configured (a registry's backend,
// the indexer's and query API's --opensearch-addresses), and gives it as it may be shown: with
// any password redacted.
func CheckNodeURL(addr string) (shown string, problem URLProblem) {
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		// url.Parse's error repeats the input, which may hold a password.
		return redactURL(addr), URLUnparsable
	case u.User != nil:
		return u.Redacted(), URLWithCredentials
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return addr, URLNotHTTP // no credentials in it: shown as written
	}
	return addr, URLFine
}

// redactURL hides what could be a password in a string that did not parse as a URL.
func redactURL(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if scheme := strings.Index(s, "://"); scheme >= 0 && scheme < at {
			return s[:scheme+3] + "xxxxx" + s[at:]
		}
		return "xxxxx" + s[at:]
	}
	return s
}
