package collector

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubesearch/kubesearch/internal/document"
)

// RedactedAnnotation marks a Secret whose values were blanked before publishing.
const RedactedAnnotation = "kubesearch.io/data-redacted"

// prune drops what no search needs and what would only bloat every event: managedFields (often half of
// an object) and kubectl's last-applied copy of the whole object. Secrets lose their values unless the
// registry opted in; keys stay so "which Secret holds tls.crt" can still be answered. Values become ""
// rather than a marker string so the object still decodes as a corev1.Secret (data is base64).
// It mutates obj.
func prune(obj *unstructured.Unstructured, redactSecret bool) {
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	if ann := obj.GetAnnotations(); ann != nil {
		if _, ok := ann[document.LastAppliedAnnotation]; ok {
			delete(ann, document.LastAppliedAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			obj.SetAnnotations(ann)
		}
	}
	if !redactSecret {
		return
	}
	redacted := false
	for _, field := range []string{"data", "stringData"} {
		m, ok := obj.Object[field].(map[string]any)
		if !ok {
			continue
		}
		for k := range m {
			m[k] = ""
			redacted = true
		}
	}
	if redacted {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[RedactedAnnotation] = "true"
		obj.SetAnnotations(ann)
	}
}
