{{/*
RBAC generation from the scope filters (the same rules as the reference chart, without the
"update" verb: the controller only patches).

Every helper returns JSON so callers can `fromJson`/`fromJsonArray` it; validation failures
stop the render with one message naming the value and the fix.
*/}}

{{/* list: one of the scope lists, validated to be a YAML list (null counts as empty). */}}
{{- define "lifecycle-controller.list" -}}
{{- $value := get .scope .key }}
{{- if kindIs "invalid" $value }}
{{- $value = list }}
{{- end }}
{{- if not (kindIs "slice" $value) }}
{{- fail (printf "controllerManager.scope.%s must be a list" .key) }}
{{- end }}
{{- toJson $value }}
{{- end }}

{{/*
watchResources: the effective watch list. The exact entry "persistentvolumes" is dropped when
namespace filters are set (PersistentVolumes are cluster-scoped). This one list feeds both the
--watch-resource flags and the RBAC rules.
*/}}
{{- define "lifecycle-controller.watchResources" -}}
{{- $scope := .Values.controllerManager.scope | default dict }}
{{- $watch := get $scope "watchResources" }}
{{- if not (kindIs "slice" $watch) }}
{{- fail "controllerManager.scope.watchResources must be a list" }}
{{- end }}
{{- if not $watch }}
{{- fail "controllerManager.scope.watchResources is empty: list the resources to act on, or [\"*\"] for every eligible resource (wildcard RBAC)" }}
{{- end }}
{{- $namespaces := include "lifecycle-controller.list" (dict "key" "watchNamespaces" "scope" $scope) | fromJsonArray }}
{{- $result := list }}
{{- range $watch }}
{{- if not (and $namespaces (eq (toString .) "persistentvolumes")) }}
{{- $result = append $result (toString .) }}
{{- end }}
{{- end }}
{{- if and $watch (not $result) }}
{{- fail "namespace filters exclude PersistentVolumes, leaving no resources to watch" }}
{{- end }}
{{- toJson $result }}
{{- end }}

{{/* rbacScope: "namespaced" when every watch-namespace entry is exact, else "cluster". */}}
{{- define "lifecycle-controller.rbacScope" -}}
{{- $scope := .Values.controllerManager.scope | default dict }}
{{- $namespaces := include "lifecycle-controller.list" (dict "key" "watchNamespaces" "scope" $scope) | fromJsonArray }}
{{- $glob := false }}
{{- range $namespaces }}
{{- if regexMatch "[*?\\[\\]\\\\]" (toString .) }}{{ $glob = true }}{{ end }}
{{- end }}
{{- if and $namespaces (not $glob) }}namespaced{{ else }}cluster{{ end }}
{{- end }}

{{/*
rbacNamespaces: in namespaced scope, the unique exact watch namespaces minus the ignored ones.
Every watch and ignore entry must be an exact DNS label.
*/}}
{{- define "lifecycle-controller.rbacNamespaces" -}}
{{- $scope := .Values.controllerManager.scope | default dict }}
{{- $watch := include "lifecycle-controller.list" (dict "key" "watchNamespaces" "scope" $scope) | fromJsonArray }}
{{- $ignore := include "lifecycle-controller.list" (dict "key" "ignoreNamespaces" "scope" $scope) | fromJsonArray }}
{{- range (concat $watch $ignore) }}
{{- $name := toString . }}
{{- if or (gt (len $name) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name)) }}
{{- fail (printf "generated namespaced RBAC requires exact namespace names, got %q; use rbac.create: false for supplied RBAC" $name) }}
{{- end }}
{{- end }}
{{- $allowed := list }}
{{- range $watch }}
{{- if not (has (toString .) $ignore) }}
{{- $allowed = append $allowed (toString .) }}
{{- end }}
{{- end }}
{{- $allowed = uniq $allowed }}
{{- if not $allowed }}
{{- fail "namespaced RBAC requires at least one namespace after ignore rules" }}
{{- end }}
{{- toJson $allowed }}
{{- end }}

{{/* The verbs on watched resources: no "update", the controller only patches. */}}
{{- define "lifecycle-controller.resourceVerbs" -}}
["delete","get","list","patch","watch"]
{{- end }}

