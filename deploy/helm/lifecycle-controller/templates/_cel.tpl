{{/*
CEL building blocks of the admission policies: the annotation grammars of the controller
(docs/annotations.md#value-formats) as expressions over a string. Regular expressions avoid
backslashes, so they need no escaping inside CEL string literals.
*/}}

{{- define "lifecycle-controller.cel.prefix" -}}lifecycle.cezary.dev/{{- end }}

{{/*
The keys the controller reads or writes at the top level of metadata.annotations: the same list,
in the same order, as KNOWN_KEYS in lifecycle_controller/core/objects/keys.py (a chart test compares
them). inputKeys: the ones users write (the keys before last-restart-timestamp).
*/}}
{{- define "lifecycle-controller.cel.keyNames" -}}
["delete-after", "delete-at", "restart-after", "restart-at", "restart-every", "restart-cron", "cron-timezone", "reference-point", "catch-up", "dry-run", "maintenance-window", "warn-before", "exempt", "max-delete-ttl", "last-restart-timestamp", "managed-by", "restartedAt", "observed"]
{{- end }}

{{- define "lifecycle-controller.cel.knownKeys" -}}
{{- $full := list }}
{{- range (include "lifecycle-controller.cel.keyNames" . | fromJsonArray) }}{{ $full = append $full (printf "lifecycle.cezary.dev/%s" .) }}{{ end }}
{{- toJson $full }}
{{- end }}

{{- define "lifecycle-controller.cel.inputKeys" -}}
{{- $input := list }}
{{- $written := false }}
{{- range (include "lifecycle-controller.cel.keyNames" . | fromJsonArray) }}
{{- if eq . "last-restart-timestamp" }}{{ $written = true }}{{ end }}
{{- if not $written }}{{ $input = append $input . }}{{ end }}
{{- end }}
{{- toJson $input }}
{{- end }}

{{/* Keys whose removal asks the controller for nothing: the action keys and managed-by. */}}
{{- define "lifecycle-controller.cel.cancellableKeys" -}}
{{- $keys := list "delete-after" "delete-at" "restart-after" "restart-at" "restart-every" "restart-cron" "managed-by" }}
{{- $full := list }}
{{- range $keys }}{{ $full = append $full (printf "lifecycle.cezary.dev/%s" .) }}{{ end }}
{{- toJson $full }}
{{- end }}

{{/*
Keys that only shape a restart: the restart actions, the cron zone, the reference point of a
restart-after and the recurring anchor. A lifecycle policy's deletion never reads them
(core/policy/precedence.py leaves the object's own out), so on an object without delete-*
keys they need only "patch" under the annotation guard.
*/}}
{{- define "lifecycle-controller.cel.restartOnlyKeys" -}}
{{- $keys := list "restart-after" "restart-at" "restart-every" "restart-cron" "cron-timezone" "reference-point" "last-restart-timestamp" }}
{{- $full := list }}
{{- range $keys }}{{ $full = append $full (printf "lifecycle.cezary.dev/%s" .) }}{{ end }}
{{- toJson $full }}
{{- end }}

{{/*
What the annotation policies match: every resource and every subresource, since a
status update (namespaces/status, pods/status, deployments/status...) or a pods/binding
writes metadata too.
*/}}
{{- define "lifecycle-controller.cel.annotationResourceRules" -}}
- apiGroups: ["*"]
  apiVersions: ["*"]
  operations: ["CREATE", "UPDATE"]
  resources: ["*/*"]
  scope: "*"
{{- end }}

{{/* Identities that are never checked: the controller and the exempt system controllers. */}}
{{- define "lifecycle-controller.cel.exempt" -}}
{{- $exempt := .Values.admissionExemptions | default dict }}
{{- $users := concat (list (include "lifecycle-controller.serviceAccountUsername" .)) ($exempt.usernames | default list) }}
{{- $prefixes := $exempt.usernamePrefixes | default list }}
{{- printf "request.userInfo.username in %s" (toJson $users) }}
{{- if $prefixes }} || {{ toJson $prefixes }}.exists(p, request.userInfo.username.startsWith(p)){{ end }}
{{- end }}

{{/* The new and old annotations (empty maps when absent or on CREATE). */}}
{{- define "lifecycle-controller.cel.annotationVariables" -}}
- name: annotations
  expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
