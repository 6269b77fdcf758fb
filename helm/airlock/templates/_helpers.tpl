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

{{/* The isolation of agents that name none: sandbox.defaultIsolation, where auto is gvisor
when the cluster has the gvisor RuntimeClass (lookup; nothing under helm template), else
container. */}}
{{- define "airlock.defaultIsolation" -}}
{{- $chosen := .Values.sandbox.defaultIsolation -}}
{{- if eq $chosen "auto" -}}
{{- if lookup "node.k8s.io/v1" "RuntimeClass" "" .Values.sandbox.runtimeClasses.gvisor -}}
gvisor
{{- else -}}
container
{{- end -}}
{{- else -}}
{{- $chosen -}}
{{- end -}}
{{- end -}}

{{/* A value kept across upgrades: the existing Secret's key when the cluster has it, else random
(.length alphanumerics; .hex: 64 hex digits, 32 bytes, from sha256 of 64 random alphanumerics). */}}
{{- define "airlock.keptRandom" -}}
{{- $found := lookup "v1" "Secret" .namespace .name -}}
{{- if and $found (index ($found.data | default dict) .key) -}}
{{- index $found.data .key -}}
{{- else -}}
{{- if .hex -}}
{{- randAlphaNum 64 | sha256sum | b64enc -}}
{{- else -}}
{{- randAlphaNum .length | b64enc -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Kubernetes backend's settings (backends.kubernetes) from values, as YAML: the
controller's, and (with its own controller labels) the isolation test's. */}}
{{- define "airlock.kubernetesSettings" -}}
{{- $kube := dict
    "namespace" (include "airlock.sandboxNamespace" .)
    "in_cluster" true
    "connect" (include "airlock.connect" .)
    "image" (include "airlock.runnerImage" .)
    "image_pull_policy" .Values.sandbox.image.pullPolicy
    "image_pull_secrets" .Values.sandbox.imagePullSecrets
    "runtime_classes" .Values.sandbox.runtimeClasses
    "controller_pod_labels" (include "airlock.controllerSelector" . | fromYaml)
    "controller_namespace" .Release.Namespace
    "dns" (include "airlock.dnsPeers" . | fromYaml)
    "cluster_domain" .Values.clusterDomain
    "node_selector" .Values.sandbox.nodeSelector
    "user_namespaces" .Values.sandbox.userNamespaces
    "tolerations" .Values.sandbox.tolerations
    "workspace_medium" .Values.sandbox.workspaceMedium
    "start_timeout" .Values.sandbox.startTimeout
    "lease_seconds" .Values.sandbox.leaseSeconds
    "owner_identity" (include "airlock.fullname" .)
    "network_policy" .Values.sandbox.networkPolicy
    "enforcement" (dict "controller_port" (int .Values.controller.service.port) "interval_s" (int .Values.sandbox.enforcementIntervalSeconds))
    "proxy" (dict "cpu" .Values.egressProxy.cpu "memory" .Values.egressProxy.memory) -}}
{{- /* Replicas (PostgreSQL: rolling updates, several at once) each need an owner identity of
their own, or one retires the other's sandboxes: none set, each uses its host name (its pod's
name); a replica's jobs outlive it in the store, and another adopts them. */ -}}
{{- if include "airlock.postgres" . -}}
{{- $_ := unset $kube "owner_identity" -}}
{{- end -}}
{{- with .Values.egressProxy.image.repository -}}
{{- $_ := set $kube.proxy "image" (printf "%s:%s" . (default $.Chart.AppVersion $.Values.egressProxy.image.tag)) -}}
{{- end -}}
{{- /* A sandbox namespace the chart creates gets the pull Secrets copied from the release's
namespace by the controller (no lookup: it works under helm template and GitOps too). */ -}}
{{- if and .Values.sandbox.namespace.create .Values.sandbox.imagePullSecrets -}}
{{- $_ := set $kube "pull_secrets_from" .Release.Namespace -}}
{{- end -}}
{{- toYaml $kube -}}
{{- end -}}

