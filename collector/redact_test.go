package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// Secrets as real tools leave them, each with copies of its values outside data, published through
// the list and the watch path of a store that redacts: no value (plain, base64, or as data holds it)
// is anywhere in the published event, and the object published is exactly the allow-list.
func TestRedactedSecretsPublishOnlyTheAllowList(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	jsonText := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	meta := func(name, uid string, extra map[string]any) map[string]any {
		m := map[string]any{"name": name, "namespace": "shop", "uid": uid, "resourceVersion": "4711",
			"creationTimestamp": "2026-01-10T09:00:00Z"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	// A value as a tool may have copied it: plain, base64, or escaped once or twice as a JSON string
	// (a manifest in an annotation of an object that is itself JSON).
	forms := func(v string) []string {
		once := strings.Trim(jsonText(v), `"`)
		f := []string{v, b64(v), once, strings.Trim(jsonText(once), `"`)}
		slices.Sort(f)
		return slices.Compact(f)
	}

	const password = "hunter2-Pa55w0rd-do-not-leak"

	// Helm's release record: data.release is base64 of gzip of the release as JSON, which holds the
	// chart's values and the rendered manifest, so every value the chart was given.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(jsonText(map[string]any{"name": "shop", "namespace": "shop", "version": 3,
		"config":   map[string]any{"db": map[string]any{"password": password}},
		"manifest": "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: shop-db\nstringData:\n  password: " + password + "\n"})))
	_ = zw.Close()
	helmRelease := base64.StdEncoding.EncodeToString(gz.Bytes())

	dockerAuth := b64("ci-bot:" + password)
	dockerConfig := `{"auths":{"https://index.docker.io/v1/":{"auth":"` + dockerAuth + `"}}}`

	for _, tc := range []struct {
		name   string
		secret map[string]any // as the API server serves it
		values []string       // what must not be published, besides every value of data
		want   string         // the object published
	}{
		{
			name: "kubectl apply: last-applied holds stringData",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("db", "u-kubectl", map[string]any{
					"labels": map[string]any{"app.kubernetes.io/name": "db"},
					"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": jsonText(map[string]any{
						"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
						"metadata":   map[string]any{"annotations": map[string]any{}, "labels": map[string]any{"app.kubernetes.io/name": "db"}, "name": "db", "namespace": "shop"},
						"stringData": map[string]any{"password": password}}) + "\n"},
					"managedFields": []any{map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
						"time": "2026-01-10T09:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{
							"f:data": map[string]any{".": map[string]any{}, "f:password": map[string]any{}},
							"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{},
								"f:kubectl.kubernetes.io/last-applied-configuration": map[string]any{}}}}}},
				}),
				"data": map[string]any{"password": b64(password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"db","namespace":"shop","uid":"u-kubectl","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"app.kubernetes.io/name":"db"},"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{"password":""}}`,
		},
		{
			name: "kubectl create --record: the command line in change-cause",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("api", "u-record", map[string]any{
					"annotations": map[string]any{"kubernetes.io/change-cause": "kubectl create secret generic api --namespace=shop --from-literal=token=" + password + " --record=true"},
				}),
				"data": map[string]any{"token": b64(password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"api","namespace":"shop","uid":"u-record","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{"token":""}}`,
		},
		{
			name: "kapp: the applied manifest in kapp.k14s.io/original and its diff",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("registry-auth", "u-kapp", map[string]any{
					"labels": map[string]any{"kapp.k14s.io/app": "1767000000000000000", "kapp.k14s.io/association": "v1.cb65ea94c3faa8c9aabd437d9bfe997d"},
					"annotations": map[string]any{
						"kapp.k14s.io/identity": "v1;shop//Secret/registry-auth;v1",
						"kapp.k14s.io/original": jsonText(map[string]any{"apiVersion": "v1", "kind": "Secret",
							"metadata":   map[string]any{"labels": map[string]any{"kapp.k14s.io/app": "1767000000000000000"}, "name": "registry-auth", "namespace": "shop"},
							"stringData": map[string]any{"password": password, "username": "ci-bot"}}),
						"kapp.k14s.io/original-diff":     "- type: test\n  path: /data\n  value:\n    password: " + b64(password) + "\n    username: " + b64("ci-bot") + "\n",
						"kapp.k14s.io/original-diff-md5": "58e0494c51d30eb3494f7c9198986bb9",
					},
				}),
				"data": map[string]any{"password": b64(password), "username": b64("ci-bot")}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"registry-auth","namespace":"shop","uid":"u-kapp","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"kapp.k14s.io/app":"1767000000000000000","kapp.k14s.io/association":"v1.cb65ea94c3faa8c9aabd437d9bfe997d"},
					"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{"password":"","username":""}}`,
		},
		{
			name: "Helm: the release record holds every value of the chart",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
				"metadata": meta("sh.helm.release.v1.shop.v3", "u-helm-release", map[string]any{
					"labels": map[string]any{"name": "shop", "owner": "helm", "status": "deployed", "version": "3", "modifiedAt": "1767000000"},
				}),
				"data": map[string]any{"release": b64(helmRelease)}},
			values: []string{helmRelease},
			want: `{"apiVersion":"v1","kind":"Secret","type":"helm.sh/release.v1",
				"metadata":{"name":"sh.helm.release.v1.shop.v3","namespace":"shop","uid":"u-helm-release","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"name":"shop","owner":"helm","status":"deployed","version":"3","modifiedAt":"1767000000"},
					"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{"release":""}}`,
		},
		{
			name: "Helm: a chart's Secret keeps the release it belongs to",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("shop-db", "u-helm-chart", map[string]any{
					"labels": map[string]any{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "shop-1.2.0"},
					"annotations": map[string]any{"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop",
						"checksum/config": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"},
				}),
				"data": map[string]any{"password": b64(password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"shop-db","namespace":"shop","uid":"u-helm-chart","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"app.kubernetes.io/managed-by":"Helm","helm.sh/chart":"shop-1.2.0"},
					"annotations":{"kubesearch.io/data-redacted":"true","meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"shop"}},
				"data":{"password":""}}`,
		},
		{
			name: "Argo CD: tracking-id kept, client-side apply's copy dropped",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("db", "u-argocd", map[string]any{
					"labels": map[string]any{"app.kubernetes.io/instance": "shop"},
					"annotations": map[string]any{
						"argocd.argoproj.io/tracking-id":     "shop:/Secret:shop/db",
						"argocd.argoproj.io/sync-options":    "Prune=false",
						"argocd.argoproj.io/compare-options": "IgnoreExtraneous",
						"kubectl.kubernetes.io/last-applied-configuration": jsonText(map[string]any{"apiVersion": "v1", "kind": "Secret",
							"metadata": map[string]any{"annotations": map[string]any{"argocd.argoproj.io/tracking-id": "shop:/Secret:shop/db"}, "name": "db", "namespace": "shop"},
							"data":     map[string]any{"password": b64(password)}}) + "\n",
					},
				}),
				"data": map[string]any{"password": b64(password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"db","namespace":"shop","uid":"u-argocd","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"app.kubernetes.io/instance":"shop"},
					"annotations":{"kubesearch.io/data-redacted":"true","argocd.argoproj.io/tracking-id":"shop:/Secret:shop/db"}},
				"data":{"password":""}}`,
		},
		{
			// kustomize-controller ran kubectl apply before it moved to server-side apply.
			name: "Flux kustomize-controller: the SOPS-decrypted values in last-applied",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("db", "u-flux", map[string]any{
					"labels": map[string]any{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
					"annotations": map[string]any{
						"kustomize.toolkit.fluxcd.io/reconcile": "enabled",
						"kubectl.kubernetes.io/last-applied-configuration": jsonText(map[string]any{"apiVersion": "v1", "kind": "Secret",
							"metadata":   map[string]any{"labels": map[string]any{"kustomize.toolkit.fluxcd.io/name": "apps"}, "name": "db", "namespace": "shop"},
							"stringData": map[string]any{"password": password}}) + "\n",
					},
				}),
				"data": map[string]any{"password": b64(password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"db","namespace":"shop","uid":"u-flux","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"kustomize.toolkit.fluxcd.io/name":"apps","kustomize.toolkit.fluxcd.io/namespace":"flux-system"},
					"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{"password":""}}`,
		},
		{
			name: "Pulumi: an autonamed pull secret with its docker config in last-applied",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
				"metadata": meta("dockerprivatepull-s2nimzmf", "u-pulumi", map[string]any{
					"labels": map[string]any{"app.kubernetes.io/managed-by": "pulumi"},
					"annotations": map[string]any{
						"pulumi.com/autonamed": "true",
						"kubectl.kubernetes.io/last-applied-configuration": jsonText(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
							"metadata":   map[string]any{"annotations": map[string]any{"pulumi.com/autonamed": "true"}, "labels": map[string]any{"app.kubernetes.io/managed-by": "pulumi"}, "name": "dockerprivatepull-s2nimzmf", "namespace": "shop"},
							"stringData": map[string]any{".dockerconfigjson": dockerConfig}}) + "\n",
					},
				}),
				"data": map[string]any{".dockerconfigjson": b64(dockerConfig)}},
			values: []string{dockerAuth, dockerConfig},
			want: `{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/dockerconfigjson",
				"metadata":{"name":"dockerprivatepull-s2nimzmf","namespace":"shop","uid":"u-pulumi","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"app.kubernetes.io/managed-by":"pulumi"},
					"annotations":{"kubesearch.io/data-redacted":"true"}},
				"data":{".dockerconfigjson":""}}`,
		},
		{
			name: "ServiceAccount token: the account it belongs to kept",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
				"metadata": meta("builder-token", "u-sa", map[string]any{
					"labels": map[string]any{"kubernetes.io/legacy-token-last-used": "2026-01-09"},
					"annotations": map[string]any{"kubernetes.io/service-account.name": "builder",
						"kubernetes.io/service-account.uid": "0b8f6a8e-2f4c-4a53-9a43-6f1d2c7e9b10"},
				}),
				"data": map[string]any{"ca.crt": b64("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
					"namespace": b64("shop"), "token": b64("eyJhbGciOiJSUzI1NiJ9." + password)}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/service-account-token",
				"metadata":{"name":"builder-token","namespace":"shop","uid":"u-sa","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"labels":{"kubernetes.io/legacy-token-last-used":"2026-01-09"},
					"annotations":{"kubesearch.io/data-redacted":"true","kubernetes.io/service-account.name":"builder",
						"kubernetes.io/service-account.uid":"0b8f6a8e-2f4c-4a53-9a43-6f1d2c7e9b10"}},
				"data":{"ca.crt":"","namespace":"","token":""}}`,
		},
		{
			name: "cert-manager: owner, issuer and finalizers kept, immutable kept",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "immutable": false,
				"metadata": meta("checkout-tls", "u-cert", map[string]any{
					"labels": map[string]any{"controller.cert-manager.io/fao": "true"},
					"annotations": map[string]any{"cert-manager.io/certificate-name": "checkout-tls", "cert-manager.io/issuer-name": "letsencrypt",
						"cert-manager.io/issuer-kind": "ClusterIssuer", "cert-manager.io/issuer-group": "cert-manager.io",
						"cert-manager.io/common-name": "checkout.shop.example", "cert-manager.io/alt-names": "checkout.shop.example"},
					"ownerReferences": []any{map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "checkout-tls",
						"uid": "7d1c9e2a-0f3b-4c5d-8e6f-a1b2c3d4e5f6", "controller": true, "blockOwnerDeletion": true}},
					"finalizers": []any{"example.com/keep"},
					"generation": 2,
				}),
				"data": map[string]any{"tls.crt": b64("-----BEGIN CERTIFICATE-----\n" + password + "\n"), "tls.key": b64("-----BEGIN EC PRIVATE KEY-----\n" + password + "\n")}},
			want: `{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls","immutable":false,
				"metadata":{"name":"checkout-tls","namespace":"shop","uid":"u-cert","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"generation":2,"labels":{"controller.cert-manager.io/fao":"true"},
					"annotations":{"kubesearch.io/data-redacted":"true","cert-manager.io/certificate-name":"checkout-tls","cert-manager.io/issuer-name":"letsencrypt",
						"cert-manager.io/issuer-kind":"ClusterIssuer","cert-manager.io/issuer-group":"cert-manager.io"},
					"ownerReferences":[{"apiVersion":"cert-manager.io/v1","kind":"Certificate","name":"checkout-tls",
						"uid":"7d1c9e2a-0f3b-4c5d-8e6f-a1b2c3d4e5f6","controller":true,"blockOwnerDeletion":true}],
					"finalizers":["example.com/keep"]},
				"data":{"tls.crt":"","tls.key":""}}`,
		},
		{
			name: "fields nobody listed: unknown top-level and metadata fields, stringData, no data",
			secret: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
				"metadata": meta("terminating", "u-unknown", map[string]any{
					"deletionTimestamp": "2026-01-11T00:00:00Z", "deletionGracePeriodSeconds": 0,
					"annotations":    map[string]any{"example.com/backup": b64(password)},
					"futureMetadata": map[string]any{"copy": password},
				}),
				"stringData":  map[string]any{"password": password},
				"futureField": map[string]any{"copy": password}},
			values: []string{password},
			want: `{"apiVersion":"v1","kind":"Secret","type":"Opaque",
				"metadata":{"name":"terminating","namespace":"shop","uid":"u-unknown","resourceVersion":"4711","creationTimestamp":"2026-01-10T09:00:00Z",
					"deletionTimestamp":"2026-01-11T00:00:00Z","deletionGracePeriodSeconds":0,
					"annotations":{"kubesearch.io/data-redacted":"true"}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(jsonText(tc.secret))
			values := tc.values
			if data, ok := tc.secret["data"].(map[string]any); ok {
				for _, v := range data {
					values = append(values, v.(string))
				}
			}
			for _, v := range values {
				// Only values somewhere in the Secret prove anything.
				if !slices.ContainsFunc(forms(v), func(f string) bool { return bytes.Contains(raw, []byte(f)) }) {
					t.Fatalf("test data: %q is nowhere in the Secret", v)
				}
			}
			if _, ok := readRawItem(string(raw), "v1", "Secret", true); ok {
				t.Fatal("readRawItem took a Secret to redact: it publishes without the allow-list")
			}
			for _, path := range []string{"list", "watch"} {
				sink := &recordingSink{}
				s := newSecretStore(sink)
				obj := &unstructured.Unstructured{}
				if err := utiljson.Unmarshal(raw, &obj.Object); err != nil {
					t.Fatal(err)
				}
				var err error
				if path == "list" {
					if _, err = s.beginList(); err == nil {
						err = s.listed(obj)
					}
				} else {
					err = s.Add(obj)
				}
				if err != nil {
					t.Fatal(err)
				}
				evs := sink.take()
				if len(evs) != 1 {
					t.Fatalf("%s: %d events published, want 1", path, len(evs))
				}
				published, err := json.Marshal(evs[0])
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range values {
					for _, f := range forms(v) {
						if bytes.Contains(published, []byte(f)) {
							t.Errorf("%s: %q is in the published event:\n%s", path, f, published)
						}
					}
				}
				var got, want map[string]any
				if err := json.Unmarshal(evs[0].Object, &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
					t.Fatalf("want: %v", err)
				}
				if !reflect.DeepEqual(got, want) {
					w, _ := json.Marshal(want)
					t.Errorf("%s: published\n%s\nwant\n%s", path, evs[0].Object, w)
				}
				if ev := evs[0]; ev.Name != obj.GetName() || ev.Namespace != "shop" || ev.UID == "" || ev.ResourceVersion != "4711" {
					t.Errorf("%s: envelope names %s/%s uid %q rv %q", path, ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion)
				}
			}
		})
	}
}

func newSecretStore(s sink) *store {
	sc := scope{cluster: "member1", gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, kind: "Secret", redact: true}
	tick := time.Unix(1_700_000_000, 0)
	return newStore(context.Background(), sc, s, envelope.NewEpochs(func() time.Time { return tick }, nil),
		newStatusEntry(registry.ResourceStatus{}, []string{"r"}))
}
