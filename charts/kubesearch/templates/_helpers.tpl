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

{{/*
kubesearch.collectorMode: where the collector's members come from. karmada (karmada.enabled) wins over
collector.mode, whose default is inCluster: kubesearch.karmadaCheck refuses values asking for both.
*/}}
{{- define "kubesearch.collectorMode" -}}
{{- if .Values.karmada.enabled }}karmada{{ else }}{{ .Values.collector.mode }}{{ end -}}
{{- end -}}

{{/*
kubesearch.collectorReplicas: collector.replicas, with auto resolved by the mode: a fleet (central,
karmada) gets two replicas sharing it through the lease, one cluster collected from inside gets one.
*/}}
{{- define "kubesearch.collectorReplicas" -}}
{{- $r := .Values.collector.replicas -}}
{{- if eq (toString $r) "auto" -}}{{ ternary 1 2 (eq (include "kubesearch.collectorMode" .) "inCluster") }}{{- else -}}{{ int $r }}{{- end -}}
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

{{/*
kubesearch.fileRegistries: "true" when the collector reads ResourceRegistry files (--registry). In
Karmada mode with karmada.registries the control plane's objects are the registries, and the default
`registries` would collect beside them (as `kubesearch standalone --karmada-registries` runs no
default registry): files then come from existingRegistryConfigMap only, a choice made on purpose.
*/}}
{{- define "kubesearch.fileRegistries" -}}
{{- if or (not (and .Values.karmada.enabled .Values.karmada.registries)) .Values.existingRegistryConfigMap }}true{{ end -}}
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

{{/*
Component config files. Every component reads its flags from config.yaml of its ConfigMap (keys are
flag names, `kubesearch <command> --help`), mounted at /etc/kubesearch/config. The helpers below
fill a dict, e.g. (dict "root" $ "config" $cfg); credentials never go in: only the paths of their
mounted files.
*/}}
{{- define "kubesearch.configDir" -}}/etc/kubesearch/config{{- end -}}

{{/* kubesearch.configFile: the YAML of a component's config dict, the values' <component>.config over it. */}}
{{- define "kubesearch.configFile" -}}
{{- toYaml (merge (deepCopy (.extra | default dict)) .config) -}}
{{- end -}}

