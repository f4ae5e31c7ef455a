package collector

// RedactedAnnotation marks a Secret reduced to the allow-list of redactedSecret before publishing.
const RedactedAnnotation = "kubesearch.io/data-redacted"

// redactedSecret returns what of a Secret may be published without its registry's opt-in: an
// allow-list, not a deny-list. Tools keep copies of a Secret's values wherever they like — kubectl
// and Pulumi in kubectl's last-applied annotation, kapp in kapp.k14s.io/original and
// kapp.k14s.io/original-diff, kubectl --record in kubernetes.io/change-cause — and a list of places
// to blank is wrong the day one more tool does. So nothing survives that is not listed here as
// harmless:
//
//   - apiVersion, kind and type (kubernetes.io/tls, helm.sh/release.v1: what searches filter on);
//     immutable, a boolean;
//   - the keys of data with every value "" ("which Secret holds tls.crt" stays answerable, the
//     Table's Data column stays right, and the object still decodes as a corev1.Secret), never
//     stringData, which the API server folds into data and never returns; except data.release of a
//     Helm release Secret, rebuilt from the allow-list of sanitizedHelmRelease and marked with
//     HelmReleaseSanitizedAnnotation, so helm list answers which chart versions run where;
//   - the metadata fields of harmlessSecretMetadata, and of the annotations only those of
//     harmlessSecretAnnotation, plus RedactedAnnotation saying why the rest is missing.
//
// Everything else goes: values, stringData, managedFields, every other annotation, and any field a
// later Kubernetes adds, until someone decides it is harmless.
func redactedSecret(in map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "type"} {
		if s, ok := in[k].(string); ok {
			out[k] = s
		}
	}
	if b, ok := in["immutable"].(bool); ok {
		out["immutable"] = b
	}
	sanitized := false
	if data, ok := in["data"].(map[string]any); ok {
		keys := make(map[string]any, len(data))
		for k := range data {
			keys[k] = ""
		}
		// Helm keeps its release record in a Secret; blanked, helm list shows an empty table and says
		// nothing. So the record is published rebuilt from the allow-list of sanitizedHelmRelease,
		// and one that does not decode as a release is blanked like any other value: the error is
		// dropped on purpose, blanking is its handling, and its text may quote what it failed on.
		if s, ok := data["release"].(string); ok && out["type"] == helmReleaseSecretType {
			if rel, err := sanitizedHelmRelease(s); err == nil {
				keys["release"] = rel
				sanitized = true
			}
		}
		out["data"] = keys
	}
	src, _ := in["metadata"].(map[string]any)
	meta := map[string]any{}
	for k, v := range src {
		if harmlessSecretMetadata(k) {
			meta[k] = v
		}
	}
	ann := map[string]any{}
	if a, ok := src["annotations"].(map[string]any); ok {
		for k, v := range a {
			if harmlessSecretAnnotation(k) {
				ann[k] = v
			}
		}
	}
	ann[RedactedAnnotation] = "true"
	if sanitized {
		ann[HelmReleaseSanitizedAnnotation] = "true"
	}
	meta["annotations"] = ann
	out["metadata"] = meta
	return out
}

// harmlessSecretMetadata reports whether a metadata field of a redacted Secret is published
// (annotations are filtered apart). Identity and lifecycle fields hold names, uids, counters and
// times the API server validates. Labels are kept although their values are free text: selectors
// need them, and a value is at most 63 characters of [-._a-zA-Z0-9] — no tool copies a manifest there
// (the README says what a label can still carry).
func harmlessSecretMetadata(field string) bool {
	switch field {
	case "name", "generateName", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
		"labels", "ownerReferences", "finalizers":
		return true
	}
	return false
}

// harmlessSecretAnnotation reports whether an annotation of a redacted Secret is published: well-known
// keys whose writers put names or uids of other objects there, never a value of the Secret.
func harmlessSecretAnnotation(key string) bool {
	switch key {
	case RedactedAnnotation,
		"resource.karmada.io/cached-from-cluster", // the member a Karmada proxy read the object from
		// The ServiceAccount a token Secret belongs to (the token controller writes both).
		"kubernetes.io/service-account.name", "kubernetes.io/service-account.uid",
		// The Helm release that owns the Secret (not Helm's release record: that is data.release).
		"meta.helm.sh/release-name", "meta.helm.sh/release-namespace",
		// Argo CD's "<app>:<group>/<kind>:<namespace>/<name>".
		"argocd.argoproj.io/tracking-id",
		// The cert-manager Certificate and issuer a TLS Secret was issued for; not common-name or
		// alt-names, which are read from the certificate in data.
		"cert-manager.io/certificate-name", "cert-manager.io/issuer-name",
		"cert-manager.io/issuer-kind", "cert-manager.io/issuer-group":
		return true
	}
	return false
}
