{{/* The chart's name (nameOverride wins). */}}
{{- define "airlock.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's object name prefix (fullnameOverride wins; no "airlock-airlock"). */}}
{{- define "airlock.fullname" -}}
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

{{/* Where the sandboxes live: sandbox.namespace.name, else <release namespace>-sandboxes. */}}
{{- define "airlock.sandboxNamespace" -}}
{{- default (printf "%s-sandboxes" .Release.Namespace) .Values.sandbox.namespace.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "airlock.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "airlock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: airlock
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The controller pods' labels: its selector, and the only peers a runner admits. */}}
{{- define "airlock.controllerSelector" -}}
app.kubernetes.io/name: {{ include "airlock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Common annotations, as a block (empty when none). */}}
{{- define "airlock.annotations" -}}
{{- with .Values.commonAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "airlock.image" -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) -}}
{{- end -}}

{{- define "airlock.controllerImage" -}}
{{- include "airlock.image" (dict "image" .Values.controller.image "appVersion" .Chart.AppVersion) -}}
{{- end -}}

{{- define "airlock.runnerImage" -}}
{{- include "airlock.image" (dict "image" .Values.sandbox.image "appVersion" .Chart.AppVersion) -}}
{{- end -}}

{{/* The bearer token's Secret and key. */}}
{{- define "airlock.tokenSecret" -}}
{{- default (printf "%s-token" (include "airlock.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "airlock.probeCanarySecret" -}}
{{- printf "%s-probe-canary" (include "airlock.fullname" .) -}}
{{- end -}}

{{/* The isolation probe's allowed destination: the helm test pod's Service, its name and
labels, and the name a sandbox uses for it (NAME.NAMESPACE.svc: the proxy resolves it as the
full name in the controller's cluster_domain). */}}
{{- define "airlock.probeService" -}}
{{- printf "%s-probe" (include "airlock.fullname" .) -}}
{{- end -}}

{{- define "airlock.probeSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: isolation-probe
{{- end -}}

{{- define "airlock.probeHost" -}}
{{- printf "%s.%s.svc" (include "airlock.probeService" .) .Release.Namespace -}}
{{- end -}}

{{/* The backend's dns settings from sandbox.dns (selectors, ipBlocks, ports). */}}
{{- define "airlock.dnsPeers" -}}
{{- $selectors := list -}}
{{- range .Values.sandbox.dns.selectors -}}
{{- $selectors = append $selectors (dict "namespace" .namespace "pod_labels" (.podLabels | default dict)) -}}
{{- end -}}
{{- toYaml (dict "selectors" $selectors "ip_blocks" .Values.sandbox.dns.ipBlocks "ports" .Values.sandbox.dns.ports) -}}
{{- end -}}

{{/* A value kept across upgrades: the existing Secret's key when the cluster has it, else random. */}}
{{- define "airlock.keptRandom" -}}
{{- $found := lookup "v1" "Secret" .namespace .name -}}
{{- if and $found (index ($found.data | default dict) .key) -}}
{{- index $found.data .key -}}
{{- else -}}
{{- randAlphaNum .length | b64enc -}}
{{- end -}}
{{- end -}}

{{/* Names of the agents the chart adds for its isolation probe. */}}
{{- define "airlock.probeAgents" -}}
airlock-probe-deny airlock-probe-allow
{{- end -}}
