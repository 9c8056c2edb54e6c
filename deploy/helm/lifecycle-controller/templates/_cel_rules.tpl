{{/*
Validation rules of the admission policies, one grammar each (docs/annotations.md#value-formats),
shared by the annotation policy (admission-policy.yaml) and the lifecycle policy check
(policy-admission.yaml). Each helper renders YAML list items of ValidatingAdmissionPolicy
validations and takes a dict:

  v      the CEL expression of the value (a string)
  guard  a CEL prefix ending in "|| " that passes when the value is not to be checked
  key    how messages name the value (an annotation key, or spec.lifecycle.<key>)

Include them with nindent at the validations' indentation.
*/}}

{{/* duration: unsigned, one unit, within int64 nanoseconds, positive (atLeastAMinute: >= 1m). */}}
{{- define "lifecycle-controller.cel.rules.duration" -}}
{{- $v := .v }}{{ $guard := .guard }}{{ $key := .key }}
{{- $quoted := include "lifecycle-controller.cel.quoted" $v }}
- expression: {{ printf "%s!(%s.contains('+') || %s.contains('-'))" $guard $v $v | quote }}
  message: "{{ $key }}: duration must be positive and unsigned"
  messageExpression: {{ printf "'%s: duration must be positive and unsigned, got ' + %s" $key $quoted | quote }}
  reason: Invalid
- expression: {{ printf "%s%s.matches('^[0-9]+[smhd]$')" $guard $v | quote }}
  message: "{{ $key }}: invalid duration format"
  messageExpression: {{ printf "'%s: invalid duration format ' + %s + ': expected a whole number and one unit out of s, m, h, d, for example 30m or 7d'" $key $quoted | quote }}
  reason: Invalid
- expression: {{ printf "%s!%s.matches('^[0-9]+[smhd]$') || %s" $guard $v (include "lifecycle-controller.cel.durationFits" $v) | quote }}
  message: "{{ $key }}: duration is too large"
  messageExpression: {{ printf "'%s: duration ' + %s + ' is too large: at most 106751d, 2562047h, 153722867m or 9223372036s'" $key $quoted | quote }}
  reason: Invalid
- expression: {{ printf "%s!%s.matches('^0+[smhd]$')" $guard $v | quote }}
  message: "{{ $key }}: duration must be positive"
  messageExpression: {{ printf "'%s: duration must be positive, got ' + %s" $key $quoted | quote }}
  reason: Invalid
{{- if .atLeastAMinute }}
- expression: {{ printf "%s!%s.matches('^0*[0-9]{1,2}s$') || int(%s.substring(0, size(%s) - 1)) >= 60" $guard $v $v $v | quote }}
  message: "{{ $key }}: duration must be at least 1m0s"
  messageExpression: {{ printf "'%s: duration must be at least 1m0s, got ' + %s" $key $quoted | quote }}
  reason: Invalid
{{- end }}
{{- end }}