- name: old
  expression: >-
    request.operation == 'UPDATE' && oldObject != null && has(oldObject.metadata.annotations)
    ? oldObject.metadata.annotations : {}
{{- end }}

{{/* value(key): the annotation's value, or '' when absent. */}}
{{- define "lifecycle-controller.cel.value" -}}
('lifecycle.cezary.dev/{{ . }}' in variables.annotations ? variables.annotations['lifecycle.cezary.dev/{{ . }}'] : '')
{{- end }}

{{/* quoted(v): the value in double quotes for a message, unless long or multi-line. */}}
{{- define "lifecycle-controller.cel.quoted" -}}
(size({{ . }}) <= 64 && !{{ . }}.contains('\n') ? '"' + {{ . }} + '"' : '(value not shown)')
{{- end }}

{{/* durationFits(v): a [0-9]+[smhd] value within int64 nanoseconds (106751d, 2562047h...). */}}
{{- define "lifecycle-controller.cel.durationFits" -}}
({{ . }}.matches('^0*[0-9]{1,12}[smhd]$') && int({{ . }}.substring(0, size({{ . }}) - 1)) <= ({{ . }}.endsWith('d') ? 106751 : {{ . }}.endsWith('h') ? 2562047 : {{ . }}.endsWith('m') ? 153722867 : 9223372036))
{{- end }}

{{/* duration(v): the whole strict grammar: unsigned, one unit, positive, within bounds. */}}
{{- define "lifecycle-controller.cel.duration" -}}
({{ . }}.matches('^[0-9]+[smhd]$') && !{{ . }}.matches('^0+[smhd]$') && {{ include "lifecycle-controller.cel.durationFits" . }})
{{- end }}

{{/*
timestamp(v): Go's time.Parse(time.RFC3339): uppercase T, one- or two-digit hour, seconds,
optional fraction after "." or ",", Z or a +hh:mm offset (Go accepts up to 24:60), and a real
calendar day (February 29 only in leap years).
*/}}
{{- define "lifecycle-controller.cel.timestamp" -}}
({{ . }}.matches('^[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-9]))T([0-9]|[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.,][0-9]+)?(Z|[+-]([01][0-9]|2[0-4]):([0-5][0-9]|60))$') && (!{{ . }}.matches('^[0-9]{4}-02-29') || (int({{ . }}.substring(0, 4)) % 4 == 0 && (int({{ . }}.substring(0, 4)) % 100 != 0 || int({{ . }}.substring(0, 4)) % 400 == 0))))
{{- end }}

{{/*
Cron fields: (name, regular expression of one value, names map or "", range).
A field is a comma list of items: "*" or "?" (optionally followed by "-..." which robfig/cron
ignores), a value, or a range of values, each with an optional /step (a positive number).
*/}}
{{- define "lifecycle-controller.cel.cronFields" -}}
[
 {"name": "minute", "value": "[+]?0*([0-9]|[1-5][0-9])", "names": "", "range": "0-59"},
 {"name": "hour", "value": "[+]?0*([0-9]|1[0-9]|2[0-3])", "names": "", "range": "0-23"},
 {"name": "day-of-month", "value": "[+]?0*([1-9]|[12][0-9]|3[01])", "names": "", "range": "1-31"},
 {"name": "month", "value": "([+]?0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))", "names": "{'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}", "range": "1-12 or JAN-DEC"},
 {"name": "day-of-week", "value": "([+]?0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))", "names": "{'sun': 0, 'mon': 1, 'tue': 2, 'wed': 3, 'thu': 4, 'fri': 5, 'sat': 6}", "range": "0-6 or SUN-SAT"}
]
{{- end }}

{{- define "lifecycle-controller.cel.cronFieldRegex" -}}
{{- $item := printf "([*?](-[^,/]*)?|%s(-%s)?)(/[+]?0*[1-9][0-9]{0,17})?" .value .value }}
{{- printf "^,*%s(,+%s)*,*$" $item $item }}
{{- end }}

{{/* cronToInt (field, expr): the number of a value or a name of the field. */}}
{{- define "lifecycle-controller.cel.cronToInt" -}}
{{- if .field.names -}}
({{ .expr }}.lowerAscii() in {{ .field.names }} ? {{ .field.names }}[{{ .expr }}.lowerAscii()] : int({{ .expr }}))
{{- else -}}
int({{ .expr }})
{{- end }}
{{- end }}