{{/* kubesearch.configMap: a component's ConfigMap of config.yaml, e.g. (dict "root" $ "component" "indexer" "file" $file). */}}
{{- define "kubesearch.configMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "kubesearch.component" (dict "root" .root "component" (printf "%s-config" .component)) }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "kubesearch.labels" (dict "root" .root "component" .component) | nindent 4 }}
data:
  config.yaml: |
    {{- .file | nindent 4 }}
{{- end -}}

{{/* The --config argument, its mount and its volume, e.g. (dict "root" $ "component" "indexer"). */}}
{{- define "kubesearch.configArgs" -}}
- --config={{ include "kubesearch.configDir" . }}/config.yaml
{{- end -}}

{{- define "kubesearch.configMount" -}}
- {name: config, mountPath: {{ include "kubesearch.configDir" . }}, readOnly: true}
{{- end -}}

{{- define "kubesearch.configVolume" -}}
- name: config
  configMap: {name: {{ include "kubesearch.component" (dict "root" .root "component" (printf "%s-config" .component)) }}}
{{- end -}}

{{/* Flags and mounts every component shares: Kafka. */}}
{{- define "kubesearch.kafkaConfig" -}}
{{- $k := .root.Values.kafka -}}
{{- $_ := set .config "kafka-brokers" $k.brokers -}}
{{- $_ := set .config "topic" $k.topic -}}
{{- if $k.tls.enabled }}{{ $_ := set .config "kafka-tls" true }}{{ end -}}
{{- if $k.tls.caSecret.name }}{{ $_ := set .config "kafka-ca-file" (printf "/etc/kubesearch/kafka-ca/%s" $k.tls.caSecret.key) }}{{ end -}}
{{- if $k.tls.insecureSkipVerify }}{{ $_ := set .config "kafka-insecure-skip-verify" true }}{{ end -}}
{{- if $k.sasl.mechanism -}}
{{- $_ := set .config "kafka-sasl-mechanism" $k.sasl.mechanism -}}
{{- $_ := set .config "kafka-username-file" (printf "/etc/kubesearch/kafka-sasl/%s" $k.sasl.usernameKey) -}}
{{- $_ := set .config "kafka-password-file" (printf "/etc/kubesearch/kafka-sasl/%s" $k.sasl.passwordKey) -}}
{{- end -}}
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
{{- define "kubesearch.opensearchConfig" -}}
{{- $o := .root.Values.opensearch -}}
{{- $_ := set .config "opensearch-addresses" $o.addresses -}}
{{- if $o.existingSecret }}{{ $_ := set .config "opensearch-secret-dir" "/etc/kubesearch/opensearch" }}{{ end -}}
{{- if $o.caSecret.name }}{{ $_ := set .config "opensearch-ca-file" (printf "/etc/kubesearch/opensearch-ca/%s" $o.caSecret.key) }}{{ end -}}
{{- if $o.insecureSkipVerify }}{{ $_ := set .config "opensearch-insecure-skip-verify" true }}{{ end -}}
{{- if $o.indexPrefix }}{{ $_ := set .config "index-prefix" $o.indexPrefix }}{{ end -}}
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

{{/*
kubesearch.probes: liveness on /healthz, readiness on /readyz of the port named http, e.g.
(dict "scheme" "HTTPS"); the scheme defaults to HTTP.
*/}}
{{- define "kubesearch.probes" -}}
{{- $get := "path: /healthz, port: http" -}}
{{- if eq (.scheme | default "HTTP") "HTTPS" }}{{ $get = printf "%s, scheme: HTTPS" $get }}{{ end -}}
livenessProbe:
  httpGet: {{ printf "{%s}" $get }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {{ printf "{%s}" ($get | replace "/healthz" "/readyz") }}
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

{{/*
The query API's authentication, authorization, TLS and limits: config keys naming mounted files only,
never a credential's value. kubesearch.queryapiAuth checks the values first (fail with the value's name).
*/}}
{{- define "kubesearch.queryapiTLS" -}}
{{- if .Values.queryapi.tls.existingSecret }}true{{ end -}}
{{- end -}}

{{- define "kubesearch.queryapiPolicyConfigMap" -}}
{{- default (include "kubesearch.component" (dict "root" . "component" "queryapi-policy")) .Values.queryapi.auth.policy.existingConfigMap -}}
{{- end -}}

{{- define "kubesearch.queryapiAuthCheck" -}}
{{- $a := .Values.queryapi.auth -}}
{{- if and $a.clientCA.existingSecret $a.clientCA.existingConfigMap }}
{{- fail "queryapi.auth.clientCA: existingSecret or existingConfigMap, not both" }}
{{- end }}
{{- if and (or $a.clientCA.existingSecret $a.clientCA.existingConfigMap) (not (include "kubesearch.queryapiTLS" .)) }}
{{- fail "queryapi.auth.clientCA: client certificates need HTTPS: set queryapi.tls.existingSecret" }}
{{- end }}
{{- if and $a.policy.rules $a.policy.existingConfigMap }}
{{- fail "queryapi.auth.policy: rules or existingConfigMap, not both" }}
{{- end }}
{{- $k := .Values.karmada }}
{{- if $k.enabled }}
{{- /* The control plane's aggregation layer speaks HTTPS only, and its front proxy is known by its client certificate. */}}
{{- if not (include "kubesearch.queryapiTLS" .) }}
{{- fail "queryapi.tls.existingSecret: required with karmada.enabled (the control plane's APIService reaches the query API over HTTPS, with a certificate for <service>.<namespace>.svc of its Service)" }}
{{- end }}
{{- if and $k.frontProxyCA.existingSecret $k.frontProxyCA.existingConfigMap }}
{{- fail "karmada.frontProxyCA: existingSecret or existingConfigMap, not both" }}
{{- end }}
{{- if not (or $k.frontProxyCA.existingSecret $k.frontProxyCA.existingConfigMap) }}
{{- fail "karmada.frontProxyCA: required with karmada.enabled: existingConfigMap (or existingSecret) holding the control plane's front-proxy CA, copied from its ConfigMap kube-system/extension-apiserver-authentication (key requestheader-client-ca-file)" }}
{{- end }}
{{- end }}
{{- end -}}

{{/* kubesearch.queryapiAuthenticators: "true" when some request can be authenticated without --anonymous (Karmada's front proxy counts). */}}
{{- define "kubesearch.queryapiAuthenticators" -}}
{{- $a := .Values.queryapi.auth -}}
{{- if or $a.tokenFile.existingSecret $a.clientCA.existingSecret $a.clientCA.existingConfigMap $a.tokenReview.kubeconfigSecret .Values.karmada.enabled }}true{{ end -}}
{{- end -}}

{{- define "kubesearch.queryapiAuthConfig" -}}
{{- $q := .root.Values.queryapi -}}
{{- $a := $q.auth -}}
{{- if $a.anonymous }}{{ $_ := set .config "anonymous" true }}{{ end -}}
{{- if $a.tokenFile.existingSecret }}{{ $_ := set .config "token-auth-file" (printf "/etc/kubesearch/tokens/%s" $a.tokenFile.key) }}{{ end -}}
{{- if or $a.clientCA.existingSecret $a.clientCA.existingConfigMap }}{{ $_ := set .config "client-ca-file" (printf "/etc/kubesearch/client-ca/%s" $a.clientCA.key) }}{{ end -}}
{{- if $a.tokenReview.kubeconfigSecret }}{{ $_ := set .config "authentication-kubeconfig" (printf "/etc/kubesearch/authentication/%s" $a.tokenReview.key) }}{{ $_ := set .config "token-review-max-in-flight" (int $a.tokenReview.maxInFlight) }}{{ end -}}
{{- if or $a.policy.rules $a.policy.existingConfigMap }}{{ $_ := set .config "authorization-policy-file" (printf "/etc/kubesearch/policy/%s" $a.policy.key) }}{{ end -}}
{{- with $a.subjectAccessReview }}{{ if .kubeconfigSecret -}}
{{- $_ := set $.config "subject-access-review-kubeconfig" (printf "/etc/kubesearch/subject-access-review/%s" .key) -}}
{{- $_ := set $.config "subject-access-review-allowed-ttl" .allowedTTL -}}
{{- $_ := set $.config "subject-access-review-denied-ttl" .deniedTTL -}}
{{- $_ := set $.config "subject-access-review-max-in-flight-per-subject" (int .maxInFlightPerSubject) -}}
{{- $_ := set $.config "subject-access-review-rate-per-subject" .ratePerSubject -}}
{{- $_ := set $.config "subject-access-review-burst-per-subject" (int .burstPerSubject) -}}
{{- end }}{{ end -}}
{{- with .root.Values.karmada }}{{ if .enabled -}}
{{- $_ := set $.config "requestheader-client-ca-file" (printf "/etc/kubesearch/front-proxy-ca/%s" .frontProxyCA.key) -}}
{{- /* One comma-separated value: the config file takes lists only for kubesearch's own list flags, and this is a pflag string slice. */}}
{{- with .frontProxyAllowedNames }}{{ $_ := set $.config "requestheader-allowed-names" (join "," .) }}{{ end -}}
{{- end }}{{ end -}}
{{- if include "kubesearch.queryapiTLS" .root -}}
{{- $_ := set .config "tls-cert-file" "/etc/kubesearch/tls/tls.crt" -}}
{{- $_ := set .config "tls-private-key-file" "/etc/kubesearch/tls/tls.key" -}}
{{- end -}}
{{- $_ := set .config "rate-limit" $q.limits.rate -}}
{{- $_ := set .config "rate-burst" (int $q.limits.burst) -}}
{{- $_ := set .config "max-watches-per-subject" (int $q.limits.maxWatchesPerSubject) -}}
{{- $_ := set .config "max-lists-per-subject" (int $q.limits.maxListsPerSubject) -}}
{{- $_ := set .config "max-requests-inflight" (int $q.limits.maxRequestsInFlight) -}}
{{- $_ := set .config "write-timeout" $q.limits.writeTimeout -}}
{{- $_ := set .config "max-snapshots-per-subject" (int $q.limits.maxSnapshotsPerSubject) -}}
{{- $_ := set .config "max-snapshots" (int $q.limits.maxSnapshots) -}}
{{- $_ := set .config "max-fuzzy-searches-per-subject" (int $q.limits.maxFuzzySearchesPerSubject) -}}
{{- $_ := set .config "max-watch-objects-per-subject" (int $q.limits.maxWatchObjectsPerSubject) -}}
{{- with $q.limits.perSource -}}
{{- $_ := set $.config "source-rate-limit" .rate -}}
{{- $_ := set $.config "source-rate-burst" (int .burst) -}}
{{- $_ := set $.config "source-auth-failure-limit" .authFailureRate -}}
{{- $_ := set $.config "source-auth-failure-burst" (int .authFailureBurst) -}}
{{- $_ := set $.config "max-connections-per-source" (int .maxConnections) -}}
{{- end -}}
{{- end -}}

{{- define "kubesearch.queryapiAuthMounts" -}}
{{- $a := .Values.queryapi.auth -}}
{{- if $a.tokenFile.existingSecret }}
- {name: tokens, mountPath: /etc/kubesearch/tokens, readOnly: true}
{{- end }}
{{- if or $a.clientCA.existingSecret $a.clientCA.existingConfigMap }}
- {name: client-ca, mountPath: /etc/kubesearch/client-ca, readOnly: true}
{{- end }}
{{- if $a.tokenReview.kubeconfigSecret }}
- {name: authentication, mountPath: /etc/kubesearch/authentication, readOnly: true}
{{- end }}
{{- if or $a.policy.rules $a.policy.existingConfigMap }}
- {name: policy, mountPath: /etc/kubesearch/policy, readOnly: true}
{{- end }}
{{- if $a.subjectAccessReview.kubeconfigSecret }}
- {name: subject-access-review, mountPath: /etc/kubesearch/subject-access-review, readOnly: true}
{{- end }}
{{- if include "kubesearch.queryapiTLS" . }}
- {name: tls, mountPath: /etc/kubesearch/tls, readOnly: true}
{{- end }}
{{- if .Values.karmada.enabled }}
- {name: front-proxy-ca, mountPath: /etc/kubesearch/front-proxy-ca, readOnly: true}
{{- end }}
{{- end -}}

{{/*
No subPath anywhere: the kubelet swaps a mounted Secret's or ConfigMap's files in place, and the query
API re-reads the token file, the policy and the serving certificate when they change. The TokenReview
Secret is mounted whole, so its kubeconfig may name files beside it (a token, a CA) by relative path.
*/}}
{{- define "kubesearch.queryapiAuthVolumes" -}}
{{- $a := .Values.queryapi.auth -}}
{{- if $a.tokenFile.existingSecret }}
- name: tokens
  secret: {secretName: {{ $a.tokenFile.existingSecret }}, items: [{key: {{ $a.tokenFile.key }}, path: {{ $a.tokenFile.key }}}]}
{{- end }}
{{- if $a.clientCA.existingSecret }}
- name: client-ca
  secret: {secretName: {{ $a.clientCA.existingSecret }}, items: [{key: {{ $a.clientCA.key }}, path: {{ $a.clientCA.key }}}]}
{{- else if $a.clientCA.existingConfigMap }}
- name: client-ca
  configMap: {name: {{ $a.clientCA.existingConfigMap }}, items: [{key: {{ $a.clientCA.key }}, path: {{ $a.clientCA.key }}}]}
{{- end }}
{{- if $a.tokenReview.kubeconfigSecret }}
- name: authentication
  secret: {secretName: {{ $a.tokenReview.kubeconfigSecret }}}
{{- end }}
{{- if $a.subjectAccessReview.kubeconfigSecret }}
- name: subject-access-review
  secret: {secretName: {{ $a.subjectAccessReview.kubeconfigSecret }}}
{{- end }}
{{- if or $a.policy.rules $a.policy.existingConfigMap }}
- name: policy
  configMap: {name: {{ include "kubesearch.queryapiPolicyConfigMap" . }}, items: [{key: {{ $a.policy.key }}, path: {{ $a.policy.key }}}]}
{{- end }}
{{- if include "kubesearch.queryapiTLS" . }}
- name: tls
  secret: {secretName: {{ .Values.queryapi.tls.existingSecret }}, items: [{key: tls.crt, path: tls.crt}, {key: tls.key, path: tls.key}]}
{{- end }}
{{- with .Values.karmada }}{{ if .enabled }}
{{- if .frontProxyCA.existingSecret }}
- name: front-proxy-ca
  secret: {secretName: {{ .frontProxyCA.existingSecret }}, items: [{key: {{ .frontProxyCA.key }}, path: {{ .frontProxyCA.key }}}]}
{{- else }}
- name: front-proxy-ca
  configMap: {name: {{ .frontProxyCA.existingConfigMap }}, items: [{key: {{ .frontProxyCA.key }}, path: {{ .frontProxyCA.key }}}]}
{{- end }}
{{- end }}{{ end }}
{{- end -}}

{{/*
The collector's and the indexer's operational endpoints (operationalAuth): the Secret with the token
file they authenticate /metrics and /status with, and the tokens of its readers, the query API and
Prometheus. kubesearch.operationalAuth is "true" when they authenticate.
*/}}
{{- define "kubesearch.operationalAuth" -}}
{{- if and .Values.operationalAuth.enabled (or .Values.collector.enabled .Values.indexer.enabled) }}true{{ end -}}
{{- end -}}

{{- define "kubesearch.operationalSecret" -}}
{{- default (include "kubesearch.component" (dict "root" . "component" "operational-tokens")) .Values.operationalAuth.existingSecret -}}
{{- end -}}

{{/* The collector's and the indexer's token file: its config key, mount and volume. */}}
{{- define "kubesearch.operationalAuthConfig" -}}
{{- if include "kubesearch.operationalAuth" .root -}}
{{- $_ := set .config "token-auth-file" (printf "/etc/kubesearch/operational-tokens/%s" .root.Values.operationalAuth.tokenFileKey) -}}
{{- end -}}
{{- end -}}

{{- define "kubesearch.operationalAuthMounts" -}}
{{- if include "kubesearch.operationalAuth" . }}
- {name: operational-tokens, mountPath: /etc/kubesearch/operational-tokens, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kubesearch.operationalAuthVolumes" -}}
{{- if include "kubesearch.operationalAuth" . }}
{{- $key := .Values.operationalAuth.tokenFileKey }}
- name: operational-tokens
  secret: {secretName: {{ include "kubesearch.operationalSecret" . }}, items: [{key: {{ $key }}, path: {{ $key }}}]}
{{- end }}
{{- end -}}

{{/*
Karmada mode (karmada.enabled, README "Coming from Karmada"). The control plane's kubeconfig is one
Secret, mounted whole (its kubeconfig may name a token or CA file beside it by relative path) into the
collector (members, and registries with karmada.registries) and the query API (the registries it
serves under search.karmada.io, with karmada.registries). kubesearch.karmadaCheck fails the render on
values the mode cannot honour, naming them; the query API's own checks are in queryapiAuthCheck.
*/}}
{{- define "kubesearch.karmadaCheck" -}}
{{- $k := .Values.karmada -}}
{{- $c := .Values.collector -}}
{{- if and $k.enabled (or $c.enabled .Values.queryapi.enabled) }}
{{- $_ := required "karmada.kubeconfigSecret: required with karmada.enabled (a Secret of the release namespace whose key karmada.kubeconfigKey is a kubeconfig of the Karmada control plane)" $k.kubeconfigSecret }}
{{- if or (eq $c.mode "central") $c.members }}
{{- fail "karmada.enabled: exclusive with collector.mode=central and collector.members, as the members are the control plane's Cluster objects: unset those, or karmada.enabled" }}
{{- end }}
{{- /* collector.cluster names the one member of the in-cluster mode: its default says nothing, anything else asks for a member Karmada mode would not collect. */}}
{{- with $c.cluster }}{{ if or (ne .name "in-cluster") .labels .provider .region .zone }}
{{- fail "karmada.enabled: exclusive with collector.cluster (the in-cluster mode's one member), as the members are the control plane's Cluster objects: unset it, or karmada.enabled" }}
{{- end }}{{ end }}
{{- end }}
{{- end -}}

{{- define "kubesearch.karmadaKubeconfig" -}}/etc/kubesearch/karmada/{{ .Values.karmada.kubeconfigKey }}{{- end -}}

{{- define "kubesearch.karmadaMount" -}}
- {name: karmada, mountPath: /etc/kubesearch/karmada, readOnly: true}
{{- end -}}

{{- define "kubesearch.karmadaVolume" -}}
- name: karmada
  secret: {secretName: {{ .Values.karmada.kubeconfigSecret }}}
{{- end -}}
