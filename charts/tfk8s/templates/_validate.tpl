{{/* What values.schema.json cannot state. The messages are the launcher's ($c.messages, from
launcher/chart/chart_schema.py): a template picks one and fills it, never spells one out. */}}
{{- define "tfk8s.refuse" -}}{{/* (list PATH MESSAGE VALUES): fail with "PATH: MESSAGE filled" */}}
{{- fail (printf "%s: %s" (index . 0) (include "tfk8s.text" (dict "s" (index . 1) "values" (index . 2)))) -}}
{{- end }}
{{- define "tfk8s.dns1035Problem" -}}
{{- $c := include "tfk8s.contract" . | fromJson -}}
{{- if gt (len .) (int $c.maxLabel) }}{{ include "tfk8s.text" (dict "s" $c.messages.dns1035TooLong "values" (dict "length" (len .))) }}
{{- else if not (regexMatch $c.dns1035Pattern .) }}{{ $c.messages.notDns1035 }}{{ end -}}
{{- end }}
{{- define "tfk8s.validate" -}}
{{- $c := include "tfk8s.contract" . | fromJson }}{{ $m := $c.messages -}}
{{- $v := .Values -}}
{{- $name := include "tfk8s.name" . -}}
{{- /* name: the release name stands in when empty, and must make valid object names too. */ -}}
{{- $problem := include "tfk8s.dns1035Problem" $name -}}
{{- if $problem }}{{ include "tfk8s.refuse" (list "name" (ternary $problem $m.releaseName (not (empty $v.name))) (dict "release" $name "problem" $problem)) }}{{ end -}}
{{- if and $v.namespace (ne $v.namespace .Release.Namespace) -}}
{{- include "tfk8s.refuse" (list "namespace" $m.namespaceMismatch (dict "namespace" $v.namespace "release" .Release.Namespace)) -}}
{{- end -}}
{{- /* Reserved env names. */ -}}
{{- $envs := list (list "env" (default dict $v.env)) -}}
{{- range $role := $c.roles -}}
{{- $cfg := get (default dict $v.roles) $role | default dict -}}
{{- $envs = append $envs (list (printf "roles.%s.env" $role) (default dict $cfg.env)) -}}
{{- /* the GPU resource: requests == limits */ -}}
{{- $requests := dig "resources" "requests" dict $cfg | default dict }}{{ $limits := dig "resources" "limits" dict $cfg | default dict }}{{ $gpu := $c.gpuResource -}}
{{- if and (hasKey $requests $gpu) (or (not (hasKey $limits $gpu)) (ne (include "tfk8s.quantity" (get $requests $gpu)) (include "tfk8s.quantity" (get $limits $gpu)))) -}}
{{- include "tfk8s.refuse" (list (printf "roles.%s.resources" $role) $m.gpuNotInLimits dict) -}}
{{- end -}}
{{- end -}}
{{- range $pair := $envs }}{{ range $key := $c.reservedEnv }}{{ if hasKey (last $pair) $key -}}
{{- include "tfk8s.refuse" (list (first $pair) $m.reservedEnv (dict "key" $key)) -}}
{{- end }}{{ end }}{{ end -}}
{{- /* checkpoint.dir under the volume's mountPath */ -}}
{{- $checkpoint := default dict $v.checkpoint -}}
{{- $dir := default "" $checkpoint.dir -}}
{{- $mountPath := default $c.defaults.mountPath (default dict $checkpoint.volume).mountPath -}}
{{- if and $dir $checkpoint.volume (not (contains "://" $dir)) (not (hasPrefix (printf "%s/" (regexReplaceAll "/+$" $mountPath "")) (printf "%s/" (regexReplaceAll "/+$" $dir "")))) -}}
{{- include "tfk8s.refuse" (list "checkpoint" $m.dirNotUnderMount (dict "dir" $dir "mount_path" $mountPath)) -}}
{{- end -}}
{{- /* checkpoints.mwms_storage_problem: several MWMS workers share checkpoints: a PVC or gs:// */ -}}
{{- $workers := int (dig $c.role.worker "replicas" 0 (default dict $v.roles)) -}}
{{- if and (eq $v.strategy $c.strategy.multiWorkerMirrored) (gt $workers 1) (not (contains "://" $dir)) (not (dig "volume" "persistentVolumeClaim" nil $checkpoint)) -}}
{{- include "tfk8s.refuse" (list "checkpoint.volume" $m.mwmsUnshared (dict "workers" $workers "where" (ternary $m.mwmsHostPath $m.mwmsEmptyDir (not (empty $checkpoint.volume))))) -}}
{{- end -}}
{{- /* names.generated_names: the first one that is not a DNS-1035 label (a role's: with replicas) */ -}}
{{- $failed := dict -}}
{{- range $g := get (include "tfk8s.rules" . | fromJson).names.generated (default $c.workload.jobs $v.workload) -}}
{{- $count := int (dig (index $g 0) "replicas" 0 (default dict $v.roles)) -}}
{{- $text := include "tfk8s.text" (dict "s" (index $g 2) "values" (dict "name" $name "index" (sub $count 1))) -}}
{{- $problem := include "tfk8s.dns1035Problem" $text -}}
{{- if and $problem (not $failed) (or (gt $count 0) (not (has (index $g 0) $c.roles))) }}{{ $failed = dict "role" (index $g 0) "kind" (index $g 1) "name" $text "problem" $problem }}{{ end -}}
{{- end -}}
{{- if and $v.code (not $v.codeArchive) }}{{ include "tfk8s.refuse" (list "code" $m.codeNeedsArchive dict) }}{{ end -}}
{{- if $failed }}{{ include "tfk8s.refuse" (list "name" $m.generatedName $failed) }}{{ end -}}
{{- end }}
