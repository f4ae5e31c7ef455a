package collector

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// HelmReleaseSanitizedAnnotation marks a redacted Helm release Secret whose data.release is the
// sanitized release of sanitizedHelmRelease rather than "": helm list, history and status work on
// it, helm get values, manifest and notes show kubesearch's notice instead of the member's text.
const HelmReleaseSanitizedAnnotation = "kubesearch.io/helm-release-sanitized"

// helmReleaseSecretType is the type Helm 3 (and 4) gives the Secret holding one revision of a release.
const helmReleaseSecretType = "helm.sh/release.v1"

// maxHelmReleaseJSON bounds the decompressed release. A Secret holds at most 1 MiB, which gzip can
// expand a thousandfold; real releases (chart, values and manifest together) stay far below this, and
// one above it is published fully redacted rather than decompressed into the collector's memory.
const maxHelmReleaseJSON = 8 << 20

// Notices put where a sanitized release leaves out what Helm would print, so `helm get values`,
// `helm get manifest` and `helm get notes` say why they show nothing of the member's release
// instead of showing an empty answer that looks like a release without values.
const (
	helmWithheldValuesKey = "kubesearch.io/withheld"
	helmWithheldValues    = "user-supplied values are not published: Secret data is redacted (ask the member cluster)"
	helmWithheldManifest  = "# kubesearch: the rendered manifest is not published: Secret data is redacted (ask the member cluster)\n"
	helmWithheldNotes     = "kubesearch: the release notes are not published: Secret data is redacted (ask the member cluster)"
	helmWithheldText      = "details withheld by kubesearch"
)

// The release as Helm stores it (helm.sh/helm/v3 pkg/release), reduced to the fields that describe
// which chart version runs where and how its last operation went. Decoding into these types is the
// allow-list: config (the values given to the chart, passwords included), manifest (the rendered
// objects, Secrets included), hooks (with their manifests), info.notes (NOTES.txt is a rendered
// template and charts print credentials there), info.resources, and chart.values, templates, files,
// schema and lock (the chart's defaults and sources) are never read, so never published.
type helmRelease struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Version   int        `json:"version"`
	Info      *helmInfo  `json:"info"`
	Chart     *helmChart `json:"chart"`
	// Set to notices when publishing; nothing of the member's own is read into them.
	Config   map[string]any `json:"config,omitempty"`
	Manifest string         `json:"manifest,omitempty"`
}

type helmInfo struct {
	FirstDeployed string `json:"first_deployed,omitempty"`
	LastDeployed  string `json:"last_deployed,omitempty"`
	Deleted       string `json:"deleted"` // Helm writes it always, "" when not deleted
	Description   string `json:"description,omitempty"`
	Status        string `json:"status,omitempty"`
	Notes         string `json:"notes,omitempty"` // only ever helmWithheldNotes
}

type helmChart struct {
	Metadata *helmChartMetadata `json:"metadata"`
}

// helmChartMetadata is what Chart.yaml says of the chart: its author's words, not the user's values.
// Left out even so: maintainers (people's addresses), dependencies (repository URLs can carry
// credentials), annotations, sources, home and icon (free text and URLs no helm listing shows).
type helmChartMetadata struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
	KubeVersion string `json:"kubeVersion,omitempty"`
	Deprecated  bool   `json:"deprecated,omitempty"`
}

// helmStatuses are the statuses Helm writes (pkg/release/status.go).
var helmStatuses = map[string]bool{
	"unknown": true, "deployed": true, "uninstalled": true, "superseded": true, "failed": true,
	"uninstalling": true, "pending-install": true, "pending-upgrade": true, "pending-rollback": true,
}

// helmDescriptions are the descriptions Helm writes itself (pkg/action). Any other description is
// free text: the user's --description, or an error message that may quote a rendered value.
var helmDescriptions = map[string]bool{
	"Install complete": true, "Upgrade complete": true, "Uninstallation complete": true,
	"Initial install underway": true, "Preparing upgrade": true, "Dry run complete": true,
	"superseded by new release": true, "uninstalled": true,
	"Deletion in progress (or silently failed)": true,
}

var helmRollbackDescription = regexp.MustCompile(`^Rollback to [0-9]+$`)

// sanitizedHelmRelease returns the data.release value of a Helm release Secret, as the API serves it
// (base64 of Helm's own base64 of gzip of JSON), rebuilt from helmRelease's allow-list and encoded
// the way Helm's storage driver decodes it. An error means the value is not a release this code
// understands, and the caller blanks it as it blanks any other value.
func sanitizedHelmRelease(data string) (string, error) {
	helmText, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return "", fmt.Errorf("decode data.release: %w", err)
	}
	gz, err := base64.StdEncoding.DecodeString(string(helmText))
	if err != nil {
		return "", fmt.Errorf("decode Helm's base64: %w", err)
	}
	// Helm reads uncompressed releases from before it compressed them (Helm 2 era); Helm 3 has always
	// written gzip, so anything else is not worth a second parser.
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", fmt.Errorf("gunzip release: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxHelmReleaseJSON+1))
	if err != nil {
		return "", fmt.Errorf("gunzip release: %w", err)
	}
	if len(raw) > maxHelmReleaseJSON {
		return "", fmt.Errorf("release larger than %d bytes decompressed", maxHelmReleaseJSON)
	}
	var rel helmRelease
	if err := json.Unmarshal(raw, &rel); err != nil {
		return "", fmt.Errorf("decode release: %w", err)
	}
	if err := rel.sanitize(); err != nil {
		return "", err
	}
	out, err := json.Marshal(rel)
	if err != nil {
		return "", fmt.Errorf("encode release: %w", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(out); err != nil {
		return "", fmt.Errorf("gzip release: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("gzip release: %w", err)
	}
	return base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(buf.Bytes()))), nil
}

// sanitize checks that the release has what helm list and helm status dereference (a release without
// info or chart metadata makes them fail or panic, and is better blanked), keeps Helm's own words of
// its free-text fields, and puts the notices where values, manifest and notes were.
func (r *helmRelease) sanitize() error {
	if r.Name == "" || r.Info == nil || r.Chart == nil || r.Chart.Metadata == nil ||
		r.Chart.Metadata.Name == "" || r.Chart.Metadata.Version == "" {
		return errors.New("release lacks its name, info or chart metadata")
	}
	if !helmStatuses[r.Info.Status] {
		return errors.New("release status is not one Helm writes")
	}
	for _, ts := range []string{r.Info.FirstDeployed, r.Info.LastDeployed, r.Info.Deleted} {
		if ts == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			return errors.New("release time is not RFC 3339") // time's error quotes the text
		}
	}
	r.Info.Description = helmDescription(r.Info.Description, r.Name)
	r.Info.Notes = helmWithheldNotes
	r.Config = map[string]any{helmWithheldValuesKey: helmWithheldValues}
	r.Manifest = helmWithheldManifest
	return nil
}

// helmDescription keeps a description Helm wrote itself and, of a failure, the part saying what
// failed, without the error text after it: that text comes from templates (fail, required) and the
// API server, and can quote a value.
func helmDescription(desc, release string) string {
	if desc == "" || helmDescriptions[desc] || helmRollbackDescription.MatchString(desc) {
		return desc
	}
	for _, prefix := range []string{
		fmt.Sprintf("Release %q failed", release),
		fmt.Sprintf("Upgrade %q failed", release),
		fmt.Sprintf("Rollback %q failed", release),
		"failed to render resource",
	} {
		if strings.HasPrefix(desc, prefix+":") {
			return prefix + ": " + helmWithheldText
		}
	}
	return helmWithheldText
}