{{/* The isolation test's airlock.yaml: only the two probe agents, served by the test pod
itself (`airlock probe --serve-config`) for the length of `helm test`. The deny-all agent
reaches nothing; the allow-list agent reaches the probe's Service by name on allowedPort
(the proxy pod's NetworkPolicy admits the probe pod by its labels, never a pod CIDR) with a
sidecar credential. Its sandboxes admit the test pod, their controller, on the runner port. */}}
{{- define "airlock.probeConfig" -}}
{{- $t := .Values.isolationTest -}}
{{- $probe := dict
    "provider" (dict "kind" "command")
    "system" "Isolation probe: each message is one command in this sandbox."
    "tools" (list "bash")
    "tool_options" (dict "bash" (dict "timeout_s" (int $t.timeoutSeconds)))
    "backend" "kubernetes"
    "isolation" $t.isolation
    "resources" (dict "cpu" "250m" "memory" "128Mi")
    "defaults" (dict "max_turns" 2 "max_duration" (printf "%ds" (int $t.timeoutSeconds))) -}}
{{- $upstream := printf "http://%s:%d" (include "airlock.probeHost" .) (int $t.allowedPort) -}}
{{- $target := dict
    "service" (include "airlock.probeService" .)
    "namespace" .Release.Namespace
    "port" (int $t.allowedPort)
    "pods" (include "airlock.probeSelector" . | fromYaml) -}}
{{- $allow := deepCopy $probe -}}
{{- $_ := set $allow "network" (dict "allow" (list $target)) -}}
{{- $sidecar := dict "sidecar" (dict "upstream" $upstream "header" "x-airlock-probe") -}}
{{- $_ := set $allow "credentials" (list (dict "secret" "airlock-probe-canary" "inject" $sidecar)) -}}
{{- $kube := include "airlock.kubernetesSettings" . | fromYaml -}}
{{- $_ := set $kube "controller_pod_labels" (include "airlock.probeSelector" . | fromYaml) -}}
{{- $_ := set $kube "controller_namespace" .Release.Namespace -}}
{{- /* Its own owner identity: the release's is the production controller's, whose Lease and
sandboxes a controller of the same identity would retire. It measures every hole itself, row
by row, so its controller does not refuse before it measures (no standing exception: it lives
only for `helm test`); it copies no pull Secret (the production controller does). */ -}}
{{- $_ := set $kube "owner_identity" (printf "%s-probe" (include "airlock.fullname" .)) -}}
{{- $_ := set $kube "network_policy" "assume_enforced" -}}
{{- $_ := unset $kube "pull_secrets_from" -}}
{{- $config := dict
    "version" 1
    "secrets" (dict "airlock-probe-canary" (dict "file" "/var/run/airlock/probe/canary"))
    "backends" (dict "kubernetes" $kube)
    "agents" (dict "airlock-probe-deny" $probe "airlock-probe-allow" $allow) -}}
{{- toYaml $config -}}
{{- end -}}

{{/* How the controller reaches a runner: the chart's controller runs in the cluster, so by
pod IP (no port-forward, so no pods/portforward access either). */}}
{{- define "airlock.connect" -}}
pod_ip
{{- end -}}

{{/* The controller's RBAC rules of one scope (.scope: namespaced, cluster or pullSecretsFrom) for the chart's
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
{{- /* the isolation kinds' RuntimeClasses, then those agents name in placement.runtime_class */ -}}
{{- $classes := list $sandbox.runtimeClasses.gvisor $sandbox.runtimeClasses.micro_vm -}}
{{- range $_, $agent := .root.Values.agents -}}
{{- if and (kindIs "map" $agent.placement) $agent.placement.runtime_class -}}
{{- $classes = append $classes $agent.placement.runtime_class -}}
{{- end -}}
{{- end -}}
{{- $classes | uniq | toJson -}}
{{- else if eq .names "sandbox_namespace" -}}
{{- list (include "airlock.sandboxNamespace" .root) | toJson -}}
{{- else if eq .names "image_pull_secrets" -}}
{{- $sandbox.imagePullSecrets | default list | toJson -}}
{{- else -}}
{{- fail (printf "files/controller-access.json names %q, which the chart does not know" .names) -}}
{{- end -}}
{{- end -}}

