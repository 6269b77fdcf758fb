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

{{/* An image: repository@digest when a digest pins it, else repository:tag (default appVersion). */}}
{{- define "airlock.image" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* "true" when an image's repository names a registry (its first component has a dot or a
port, or is localhost), or when its pullPolicy is Never (preloaded on the nodes); else "". */}}
{{- define "airlock.imagePullable" -}}
{{- $first := index (splitList "/" .repository) 0 -}}
{{- if or (eq .pullPolicy "Never") (and (contains "/" .repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost"))) -}}
true
{{- end -}}
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

{{/* The isolation probe's allowed destination: the helm test pod's Service. */}}
{{- define "airlock.probeHost" -}}
{{- printf "%s-probe.%s.svc.%s" (include "airlock.fullname" .) .Release.Namespace .Values.clusterDomain -}}
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

{{/* The pod network's CIDRs, as a JSON list: isolationTest.podCIDRs, else every node's
spec.podCIDRs as the cluster reports them (none when rendering without a cluster). */}}
{{- define "airlock.podCIDRs" -}}
{{- $cidrs := .Values.isolationTest.podCIDRs | default list -}}
{{- if not $cidrs -}}
{{- range (lookup "v1" "Node" "" "").items | default list -}}
{{- range (.spec.podCIDRs | default list) -}}
{{- $cidrs = append $cidrs . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $cidrs | uniq | toJson -}}
{{- end -}}

{{/* How the controller reaches a runner: the chart's controller runs in the cluster, so by
pod IP (no port-forward, so no pods/portforward access either). */}}
{{- define "airlock.connect" -}}
pod_ip
{{- end -}}

{{/* The controller's RBAC rules of one scope (.scope: namespaced or cluster) for the chart's
connection mode, from files/controller-access.json: written from the backend's access table
(airlock/sandbox/kubernetes/_access.py), which a chart test keeps it equal to. A rule limited to
configured objects gets their names as resourceNames, and is left out when none is configured
(an empty resourceNames would grant every object). */}}
{{- define "airlock.accessRules" -}}
{{- $root := .root -}}
{{- $modes := $root.Files.Get "files/controller-access.json" | fromJson -}}
{{- range index $modes (include "airlock.connect" $root) .scope }}
{{- $names := list -}}
{{- with .resourceNames -}}
{{- $names = include "airlock.accessNames" (dict "root" $root "names" .) | fromJsonArray -}}
{{- end -}}
{{- if or (not .resourceNames) $names }}
- apiGroups: {{ .apiGroups | toJson }}
  resources: {{ .resources | toJson }}
  verbs: {{ .verbs | toJson }}
  {{- with $names }}
  resourceNames: {{ . | toJson }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The objects an access rule is limited to (.names: which values name them), as JSON. */}}
{{- define "airlock.accessNames" -}}
{{- $sandbox := .root.Values.sandbox -}}
{{- if eq .names "runtime_classes" -}}
{{- list $sandbox.runtimeClasses.gvisor $sandbox.runtimeClasses.micro_vm | uniq | toJson -}}
{{- else if eq .names "sandbox_namespace" -}}
{{- list (include "airlock.sandboxNamespace" .root) | toJson -}}
{{- else if eq .names "image_pull_secrets" -}}
{{- $sandbox.imagePullSecrets | default list | toJson -}}
{{- else -}}
{{- fail (printf "files/controller-access.json names %q, which the chart does not know" .names) -}}
{{- end -}}
{{- end -}}
