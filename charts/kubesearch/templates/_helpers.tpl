{{/* Names and labels. */}}
{{- define "kubesearch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubesearch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* kubesearch.component: the full name of a component, e.g. (dict "root" $ "component" "collector"). */}}
{{- define "kubesearch.component" -}}
{{- printf "%s-%s" (include "kubesearch.fullname" .root | trunc 50 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "kubesearch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "kubesearch.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Values.image.tag | default .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: kubesearch
{{- end -}}

{{- define "kubesearch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubesearch.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kubesearch.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "kubesearch.collectorServiceAccount" -}}
{{- if .Values.collector.serviceAccount.create -}}
{{- default (include "kubesearch.component" (dict "root" . "component" "collector")) .Values.collector.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.collector.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kubesearch.registryConfigMap" -}}
{{- default (include "kubesearch.component" (dict "root" . "component" "registries")) .Values.existingRegistryConfigMap -}}
{{- end -}}

{{/*
kubesearch.plural: the resource name of a kind, as the API server names it for the built-in kinds
and nearly every CRD (lower case, English plural); collector.rbac.plurals overrides it.
*/}}
{{- define "kubesearch.plural" -}}
{{- $kind := .kind -}}
{{- $plurals := .plurals | default dict -}}
{{- $irregular := dict "endpoints" "endpoints" "podsecuritypolicy" "podsecuritypolicies" -}}
{{- $k := lower $kind -}}
{{- if hasKey $plurals $kind -}}{{ get $plurals $kind }}
{{- else if hasKey $irregular $k -}}{{ get $irregular $k }}
{{- else if or (hasSuffix "s" $k) (hasSuffix "x" $k) (hasSuffix "ch" $k) (hasSuffix "sh" $k) -}}{{ $k }}es
{{- else if regexMatch "[^aeiou]y$" $k -}}{{ trimSuffix "y" $k }}ies
{{- else -}}{{ $k }}s
{{- end -}}
{{- end -}}

{{/*
kubesearch.collectorRules: what the registries select, as a YAML dict: namespace ("" for cluster
scope) → API group → sorted resource names. A cluster-wide selection of a kind covers its namespaced
ones, as the collector's plan does.
*/}}
{{- define "kubesearch.collectorRules" -}}
{{- $scopes := dict -}}
{{- $cluster := dict -}}
{{- range .Values.registries -}}
{{- range .spec.resourceSelectors -}}
{{- $group := "" -}}
{{- if contains "/" .apiVersion -}}{{- $group = first (splitList "/" .apiVersion) -}}{{- end -}}
{{- $resource := include "kubesearch.plural" (dict "kind" .kind "plurals" $.Values.collector.rbac.plurals) -}}
{{- if not .namespace -}}{{- $_ := set $cluster (printf "%s/%s" $group $resource) true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- range .Values.registries -}}
{{- range .spec.resourceSelectors -}}
{{- $group := "" -}}
{{- if contains "/" .apiVersion -}}{{- $group = first (splitList "/" .apiVersion) -}}{{- end -}}
{{- $resource := include "kubesearch.plural" (dict "kind" .kind "plurals" $.Values.collector.rbac.plurals) -}}
{{- $ns := .namespace | default "" -}}
{{- if or (eq $ns "") (not (hasKey $cluster (printf "%s/%s" $group $resource))) -}}
{{- $groups := get $scopes $ns | default dict -}}
{{- $resources := get $groups $group | default list -}}
{{- $_ := set $groups $group (append $resources $resource | uniq | sortAlpha) -}}
{{- $_ := set $scopes $ns $groups -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $scopes -}}
{{- end -}}

{{/* kubesearch.rules: a rule per API group, get/list/watch of its resources. */}}
{{- define "kubesearch.rules" -}}
{{- range $group := keys . | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: {{ get $ $group | toJson }}
  verbs: ["get", "list", "watch"]
{{- end -}}
{{- end -}}

{{/* Flags and mounts every component shares: Kafka. */}}
{{- define "kubesearch.kafkaArgs" -}}
- --kafka-brokers={{ join "," .Values.kafka.brokers }}
- --topic={{ .Values.kafka.topic }}
{{- if .Values.kafka.tls.enabled }}
- --kafka-tls
{{- end }}
{{- if .Values.kafka.tls.caSecret.name }}
- --kafka-ca-file=/etc/kubesearch/kafka-ca/{{ .Values.kafka.tls.caSecret.key }}
{{- end }}
{{- if .Values.kafka.tls.insecureSkipVerify }}
- --kafka-insecure-skip-verify
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- --kafka-sasl-mechanism={{ .Values.kafka.sasl.mechanism }}
- --kafka-username-file=/etc/kubesearch/kafka-sasl/{{ .Values.kafka.sasl.usernameKey }}
- --kafka-password-file=/etc/kubesearch/kafka-sasl/{{ .Values.kafka.sasl.passwordKey }}
{{- end }}
{{- end -}}

{{- define "kubesearch.kafkaMounts" -}}
{{- if .Values.kafka.tls.caSecret.name }}
- {name: kafka-ca, mountPath: /etc/kubesearch/kafka-ca, readOnly: true}
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- {name: kafka-sasl, mountPath: /etc/kubesearch/kafka-sasl, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kubesearch.kafkaVolumes" -}}
{{- if .Values.kafka.tls.caSecret.name }}
- name: kafka-ca
  secret: {secretName: {{ .Values.kafka.tls.caSecret.name }}, items: [{key: {{ .Values.kafka.tls.caSecret.key }}, path: {{ .Values.kafka.tls.caSecret.key }}}]}
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- name: kafka-sasl
  secret: {secretName: {{ required "kafka.sasl.existingSecret: required with kafka.sasl.mechanism" .Values.kafka.sasl.existingSecret }}}
{{- end }}
{{- end -}}

{{/* Flags and mounts the indexer and the query API share: OpenSearch. */}}
{{- define "kubesearch.opensearchArgs" -}}
- --opensearch-addresses={{ join "," .Values.opensearch.addresses }}
{{- if .Values.opensearch.existingSecret }}
- --opensearch-secret-dir=/etc/kubesearch/opensearch
{{- end }}
{{- if .Values.opensearch.caSecret.name }}
- --opensearch-ca-file=/etc/kubesearch/opensearch-ca/{{ .Values.opensearch.caSecret.key }}
{{- end }}
{{- if .Values.opensearch.insecureSkipVerify }}
- --opensearch-insecure-skip-verify
{{- end }}
{{- if .Values.opensearch.indexPrefix }}
- --index-prefix={{ .Values.opensearch.indexPrefix }}
{{- end }}
{{- end -}}

{{- define "kubesearch.opensearchMounts" -}}
{{- if .Values.opensearch.existingSecret }}
- {name: opensearch, mountPath: /etc/kubesearch/opensearch, readOnly: true}
{{- end }}
{{- if .Values.opensearch.caSecret.name }}
- {name: opensearch-ca, mountPath: /etc/kubesearch/opensearch-ca, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kubesearch.opensearchVolumes" -}}
{{- if .Values.opensearch.existingSecret }}
- name: opensearch
  secret: {secretName: {{ .Values.opensearch.existingSecret }}}
{{- end }}
{{- if .Values.opensearch.caSecret.name }}
- name: opensearch-ca
  secret: {secretName: {{ .Values.opensearch.caSecret.name }}, items: [{key: {{ .Values.opensearch.caSecret.key }}, path: {{ .Values.opensearch.caSecret.key }}}]}
{{- end }}
{{- end -}}

{{/* kubesearch.probes: liveness on /healthz, readiness on /readyz of the port named http. */}}
{{- define "kubesearch.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{/* kubesearch.podSpecCommon: what every component's pod spec shares. */}}
{{- define "kubesearch.podSpecCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