{{/* The jobs API's TLS Secret (kubernetes.io/tls: tls.crt, tls.key, ca.crt): the existing one,
or the one cert-manager's Certificate writes. */}}
{{- define "airlock.tlsSecret" -}}
{{- with .Values.controller.tls -}}
{{- if .existingSecret -}}
{{- .existingSecret -}}
{{- else if .certManager.enabled -}}
{{- printf "%s-tls" (include "airlock.fullname" $) -}}
{{- else -}}
{{- fail "controller.tls.enabled: name the certificate's Secret (controller.tls.existingSecret) or let cert-manager make it (controller.tls.certManager.enabled)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the job store is PostgreSQL (store.postgres: an existing Secret, or the
chart's CloudNativePG cluster); else "" (SQLite on the data volume, one controller). */}}
{{- define "airlock.postgres" -}}
{{- with .Values.store.postgres -}}
{{- if or .existingSecret .cloudnativepg.enabled -}}
true
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The CloudNativePG Cluster's name; CNPG writes its DSN to the Secret <name>-app, key uri. */}}
{{- define "airlock.cnpgCluster" -}}
{{- printf "%s-pg" (include "airlock.fullname" .) | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret and key holding the store's DSN (env AIRLOCK_STORE). */}}
{{- define "airlock.storeSecret" -}}
{{- default (printf "%s-app" (include "airlock.cnpgCluster" .)) .Values.store.postgres.existingSecret -}}
{{- end -}}

{{- define "airlock.storeSecretKey" -}}
{{- if .Values.store.postgres.existingSecret -}}
{{- .Values.store.postgres.key -}}
{{- else -}}
uri
{{- end -}}
{{- end -}}

{{/* "true" when the controller reads its audit key from a Secret (--audit-key-file): with
PostgreSQL (replicas share it), or when controller.auditKey.existingSecret names one. */}}
{{- define "airlock.auditKeyMounted" -}}
{{- if or (include "airlock.postgres" .) .Values.controller.auditKey.existingSecret -}}
true
{{- end -}}
{{- end -}}

{{- define "airlock.auditKeySecret" -}}
{{- default (printf "%s-audit-key" (include "airlock.fullname" .)) .Values.controller.auditKey.existingSecret -}}
{{- end -}}

{{/* The controller pods' spread with several replicas: controller.topologySpreadConstraints,
else over nodes and zones (maxSkew 1, ScheduleAnyway: a small cluster still schedules them). */}}
{{- define "airlock.topologySpread" -}}
{{- if .Values.controller.topologySpreadConstraints -}}
{{- toYaml .Values.controller.topologySpreadConstraints -}}
{{- else -}}
{{- $selector := dict "matchLabels" (include "airlock.controllerSelector" . | fromYaml) -}}
{{- $spread := list -}}
{{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" -}}
{{- $spread = append $spread (dict "maxSkew" 1 "topologyKey" . "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" $selector) -}}
{{- end -}}
{{- toYaml $spread -}}
{{- end -}}
{{- end -}}

{{/* The chart's labels with an add-on's own (metrics.*.labels; theirs win on a shared key),
one key each. Call with (dict "ctx" $ "labels" .labels "component" "controller"). */}}
{{- define "airlock.addonLabels" -}}
{{- $own := merge (dict "app.kubernetes.io/component" .component) (include "airlock.labels" .ctx | fromYaml) -}}
{{- toYaml (merge (deepCopy (.labels | default dict)) $own) -}}
{{- end -}}
