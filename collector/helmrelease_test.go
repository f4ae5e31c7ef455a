package collector

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

const helmPassword = "hunter2-Pa55w0rd-do-not-leak"

// helmRecord encodes a release as Helm's storage driver writes it (gzip, then base64) and as the API
// server serves that string in a Secret's data (base64 again).
func helmRecord(t *testing.T, release []byte) string {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(release); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	helm := base64.StdEncoding.EncodeToString(gz.Bytes())
	return base64.StdEncoding.EncodeToString([]byte(helm))
}

// helmDecode reads data.release back the way Helm's decodeRelease does (pkg/storage/driver/util.go:
// base64, gunzip when the gzip magic leads, JSON) and returns the release's JSON.
func helmDecode(t *testing.T, data string) []byte {
	t.Helper()
	helm, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("data.release is not base64: %v", err)
	}
	b, err := base64.StdEncoding.DecodeString(string(helm))
	if err != nil {
		t.Fatalf("Helm's record is not base64: %v", err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b, 0x08}) {
		t.Fatalf("Helm's record is not gzip: % x", b[:min(len(b), 8)])
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// helmReleaseJSON is a release as Helm 3.22 stores it after `helm install --set db.password=...`,
// with the password everywhere a chart can put it: the user's values, the chart's default values,
// a template, a file, the rendered manifest, a hook's manifest, the notes, a failure description
// and a dependency's repository URL.
func helmReleaseJSON(t *testing.T, status, description string) []byte {
	t.Helper()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secretManifest := "---\n# Source: shop/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: shop-db\nstringData:\n  password: " + helmPassword + "\n"
	rel := map[string]any{
		"name": "shop", "namespace": "shop", "version": 3,
		"info": map[string]any{
			"first_deployed": "2026-01-10T09:00:00.123456789Z", "last_deployed": "2026-01-12T10:30:00Z", "deleted": "",
			"description": description, "status": status,
			"notes": "Your database password is " + helmPassword,
		},
		"chart": map[string]any{
			"metadata": map[string]any{
				"name": "shop", "version": "1.4.2", "appVersion": "2.0.1", "apiVersion": "v2", "type": "application",
				"description": "The shop", "kubeVersion": ">=1.30.0-0",
				"home": "https://example.com/shop", "icon": "https://example.com/shop.png", "sources": []any{"https://example.com/src"},
				"keywords":    []any{"shop"},
				"maintainers": []any{map[string]any{"name": "Ops", "email": "ops@example.com"}},
				"annotations": map[string]any{"example.com/default-password": helmPassword},
				"dependencies": []any{map[string]any{"name": "db", "version": "9.1.0",
					"repository": "https://robot:" + helmPassword + "@charts.example.com"}},
			},
			"lock":      map[string]any{"generated": "2026-01-01T00:00:00Z", "digest": "sha256:abc"},
			"templates": []any{map[string]any{"name": "templates/secret.yaml", "data": b64("password: {{ .Values.db.password | default \"" + helmPassword + "\" }}")}},
			"values":    map[string]any{"db": map[string]any{"password": helmPassword}},
			"schema":    b64(`{"properties":{"db":{"default":"` + helmPassword + `"}}}`),
			"files":     []any{map[string]any{"name": "files/seed.sql", "data": b64("CREATE USER shop PASSWORD '" + helmPassword + "';")}},
		},
		"config":   map[string]any{"db": map[string]any{"password": helmPassword}},
		"manifest": secretManifest,
		"hooks": []any{map[string]any{"name": "shop-migrate", "kind": "Job", "path": "shop/templates/migrate.yaml",
			"manifest": "env:\n- name: DB_PASSWORD\n  value: " + helmPassword + "\n", "events": []any{"post-install"},
			"last_run": map[string]any{"started_at": "", "completed_at": "", "phase": ""}}},
	}
	b, err := json.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func helmSecret(release string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
		"metadata": map[string]any{"name": "sh.helm.release.v1.shop.v3", "namespace": "shop", "uid": "u-helm",
			"resourceVersion": "4711", "creationTimestamp": "2026-01-12T10:30:00Z",
			"labels": map[string]any{"name": "shop", "owner": "helm", "status": "deployed", "version": "3"}},
		"data": map[string]any{"release": release}}
}

// publishedSecret runs a Secret through a redacting store's list and watch paths and returns what
// each published.
func publishedSecret(t *testing.T, secret map[string]any) map[string]map[string]any {
	t.Helper()
	raw, err := json.Marshal(secret)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, path := range []string{"list", "watch"} {
		sink := &recordingSink{}
		s := newSecretStore(sink)
		obj := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatal(err)
		}
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
		var got map[string]any
		if err := json.Unmarshal(evs[0].Object, &got); err != nil {
			t.Fatal(err)
		}
		out[path] = got
	}
	return out
}

