{{/*
The chart mirrors launcher/render.py and manifests/*.yaml.j2 object for object; the unit test
tests/unit/test_helm_parity.py compares both. Every value goes in as JSON (toJson), like the
`| j` filter of the jinja2 templates, so nothing depends on YAML quoting rules.
*/}}

{{/* The cluster's name: .Values.name, or the release name when empty. */}}
{{- define "tfk8s.name" -}}
{{- default .Release.Name .Values.name -}}
{{- end }}

{{/* The namespace of every object: .Values.namespace (checked against the release's), or the release's. */}}
{{- define "tfk8s.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end }}

{{/* A Kubernetes quantity as text, like the launcher's str(): "500m", 2 -> "2". */}}
{{- define "tfk8s.quantity" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end -}}
{{- end }}

{{/*
Everything the templates share, as JSON (use: include "tfk8s.model" . | fromJson). Mirrors
render._context and spec.supervised_roles / success_role / active_roles.
*/}}
{{- define "tfk8s.model" -}}
{{- $v := .Values -}}
{{- $name := include "tfk8s.name" . -}}
{{- $ns := include "tfk8s.namespace" . -}}
{{- $roles := default dict $v.roles -}}
{{- $replicas := dict -}}
{{- $active := list -}}
{{- range $role := list "chief" "worker" "ps" "evaluator" -}}
{{- $n := int (dig $role "replicas" 0 $roles) -}}
{{- $_ := set $replicas $role $n -}}
{{- if gt $n 0 }}{{ $active = append $active $role }}{{ end -}}
{{- end -}}
{{- $builtin := kindIs "invalid" $v.command -}}
{{- $supervised := list -}}
{{- if eq $v.strategy "parameter_server" }}{{ $supervised = list "worker" "ps" }}{{ end -}}
{{- if gt (int (get $replicas "evaluator")) 0 -}}
{{- $supervised = append $supervised "evaluator" -}}
{{- end -}}
{{- $successRole := ternary "worker" "chief" (eq $v.strategy "multi_worker_mirrored") -}}
{{- $watched := list -}}
{{- if $supervised }}{{ $watched = list (printf "%s-%s" $name $successRole) }}{{ end -}}
{{- $selector := dict "app.kubernetes.io/name" "tfk8s" "app.kubernetes.io/instance" $name -}}
{{- $labels := deepCopy (default dict $v.labels) -}}
{{- $labels = merge (deepCopy $selector) $labels -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" "tfk8s" -}}
{{- $_ := set $labels "tfk8s.io/strategy" $v.strategy -}}
{{- $saSet := not (kindIs "invalid" $v.serviceAccountName) -}}
{{- $supervisor := printf "%s-supervisor" $name -}}
{{- toJson (dict
    "name" $name
    "ns" $ns
    "replicas" $replicas
    "active" $active
    "builtin" $builtin
    "supervised" $supervised
    "successRole" $successRole
    "watched" $watched
    "selector" $selector
    "labels" $labels
    "annotations" (default dict $v.annotations)
    "supervisor" $supervisor
    "createServiceAccount" (and (gt (len $supervised) 0) (not $saSet))
    "serviceAccount" (default $supervisor $v.serviceAccountName)
    "userServiceAccount" (default "" $v.serviceAccountName)
) -}}
{{- end }}
