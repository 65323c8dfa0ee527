{{/*
What values.schema.json cannot state, refused before any object is made. The messages are the
launcher's own str.format texts ($c.messages, from scripts/chart_schema.py, {field} where a value goes):
a template picks one and fills it, never spells one out.
*/}}

{{/* A message with its {field}s filled in one pass (dict "message" TEXT "fields" DICT). */}}
{{- define "tfk8s.message" -}}
{{- $fields := regexFindAll "[{][A-Za-z_][A-Za-z0-9_]*[}]" .message -1 -}}
{{- range $i, $part := regexSplit "[{][A-Za-z_][A-Za-z0-9_]*[}]" .message -1 -}}
{{- $part -}}
{{- if lt $i (len $fields) }}{{ toString (get $.fields (trimAll "{}" (index $fields $i))) }}{{ end -}}
{{- end -}}
{{- end }}

{{/* Fail with "PATH: MESSAGE" (list PATH MESSAGE FIELDS). */}}
{{- define "tfk8s.refuse" -}}
{{- fail (printf "%s: %s" (index . 0) (include "tfk8s.message" (dict "message" (index . 1) "fields" (index . 2)))) -}}
{{- end }}

{{/* Why a name is no DNS-1035 label, or "" (names.dns1035_problem). */}}
{{- define "tfk8s.dns1035Problem" -}}
{{- $c := include "tfk8s.contract" . | fromYaml -}}
{{- if gt (len .) (int $c.maxLabel) -}}
{{- include "tfk8s.message" (dict "message" $c.messages.dns1035TooLong "fields" (dict "length" (len .))) -}}
{{- else if not (regexMatch $c.dns1035Pattern .) -}}
{{- $c.messages.notDns1035 -}}
{{- end -}}
{{- end }}

{{- define "tfk8s.validate" -}}
{{- $c := include "tfk8s.contract" . | fromYaml -}}
{{- $m := $c.messages -}}
{{- $v := .Values -}}
{{- $name := include "tfk8s.name" . -}}

{{- /* name: the release name stands in when empty, and must make valid object names too. */ -}}
{{- $problem := include "tfk8s.dns1035Problem" $name -}}
{{- if $problem -}}
{{- $message := ternary $problem $m.releaseName (not (empty $v.name)) -}}
{{- include "tfk8s.refuse" (list "name" $message (dict "release" $name "problem" $problem)) -}}
{{- end -}}

{{- if and $v.namespace (ne $v.namespace .Release.Namespace) -}}
{{- $fields := dict "namespace" $v.namespace "release" .Release.Namespace -}}
{{- include "tfk8s.refuse" (list "namespace" $m.namespaceMismatch $fields) -}}
{{- end -}}