// A redacted Helm release Secret is published with a release helm list, history and status can
// read — the chart's name and versions, the status and times, Helm's own description — and nothing
// a chart or its user could put a value into: no values, manifest, hooks, notes, templates, files.
func TestHelmReleaseSecretPublishesASanitizedRelease(t *testing.T) {
	secret := helmSecret(helmRecord(t, helmReleaseJSON(t, "failed",
		`Upgrade "shop" failed: Secret "shop-db" is invalid: data[password]: `+helmPassword)))
	want := `{"name":"shop","namespace":"shop","version":3,
		"info":{"first_deployed":"2026-01-10T09:00:00.123456789Z","last_deployed":"2026-01-12T10:30:00Z","deleted":"",
			"description":"Upgrade \"shop\" failed: details withheld by kubesearch","status":"failed",
			"notes":"kubesearch: the release notes are not published: Secret data is redacted (ask the member cluster)"},
		"chart":{"metadata":{"name":"shop","version":"1.4.2","appVersion":"2.0.1","apiVersion":"v2","type":"application",
			"description":"The shop","kubeVersion":">=1.30.0-0"}},
		"config":{"kubesearch.io/withheld":"user-supplied values are not published: Secret data is redacted (ask the member cluster)"},
		"manifest":"# kubesearch: the rendered manifest is not published: Secret data is redacted (ask the member cluster)\n"}`
	for path, got := range publishedSecret(t, secret) {
		release, _ := got["data"].(map[string]any)["release"].(string)
		if release == "" {
			t.Fatalf("%s: data.release is blank: helm list shows nothing of the release\n%v", path, got)
		}
		decoded := helmDecode(t, release)
		for _, leak := range []string{helmPassword, base64.StdEncoding.EncodeToString([]byte(helmPassword)),
			"ops@example.com", "seed.sql", "templates/", "shop-migrate"} {
			if bytes.Contains(decoded, []byte(leak)) {
				t.Errorf("%s: %q is in the published release:\n%s", path, leak, decoded)
			}
		}
		var gotRel, wantRel map[string]any
		if err := json.Unmarshal(decoded, &gotRel); err != nil {
			t.Fatalf("%s: the published release is not JSON: %v", path, err)
		}
		if err := json.Unmarshal([]byte(want), &wantRel); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotRel, wantRel) {
			t.Errorf("%s: published release\n%s\nwant\n%s", path, decoded, want)
		}
		ann := got["metadata"].(map[string]any)["annotations"].(map[string]any)
		if ann[RedactedAnnotation] != "true" || ann[HelmReleaseSanitizedAnnotation] != "true" {
			t.Errorf("%s: annotations %v, want %s and %s", path, ann, RedactedAnnotation, HelmReleaseSanitizedAnnotation)
		}
		if labels := got["metadata"].(map[string]any)["labels"]; !reflect.DeepEqual(labels, secret["metadata"].(map[string]any)["labels"]) {
			t.Errorf("%s: labels %v, Helm filters releases on them", path, labels)
		}
	}
}

