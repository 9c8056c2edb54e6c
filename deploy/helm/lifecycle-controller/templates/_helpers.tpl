{{/*
Names, labels, the ServiceAccount name, address validation and the controller's arguments.
*/}}

{{- define "lifecycle-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fullname: the release name when it already contains the chart name, else
<release>-<chart>; truncated to 63 characters (the DNS label limit).
*/}}
{{- define "lifecycle-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lifecycle-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lifecycle-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lifecycle-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller-manager
{{- end }}

{{- define "lifecycle-controller.labels" -}}
helm.sh/chart: {{ include "lifecycle-controller.chart" . }}
{{ include "lifecycle-controller.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "lifecycle-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lifecycle-controller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false (the chart will not bind its rights to the namespace's default ServiceAccount)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The username the API server sees for the controller's ServiceAccount token. */}}
{{- define "lifecycle-controller.serviceAccountUsername" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "lifecycle-controller.serviceAccountName" .) }}
{{- end }}

{{- define "lifecycle-controller.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "lifecycle-controller.leaseName" -}}
{{- default (include "lifecycle-controller.fullname" .) .Values.controllerManager.leaderElection.resourceName }}
{{- end }}

{{- define "lifecycle-controller.leaseNamespace" -}}
{{- default .Release.Namespace .Values.controllerManager.leaderElection.namespace }}
{{- end }}

{{/* breakerName: the ConfigMap that latches the circuit breaker, "<lease name>-breaker". */}}
{{- define "lifecycle-controller.breakerName" -}}
{{- printf "%s-breaker" (include "lifecycle-controller.leaseName" . | trunc 245) }}
{{- end }}

{{/* A Go-style boolean literal: "true" for a truthy value, else "false". */}}
{{- define "lifecycle-controller.bool" -}}
{{- if . }}true{{ else }}false{{ end }}
{{- end }}

{{- define "lifecycle-controller.metricsScheme" -}}
{{- if .Values.metrics.secure }}https{{ else }}http{{ end }}
{{- end }}

{{/*
bindPort: validate a listen address given as (dict "key" <values path> "value" <value>) and
return its port. Accepts ":port", "host:port" and "[IPv6]:port" with a port of 1-65535
(leading zeros ignored).
*/}}
{{- define "lifecycle-controller.bindPort" -}}
{{- $key := .key }}
{{- $value := .value }}
{{- if not (kindIs "string" $value) }}
{{- fail (printf "%s must be a string" $key) }}
{{- end }}
{{- if not (regexMatch "^(\\[[0-9A-Fa-f:.%a-zA-Z]+\\]|[^:\\[\\]]*):[0-9]+$" $value) }}
{{- fail (printf "%s must use :port, host:port, or [IPv6]:port with a numeric port" $key) }}
{{- end }}
{{- $port := regexReplaceAll "^0+" (regexFind "[0-9]+$" $value) "" }}
{{- if or (eq $port "") (gt (len $port) 5) (gt (atoi $port) 65535) }}
{{- fail (printf "%s port must be between 1 and 65535" $key) }}
{{- end }}
{{- $port }}
{{- end }}

{{- define "lifecycle-controller.healthPort" -}}
{{- include "lifecycle-controller.bindPort" (dict "key" "controllerManager.healthProbeBindAddress" "value" .Values.controllerManager.healthProbeBindAddress) }}
{{- end }}

{{- define "lifecycle-controller.metricsPort" -}}
{{- include "lifecycle-controller.bindPort" (dict "key" "metrics.bindAddress" "value" .Values.metrics.bindAddress) }}
{{- end }}

{{/*
catchUp: the policy of one action from controllerManager.actionTiming; "always" when the map,
the action or the key is missing or null. An explicit "" is passed through, so the controller
rejects it at startup.
*/}}
{{- define "lifecycle-controller.catchUp" -}}
{{- $timing := .root.Values.controllerManager.actionTiming | default dict }}
{{- $action := get $timing .action | default dict }}
{{- if hasKey $action "catchUp" }}
{{- $value := get $action "catchUp" }}
{{- if kindIs "invalid" $value }}always{{ else }}{{ $value }}{{ end }}
{{- else }}always{{ end }}
{{- end }}

{{/*
args: the manager's command line, one flag per list item (YAML list of strings, as JSON).
The resource list is the same effective list that feeds the RBAC rules.
*/}}
{{- define "lifecycle-controller.args" -}}
{{- $cm := .Values.controllerManager }}
{{- $scope := $cm.scope | default dict }}
{{- $args := list (printf "--health-probe-bind-address=%s" $cm.healthProbeBindAddress) }}
{{- $le := $cm.leaderElection | default dict }}
{{- if $le.enabled }}
{{- $args = append $args "--leader-elect" }}
{{- $args = append $args (printf "--leader-election-id=%s" (include "lifecycle-controller.leaseName" .)) }}
{{- with $le.namespace }}{{ $args = append $args (printf "--leader-election-namespace=%s" .) }}{{ end }}
{{- with $le.leaseDuration }}{{ $args = append $args (printf "--leader-election-lease-duration=%s" .) }}{{ end }}
{{- with $le.renewDeadline }}{{ $args = append $args (printf "--leader-election-renew-deadline=%s" .) }}{{ end }}
{{- with $le.retryPeriod }}{{ $args = append $args (printf "--leader-election-retry-period=%s" .) }}{{ end }}
{{- if hasKey $le "releaseOnCancel" }}
{{- $args = append $args (printf "--leader-election-release-on-cancel=%s" (include "lifecycle-controller.bool" (ne (toString $le.releaseOnCancel) "false"))) }}
{{- end }}
{{- end }}
{{- if .Values.metrics.enabled }}
{{- $args = append $args (printf "--metrics-bind-address=%s" .Values.metrics.bindAddress) }}
{{- $args = append $args (printf "--metrics-secure=%s" (include "lifecycle-controller.bool" .Values.metrics.secure)) }}
{{- if .Values.metrics.certSecretName }}
{{- $args = append $args "--metrics-cert-path=/etc/lifecycle-controller/metrics-certs" }}
{{- end }}
{{- else }}
{{- $args = append $args "--metrics-bind-address=0" }}
{{- end }}
{{- if $cm.enableHTTP2 }}
{{- $args = append $args "--enable-http2" }}
{{- end }}
{{- $args = append $args (printf "--dry-run=%s" (include "lifecycle-controller.bool" $cm.dryRun)) }}
{{- $args = append $args (printf "--restart-catch-up=%s" (include "lifecycle-controller.catchUp" (dict "root" . "action" "restart"))) }}
{{- $args = append $args (printf "--delete-catch-up=%s" (include "lifecycle-controller.catchUp" (dict "root" . "action" "delete"))) }}
{{- with $cm.logLevel }}{{ $args = append $args (printf "--log-level=%s" .) }}{{ end }}
{{- with $cm.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end }}
{{- if not (kindIs "invalid" $cm.workers) }}{{ $args = append $args (printf "--workers=%d" (int64 $cm.workers)) }}{{ end }}
{{- with $cm.rediscoveryInterval }}{{ $args = append $args (printf "--rediscovery-interval=%s" .) }}{{ end }}
{{- with $cm.maxDeleteTTL }}{{ $args = append $args (printf "--max-delete-ttl=%s" .) }}{{ end }}
{{- with $cm.maintenanceWindow }}{{ $args = append $args (printf "--maintenance-window=%s" .) }}{{ end }}
{{- with $cm.warnBefore }}{{ $args = append $args (printf "--warn-before=%s" .) }}{{ end }}
{{- if $cm.persistObservations }}{{ $args = append $args "--persist-observations=true" }}{{ end }}
{{- if not (kindIs "invalid" $cm.maxDeletesPerMinute) }}{{ $args = append $args (printf "--max-deletes-per-minute=%d" (int64 $cm.maxDeletesPerMinute)) }}{{ end }}
{{- if not (kindIs "invalid" $cm.maxRestartsPerMinute) }}{{ $args = append $args (printf "--max-restarts-per-minute=%d" (int64 $cm.maxRestartsPerMinute)) }}{{ end }}
{{- if $cm.actOnAnnotationCopies }}{{ $args = append $args "--act-on-annotation-copies=true" }}{{ end }}
{{- $breaker := $cm.breaker | default dict }}
{{- if gt (int64 ($breaker.maxActions | default 0)) 0 }}
{{- $args = append $args (printf "--breaker-max-actions=%d" (int64 $breaker.maxActions)) }}
{{- with $breaker.window }}{{ $args = append $args (printf "--breaker-window=%s" .) }}{{ end }}
{{- if not $le.enabled }}
{{- /* the breaker ConfigMap is named after the Lease: the same name the RBAC grants */}}
{{- $args = append $args (printf "--leader-election-id=%s" (include "lifecycle-controller.leaseName" .)) }}
{{- $args = append $args (printf "--leader-election-namespace=%s" (include "lifecycle-controller.leaseNamespace" .)) }}
{{- end }}
{{- end }}
{{- /* the other blast-radius flags are rendered only when they differ from the default */}}
{{- with $cm.minRestartInterval }}{{ if not (has (toString .) (list "0" "0s")) }}{{ $args = append $args (printf "--min-restart-interval=%s" .) }}{{ end }}{{ end }}
{{- if gt (int64 ($cm.maxConcurrentRollouts | default 0)) 0 }}{{ $args = append $args (printf "--max-concurrent-rollouts=%d" (int64 $cm.maxConcurrentRollouts)) }}{{ end }}
{{- with $cm.rolloutTimeout }}{{ if ne (toString .) "15m" }}{{ $args = append $args (printf "--rollout-timeout=%s" .) }}{{ end }}{{ end }}
{{- with $cm.restartJitter }}{{ if not (has (toString .) (list "0" "0s")) }}{{ $args = append $args (printf "--restart-jitter=%s" .) }}{{ end }}{{ end }}
{{- /* webhook notifications (docs/notifications.md) */}}
{{- $notifications := .Values.notifications | default dict }}
{{- range $notifications.webhooks }}{{ $args = append $args (printf "--notify-webhook=%s" .) }}{{ end }}
{{- if $notifications.existingSecret }}
{{- $args = append $args (printf "--notify-webhook-file=%s/%s" (include "lifecycle-controller.notificationsDir" .) ($notifications.existingSecretKey | default "urls")) }}
{{- end }}
{{- if $notifications.heldActions }}{{ $args = append $args "--notify-held-actions=true" }}{{ end }}
{{- with .Values.clusterName }}{{ $args = append $args (printf "--cluster-name=%s" .) }}{{ end }}
{{- range (include "lifecycle-controller.watchResources" . | fromJsonArray) }}
{{- $args = append $args (printf "--watch-resource=%s" .) }}
{{- end }}
{{- range (include "lifecycle-controller.list" (dict "key" "ignoreResources" "scope" $scope) | fromJsonArray) }}
{{- $args = append $args (printf "--ignore-resource=%s" .) }}
{{- end }}
{{- range (include "lifecycle-controller.list" (dict "key" "watchNamespaces" "scope" $scope) | fromJsonArray) }}
{{- $args = append $args (printf "--watch-namespace=%s" .) }}
{{- end }}
{{- range (include "lifecycle-controller.list" (dict "key" "ignoreNamespaces" "scope" $scope) | fromJsonArray) }}
{{- $args = append $args (printf "--ignore-namespace=%s" .) }}
{{- end }}
{{- range .Values.policyProtectedNamespaces }}
{{- $args = append $args (printf "--policy-protected-namespace=%s" .) }}
{{- end }}
{{- with .Values.policyDefaultLimit }}
{{- $args = append $args (printf "--policy-default-limit=%s" (toString .)) }}
{{- end }}
{{- range .Values.extraArgs }}
{{- $args = append $args (toString .) }}
{{- end }}
{{- toJson $args }}
{{- end }}

{{/* Where the notifications Secret (notifications.existingSecret) is mounted. */}}
{{- define "lifecycle-controller.notificationsDir" -}}
/etc/lifecycle-controller/notifications
{{- end }}
