package collector

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubesearch/kubesearch/internal/document"
)

// prune drops what no search needs and what would only bloat every event: managedFields (often half of
// an object) and kubectl's last-applied copy of the whole object. A Secret whose registry did not opt
// in to its data is reduced to the allow-list of redactedSecret instead. It mutates obj.
func prune(obj *unstructured.Unstructured, redactSecret bool) {
	if redactSecret {
		obj.Object = redactedSecret(obj.Object)
		return
	}
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
}