{{- /* Reserved env names, and the GPU resource: requests == limits. */ -}}
{{- $envs := list (list "env" (default dict $v.env)) -}}
{{- range $role := $c.roles -}}
{{- $cfg := include "tfk8s.podFields" (dict "root" $ "role" $role) | fromYaml -}}
{{- $at := printf "roles.%s" $role -}}
{{- if eq $role "dispatcher" }}{{ $at = "dataService.dispatcher" }}{{ end -}}
{{- if eq $role "data-worker" }}{{ $at = "dataService.worker" }}{{ end -}}
{{- $envs = append $envs (list (printf "%s.env" $at) (default dict $cfg.env)) -}}
{{- $requests := dig "resources" "requests" dict $cfg | default dict -}}
{{- $limits := dig "resources" "limits" dict $cfg | default dict -}}
{{- $gpu := $c.gpuResource -}}
{{- if hasKey $requests $gpu -}}
{{- $requested := include "tfk8s.quantity" (get $requests $gpu) -}}
{{- if or (not (hasKey $limits $gpu)) (ne $requested (include "tfk8s.quantity" (get $limits $gpu))) -}}
{{- include "tfk8s.refuse" (list (printf "%s.resources" $at) $m.gpuNotInLimits dict) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $pair := $envs -}}
{{- /* env: a map, or a list of {name, value} / {name, valueFrom} entries */ -}}
{{- $names := list -}}
{{- if kindIs "map" (last $pair) -}}
{{- $names = keys (last $pair) -}}
{{- else -}}
{{- range $entry := last $pair -}}
{{- if has $entry.name $names -}}
{{- include "tfk8s.refuse" (list (first $pair) $m.envNamedTwice (dict "key" $entry.name)) -}}
{{- end -}}
{{- $names = append $names $entry.name -}}
{{- end -}}
{{- end -}}
{{- range $key := $c.reservedEnv -}}
{{- if has $key $names -}}
{{- include "tfk8s.refuse" (list (first $pair) $m.reservedEnv (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* checkpoint.dir under the volume's mountPath */ -}}
{{- $checkpoint := default dict $v.checkpoint -}}
{{- $dir := default "" $checkpoint.dir -}}
{{- $mountPath := dig "mountPath" $c.defaults.mountPath (default dict $checkpoint.volume) -}}
{{- if and $dir $checkpoint.volume (not (contains "://" $dir)) -}}
{{- $under := printf "%s/" (regexReplaceAll "/+$" $mountPath "") -}}
{{- if not (hasPrefix $under (printf "%s/" (regexReplaceAll "/+$" $dir ""))) -}}
{{- include "tfk8s.refuse" (list "checkpoint" $m.dirNotUnderMount (dict "dir" $dir "mount_path" $mountPath)) -}}
{{- end -}}
{{- end -}}

{{- /* checkpoints.mwms_storage_problem: several MWMS workers share checkpoints: a PVC or gs://
(the built-in worker's; a command of your own keeps its checkpoints where it chooses) */ -}}
{{- $workers := int (include "tfk8s.replicas" (dict "root" . "role" "worker")) -}}
{{- $mwms := eq $v.strategy "multi_worker_mirrored" -}}
{{- $shared := or (contains "://" $dir) (default dict $checkpoint.volume).persistentVolumeClaim -}}
{{- if and $mwms (gt $workers 1) (not $shared) (not $v.command) -}}
{{- $where := ternary $m.mwmsHostPath $m.mwmsEmptyDir (not (empty $checkpoint.volume)) -}}
{{- include "tfk8s.refuse" (list "checkpoint.volume" $m.mwmsUnshared (dict "workers" $workers "where" $where)) -}}
{{- end -}}

{{- /* names.generated_names: the first one that is not a DNS-1035 label */ -}}
{{- $kinds := $c.generatedKinds -}}
{{- $generated := list (list "-" $kinds.service $name) (list "-" $kinds.account (printf "%s-supervisor" $name)) -}}
{{- range $role := $c.roles -}}
{{- $replicas := int (include "tfk8s.replicas" (dict "root" $ "role" $role)) -}}
{{- if gt $replicas 0 -}}
{{- $job := include "tfk8s.jobName" (dict "root" $ "role" $role) -}}
{{- $generated = append $generated (list $role $kinds.job $job) -}}
{{- $hostname := printf "%s-%d" $job (sub $replicas 1) -}}
{{- $generated = append $generated (list $role $kinds.hostname $hostname) -}}
{{- end -}}
{{- end -}}
{{- $failed := dict -}}
{{- range $g := $generated -}}
{{- $problem := include "tfk8s.dns1035Problem" (index $g 2) -}}
{{- if and $problem (not $failed) -}}
{{- $failed = dict "role" (index $g 0) "kind" (index $g 1) "name" (index $g 2) "problem" $problem -}}
{{- end -}}
{{- end -}}

{{- /* metrics: not on the gRPC port; a PodMonitor needs a port */ -}}
{{- $metricsPort := include "tfk8s.metricsPort" . -}}
{{- if and $metricsPort (eq (int $metricsPort) (int $v.port)) -}}
{{- include "tfk8s.refuse" (list "metrics.port" $m.metricsOnGrpcPort (dict "port" (int $v.port))) -}}
{{- end -}}
{{- if and (dig "podMonitor" false (default dict $v.metrics)) (not $metricsPort) -}}
{{- include "tfk8s.refuse" (list "metrics.podMonitor" $m.podMonitorWithoutPort dict) -}}
{{- end -}}

{{- /* spec: the built-in worker's --data-service reads through the spec's dataService */ -}}
{{- $programArgs := dig "args" list (default dict $v.program) | default list -}}
{{- if and (kindIs "invalid" $v.command) (has $c.dataServiceFlag $programArgs) (empty $v.dataService) -}}
{{- include "tfk8s.refuse" (list "program.args" $m.dataServiceFlagWithoutService dict) -}}
{{- end -}}

{{- /* spec.fatal_exit_code_problems: a command's codes, under Never; none reserved, none twice */ -}}
{{- $fatal := default list $v.fatalExitCodes -}}
{{- if $fatal -}}
{{- if kindIs "invalid" $v.command -}}
{{- include "tfk8s.refuse" (list "fatalExitCodes" $m.fatalCodesNeedCommand dict) -}}
{{- else if ne $v.restartPolicy "Never" -}}
{{- include "tfk8s.refuse" (list "fatalExitCodes" $m.fatalCodesNeedNever dict) -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $code := $fatal -}}
{{- $key := toString (int $code) -}}
{{- if hasKey $c.reservedExitCodes $key -}}
{{- $fields := dict "code" $key "meaning" (get $c.reservedExitCodes $key) -}}
{{- include "tfk8s.refuse" (list "fatalExitCodes" $m.fatalCodeReserved $fields) -}}
{{- end -}}
{{- if hasKey $seen $key -}}
{{- include "tfk8s.refuse" (list "fatalExitCodes" $m.fatalCodeTwice (dict "code" $key)) -}}
{{- end -}}
{{- $_ := set $seen $key true -}}
{{- end -}}
{{- end -}}

{{- /* spec.exception_problems: a command's exception classes, under Never; none in both lists */ -}}
{{- range $key := list "fatalExceptions" "retriedExceptions" -}}
{{- if index $v $key -}}
{{- if kindIs "invalid" $v.command -}}
{{- include "tfk8s.refuse" (list $key $m.exceptionsNeedCommand (dict "key" $key)) -}}
{{- else if ne $v.restartPolicy "Never" -}}
{{- include "tfk8s.refuse" (list $key $m.exceptionsNeedNever (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $fatalClasses := dict -}}
{{- range $name := default list $v.fatalExceptions -}}
{{- $_ := set $fatalClasses (last (splitList "." $name)) true -}}
{{- end -}}
{{- range $name := default list $v.retriedExceptions -}}
{{- if hasKey $fatalClasses (last (splitList "." $name)) -}}
{{- include "tfk8s.refuse" (list "retriedExceptions" $m.exceptionInBoth (dict "name" $name)) -}}
{{- end -}}
{{- end -}}

{{- if and $v.code (not $v.codeArchive) -}}
{{- include "tfk8s.refuse" (list "code" $m.codeNeedsArchive dict) -}}
{{- end -}}
{{- if $failed -}}
{{- include "tfk8s.refuse" (list "name" $m.generatedName $failed) -}}
{{- end -}}
{{- end }}