{{/* timestamp: Go's RFC 3339 parser (lifecycle-controller.cel.timestamp). */}}
{{- define "lifecycle-controller.cel.rules.timestamp" -}}
- expression: {{ printf "%s%s" .guard (include "lifecycle-controller.cel.timestamp" .v) | quote }}
  message: "{{ .key }}: invalid RFC 3339 timestamp"
  messageExpression: {{ printf "'%s: invalid RFC 3339 timestamp ' + %s + ': expected a date, T, a time with seconds and an offset, for example 2026-10-05T03:00:00Z or 2026-10-05T05:00:00+02:00'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}

{{/*
fieldsOf(v): strings.Fields of the value, split around runs of Go white space
(unicode.IsSpace); a multi-line expression, for a folded block scalar.
*/}}
{{- define "lifecycle-controller.cel.fieldsOf" -}}
{{ . }}
{{- range list "\\t" "\\n" "\\v" "\\f" "\\r" "\\u0085" "\\u00a0" "\\u1680" "\\u2000" "\\u2001" "\\u2002" "\\u2003" "\\u2004" "\\u2005" "\\u2006" "\\u2007" "\\u2008" "\\u2009" "\\u200a" "\\u2028" "\\u2029" "\\u202f" "\\u205f" "\\u3000" }}
.replace('{{ . }}', ' ')
{{- end }}
.split(' ').filter(f, f != '')
{{- end }}

{{/*
cron: robfig/cron's five fields. Also takes fields (the CEL expression of the value's
fields, lifecycle-controller.cel.fieldsOf) and zoneKey (how messages name cron-timezone).
*/}}
{{- define "lifecycle-controller.cel.rules.cron" -}}
{{- $guard := .guard }}{{ $key := .key }}{{ $fields := .fields }}
- expression: {{ printf "%s!%s.trim().startsWith('@')" $guard .v | quote }}
  message: "{{ $key }}: descriptors such as @daily or @every are not supported; use five fields: minute hour day-of-month month day-of-week"
  reason: Invalid
- expression: {{ printf "%ssize(%s) == 5" $guard $fields | quote }}
  message: "{{ $key }}: expected exactly 5 fields: minute hour day-of-month month day-of-week"
  messageExpression: {{ printf "'%s: expected exactly 5 fields (minute hour day-of-month month day-of-week), found ' + string(size(%s)) + '; set the zone with %s, not a TZ= prefix'" $key $fields .zoneKey | quote }}
  reason: Invalid
{{- range $index, $field := (include "lifecycle-controller.cel.cronFields" . | fromJsonArray) }}
{{- $f := printf "%s[%d]" $fields $index }}
{{- $low := include "lifecycle-controller.cel.cronToInt" (dict "field" $field "expr" "it.split('/')[0].split('-')[0]") }}
{{- $high := include "lifecycle-controller.cel.cronToInt" (dict "field" $field "expr" "it.split('/')[0].split('-')[1]") }}
- expression: >-
    {{ $guard }}size({{ $fields }}) != 5 ||
    ({{ $f }}.matches('{{ include "lifecycle-controller.cel.cronFieldRegex" $field }}') &&
    {{ $f }}.split(',').all(it, !it.matches('^[^*?/]+-') || {{ $low }} <= {{ $high }}))
  message: "{{ $key }}: invalid {{ $field.name }} field: values must be {{ $field.range }} and ranges must go from low to high"
  messageExpression: >-
    '{{ $key }}: invalid {{ $field.name }} field ' + {{ include "lifecycle-controller.cel.quoted" $f }} +
    ': values must be {{ $field.range }} and ranges must go from low to high; allowed forms are *, ?, a value,
    a range a-b and comma lists of them, each with an optional /step'
  reason: Invalid
{{- end }}
{{- end }}

{{/* timezone: the shape of an IANA name (the controller checks that it exists). */}}
{{- define "lifecycle-controller.cel.rules.timezone" -}}
- expression: >-
    {{ .guard }}{{ .v }}.matches('^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$')
  message: "{{ .key }}: invalid time zone name"
  messageExpression: {{ printf "'%s: invalid time zone name ' + %s + ': expected an IANA name such as Europe/Warsaw, or UTC'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}

{{/* catchUp: always, never or a strict positive duration. */}}
{{- define "lifecycle-controller.cel.rules.catchUp" -}}
- expression: {{ printf "%s%s in ['always', 'never'] || %s" .guard .v (include "lifecycle-controller.cel.duration" .v) | quote }}
  message: "{{ .key }}: expected always, never, or a positive duration"
  messageExpression: {{ printf "'%s: invalid catch-up policy ' + %s + ': expected always, never, or a positive duration such as 15m'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}

{{/* dryRun: Go's strconv.ParseBool spellings. */}}
{{- define "lifecycle-controller.cel.rules.dryRun" -}}
- expression: >-
    {{ .guard }}{{ .v }} in ['1', 't', 'T', 'TRUE', 'true', 'True', '0', 'f', 'F', 'FALSE', 'false', 'False']
  message: "{{ .key }}: expected a boolean"
  messageExpression: {{ printf "'%s: invalid value ' + %s + ': expected a boolean: true, false, 1, 0, t, f, True, False, TRUE or FALSE'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}

{{/*
windows: docs/annotations.md#maintenance-windows, the shape of every window (the controller
still checks that the zone exists and that a start differs from its end).
*/}}
{{- define "lifecycle-controller.cel.rules.windows" -}}
- expression: >-
    {{ .guard }}{{ .v }}.matches('^ *(Mon|Tue|Wed|Thu|Fri|Sat|Sun)-(Mon|Tue|Wed|Thu|Fri|Sat|Sun) +([01][0-9]|2[0-3]):[0-5][0-9]-(([01][0-9]|2[0-3]):[0-5][0-9]|24:00) +[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)* *(, *(Mon|Tue|Wed|Thu|Fri|Sat|Sun)-(Mon|Tue|Wed|Thu|Fri|Sat|Sun) +([01][0-9]|2[0-3]):[0-5][0-9]-(([01][0-9]|2[0-3]):[0-5][0-9]|24:00) +[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)* *)*$')
  message: "{{ .key }}: expected <Weekday>-<Weekday> <HH:MM>-<HH:MM> <zone>, comma-separated"
  messageExpression: {{ printf "'%s: invalid value ' + %s + ': expected comma-separated windows <Weekday>-<Weekday> <HH:MM>-<HH:MM> <IANA zone> such as Mon-Fri 01:00-05:00 Europe/Warsaw'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}

{{/* warnBefore: docs/annotations.md#warnings-before-acting, a strict duration or zero. */}}
{{- define "lifecycle-controller.cel.rules.warnBefore" -}}
- expression: {{ printf "%s%s.matches('^0+[smhd]$') || %s" .guard .v (include "lifecycle-controller.cel.duration" .v) | quote }}
  message: "{{ .key }}: expected a duration such as 15m"
  messageExpression: {{ printf "'%s: invalid value ' + %s + ': expected a duration such as 15m, or 0s for no warning'" .key (include "lifecycle-controller.cel.quoted" .v) | quote }}
  reason: Invalid
{{- end }}