{{/* Events are written through events.k8s.io/v1; core events keeps kubectl tooling working. */}}
{{- define "lifecycle-controller.eventRules" -}}
[{"apiGroups":[""],"resources":["events"],"verbs":["create","patch"]},{"apiGroups":["events.k8s.io"],"resources":["events"],"verbs":["create","patch"]}]
{{- end }}

{{/*
resourceRules: one rule per unique watch entry (split at the first "." into resource and API
group), minus ignored entries (and "namespaces" in namespaced scope, which gets its own
resourceNames-limited ClusterRole), then the two Event rules. An empty watch list is one
wildcard rule.
*/}}
{{- define "lifecycle-controller.resourceRules" -}}
{{- $scope := .Values.controllerManager.scope | default dict }}
{{- $watch := include "lifecycle-controller.watchResources" . | fromJsonArray }}
{{- $ignore := include "lifecycle-controller.list" (dict "key" "ignoreResources" "scope" $scope) | fromJsonArray }}
{{- $verbs := include "lifecycle-controller.resourceVerbs" . | fromJsonArray }}
{{- $namespaced := eq (include "lifecycle-controller.rbacScope" .) "namespaced" }}
{{- range $ignore }}
{{- $entry := toString . }}
{{- if and (ne $entry "*") (regexMatch "[*?\\[\\]\\\\]" $entry) }}
{{- fail "chart-generated RBAC requires exact ignoreResources entries or *; use rbac.create: false for supplied RBAC" }}
{{- end }}
{{- end }}
{{- $ignoreAll := has "*" $ignore }}
{{- $rules := list }}
{{- if not $watch }}
{{- if not $ignoreAll }}
{{- $rules = append $rules (dict "apiGroups" (list "*") "resources" (list "*") "verbs" $verbs) }}
{{- end }}
{{- end }}
{{- range (uniq $watch) }}
{{- $entry := . }}
{{- $rule := dict }}
{{- if eq $entry "*" }}
{{- $rule = dict "apiGroups" (list "*") "resources" (list "*") "verbs" $verbs }}
{{- else }}
{{- $parts := splitn "." 2 $entry }}
{{- $resource := $parts._0 }}
{{- $group := default "" $parts._1 }}
{{- if eq $resource "" }}
{{- fail (printf "invalid controllerManager.scope.watchResources entry %q: resource segment cannot be empty" $entry) }}
{{- end }}
{{- if and (contains "." $entry) (has "" (splitList "." $group)) }}
{{- fail (printf "invalid controllerManager.scope.watchResources entry %q: apiGroup segments cannot be empty" $entry) }}
{{- end }}
{{- if or (not (regexMatch "^[a-z0-9-]+$" $resource)) (not (regexMatch "^[a-z0-9.-]*$" $group)) }}
{{- fail (printf "invalid controllerManager.scope.watchResources entry %q: chart-generated RBAC requires exact names or a lone *; use rbac.create: false for supplied RBAC" $entry) }}
{{- end }}
{{- $rule = dict "apiGroups" (list $group) "resources" (list $resource) "verbs" $verbs }}
{{- end }}
{{- $skip := or $ignoreAll (has $entry $ignore) (and $namespaced (eq $entry "namespaces")) }}
{{- if not $skip }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- $rules = concat $rules (include "lifecycle-controller.eventRules" . | fromJsonArray) }}
{{- toJson $rules }}
{{- end }}

{{/*
watchesNamespaceObjects: true when the Namespace objects themselves are watched in namespaced
scope (the exact entry "namespaces", not ignored), which needs the namespace ClusterRole.
*/}}
{{- define "lifecycle-controller.namespaceRBAC" -}}
{{- $scope := .Values.controllerManager.scope | default dict }}
{{- $watch := include "lifecycle-controller.watchResources" . | fromJsonArray }}
{{- $ignore := include "lifecycle-controller.list" (dict "key" "ignoreResources" "scope" $scope) | fromJsonArray }}
{{- if and (eq (include "lifecycle-controller.rbacScope" .) "namespaced") (has "namespaces" $watch) (not (has "namespaces" $ignore)) (not (has "*" $ignore)) }}true{{ end }}
{{- end }}