// What does not decode as a release Helm 3 wrote is blanked as before, and not marked sanitized.
func TestHelmReleaseSecretFallsBackToRedaction(t *testing.T) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	valid := helmReleaseJSON(t, "deployed", "Install complete")
	var rel map[string]any
	if err := json.Unmarshal(valid, &rel); err != nil {
		t.Fatal(err)
	}
	edited := func(edit func(map[string]any)) []byte {
		var r map[string]any
		if err := json.Unmarshal(valid, &r); err != nil {
			t.Fatal(err)
		}
		edit(r)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct{ name, release string }{
		{"data.release not base64", "%%%" + helmPassword},
		{"Helm's record not base64", b64([]byte("%%%" + helmPassword))},
		// Helm still reads these (releases from before it compressed them); Helm 3 never wrote one.
		{"uncompressed JSON", b64([]byte(b64(valid)))},
		{"gzip of something not JSON", helmRecord(t, []byte("password: "+helmPassword))},
		{"gzip truncated", func() string {
			raw, _ := base64.StdEncoding.DecodeString(helmRecord(t, valid))
			gz, _ := base64.StdEncoding.DecodeString(string(raw))
			return b64([]byte(b64(gz[:len(gz)/2])))
		}()},
		// 9 MiB of values compress to a few kilobytes: decompressed past the bound, not decoded.
		{"over 8 MiB decompressed", helmRecord(t, edited(func(r map[string]any) {
			r["config"] = map[string]any{"pad": strings.Repeat("a", 9<<20), "password": helmPassword}
		}))},
		{"no chart metadata", helmRecord(t, edited(func(r map[string]any) { r["chart"] = map[string]any{"values": r["config"]} }))},
		{"no info", helmRecord(t, edited(func(r map[string]any) { delete(r, "info") }))},
		{"a status Helm never writes", helmRecord(t, edited(func(r map[string]any) {
			r["info"].(map[string]any)["status"] = helmPassword
		}))},
		{"a time that is not one", helmRecord(t, edited(func(r map[string]any) {
			r["info"].(map[string]any)["last_deployed"] = helmPassword
		}))},
		{"version not a number", helmRecord(t, edited(func(r map[string]any) { r["version"] = helmPassword }))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for path, got := range publishedSecret(t, helmSecret(tc.release)) {
				if data := got["data"]; !reflect.DeepEqual(data, map[string]any{"release": ""}) {
					t.Errorf("%s: data %.200v, want release blanked", path, data)
				}
				ann := got["metadata"].(map[string]any)["annotations"].(map[string]any)
				if _, ok := ann[HelmReleaseSanitizedAnnotation]; ok || ann[RedactedAnnotation] != "true" {
					t.Errorf("%s: annotations %v, want only %s", path, ann, RedactedAnnotation)
				}
			}
		})
	}

	// A Secret of another type with a "release" key is not Helm's, whatever it holds.
	s := helmSecret(helmRecord(t, valid))
	s["type"] = "Opaque"
	for path, got := range publishedSecret(t, s) {
		if data := got["data"]; !reflect.DeepEqual(data, map[string]any{"release": ""}) {
			t.Errorf("Opaque, %s: data %.200v, want release blanked", path, data)
		}
	}
}

func TestHelmDescription(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"Install complete", "Install complete"},
		{"Upgrade complete", "Upgrade complete"},
		{"Rollback to 2", "Rollback to 2"},
		{"superseded by new release", "superseded by new release"},
		{`Release "shop" failed: secret "x": ` + helmPassword, `Release "shop" failed: details withheld by kubesearch`},
		{`Rollback "shop" failed: ` + helmPassword, `Rollback "shop" failed: details withheld by kubesearch`},
		{"failed to render resource: " + helmPassword, "failed to render resource: details withheld by kubesearch"},
		// Another release's name is free text too.
		{`Release "` + helmPassword + `" failed: x`, "details withheld by kubesearch"},
		{"deployed by CI, db password " + helmPassword, "details withheld by kubesearch"}, // --description
		{"Rollback to 2 " + helmPassword, "details withheld by kubesearch"},
	} {
		if got := helmDescription(tc.in, "shop"); got != tc.want {
			t.Errorf("helmDescription(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
