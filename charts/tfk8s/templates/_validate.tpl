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

{{/* An env value's names, a map's keys or a list's entries' (a YAML list). */}}
{{- define "tfk8s.envNames" -}}
{{- $names := list -}}
{{- if kindIs "map" . -}}
{{- $names = keys . -}}
{{- else -}}
{{- range $entry := . }}{{ $names = append $names $entry.name }}{{ end -}}
{{- end -}}
{{- toYaml $names -}}
{{- end }}

{{/*
pod_fields.role_problems for each of roles.<role>: its volumes, volumeMounts, labels and
podTemplate, by the lists of $c.podPolicy (launcher/cluster_spec/pod_fields.py). A rule lives in
those lists; this walks the values the way role_problems walks the spec.
*/}}
{{- define "tfk8s.validatePodFields" -}}
{{- $c := include "tfk8s.contract" . | fromYaml -}}
{{- $m := $c.messages -}}
{{- $p := $c.podPolicy -}}
{{- $v := .Values -}}
{{- $mountPath := dig "mountPath" $c.defaults.mountPath (default dict (default dict $v.checkpoint).volume) -}}
{{- $ours := append $p.launcherMounts (regexReplaceAll "/+$" $mountPath "") -}}
{{- $specEnv := include "tfk8s.envNames" (default list $v.env) | fromYamlArray -}}
{{- range $role, $given := default dict $v.roles -}}
{{- $fields := default dict $given -}}
{{- $at := printf "roles.%s" $role -}}
{{- $volumes := list -}}
{{- range $i, $volume := default list $fields.volumes -}}
{{- if not $volume.name -}}
{{- include "tfk8s.refuse" (list (printf "%s.volumes.%d" $at $i) $m.volumeWithoutName dict) -}}
{{- else if has $volume.name $p.reservedVolumes -}}
{{- include "tfk8s.refuse" (list (printf "%s.volumes.%d.name" $at $i) $m.reservedVolume $volume) -}}
{{- else if has $volume.name $volumes -}}
{{- include "tfk8s.refuse" (list (printf "%s.volumes.%d.name" $at $i) $m.volumeNamedTwice $volume) -}}
{{- end -}}
{{- $volumes = append $volumes $volume.name -}}
{{- end -}}
{{- range $i, $volume := default list $fields.volumes -}}
{{- include "tfk8s.validateVolumeType" (dict "c" $c "at" (printf "%s.volumes.%d" $at $i) "volume" $volume) -}}
{{- end -}}
{{- range $i, $mount := default list $fields.volumeMounts -}}
{{- $here := printf "%s.volumeMounts.%d" $at $i -}}
{{- if not (has $mount.name $volumes) -}}
{{- $fill := dict "name" $mount.name "at" $at -}}
{{- include "tfk8s.refuse" (list (printf "%s.name" $here) $m.mountWithoutVolume $fill) -}}
{{- end -}}
{{- if not (hasKey $mount "mountPath") -}}
{{- include "tfk8s.refuse" (list $here $m.mountWithoutPath dict) -}}
{{- else if has (regexReplaceAll "/+$" (toString $mount.mountPath) "") $ours -}}
{{- $fill := dict "path" $mount.mountPath -}}
{{- include "tfk8s.refuse" (list (printf "%s.mountPath" $here) $m.reservedMountPath $fill) -}}
{{- end -}}
{{- end -}}
{{- range $key, $_ := default dict $fields.labels -}}
{{- if has $key $p.reservedLabels -}}
{{- include "tfk8s.refuse" (list (printf "%s.labels.%s" $at $key) $m.reservedLabel (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- with $fields.podTemplate -}}
{{- $t := printf "%s.podTemplate" $at -}}
{{- $byRole := dict "role" $role -}}
{{- if hasKey . "metadata" -}}
{{- include "tfk8s.refuse" (list (printf "%s.metadata" $t) $m.templateMetadata $byRole) -}}
{{- end -}}
{{- $spec := default dict .spec -}}
{{- range $key, $_ := $spec -}}
{{- if hasKey $p.podSpecHomes $key -}}
{{- $home := include "tfk8s.message" (dict "message" (get $p.podSpecHomes $key) "fields" $byRole) -}}
{{- $fill := dict "key" $key "home" $home -}}
{{- include "tfk8s.refuse" (list (printf "%s.spec.%s" $t $key) $m.podSpecKey $fill) -}}
{{- end -}}
{{- end -}}
{{- $podSecurity := default dict $spec.securityContext -}}
{{- range $key, $_ := $podSecurity -}}
{{- if has $key $p.podSecuritySet -}}
{{- $here := printf "%s.spec.securityContext.%s" $t $key -}}
{{- include "tfk8s.refuse" (list $here $m.podSecurityKey (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- $here := printf "%s.spec.securityContext" $t -}}
{{- include "tfk8s.validateProfiles" (dict "c" $c "at" $here "security" $podSecurity) -}}
{{- range $i, $sysctl := default list $podSecurity.sysctls -}}
{{- if not (has $sysctl.name $p.safeSysctls) -}}
{{- $fill := dict "name" $sysctl.name "allowed" (include "tfk8s.quoted" $p.safeSysctls) -}}
{{- include "tfk8s.refuse" (list (printf "%s.sysctls.%d.name" $here $i) $m.unsafeSysctl $fill) -}}
{{- end -}}
{{- end -}}
{{- range $i, $container := default list $spec.containers -}}
{{- $here := printf "%s.spec.containers.%d" $t $i -}}
{{- if not (hasKey $container "name") -}}
{{- include "tfk8s.refuse" (list $here $m.containerWithoutName dict) -}}
{{- else if eq $container.name $p.watcherContainer -}}
{{- include "tfk8s.refuse" (list (printf "%s.name" $here) $m.watcherChanged dict) -}}
{{- else if eq $container.name $c.containerName -}}
{{- include "tfk8s.validateTaskContainer" (dict "c" $c "at" $here "container" $container "role" $role) -}}
{{- else -}}
{{- include "tfk8s.validateAddedContainer" (dict "c" $c "at" $here "container" $container) -}}
{{- end -}}
{{- end -}}
{{- range $i, $container := default list $spec.initContainers -}}
{{- $here := printf "%s.spec.initContainers.%d" $t $i -}}
{{- if has $container.name $p.reservedContainers -}}
{{- include "tfk8s.refuse" (list (printf "%s.name" $here) $m.reservedContainer $container) -}}
{{- else -}}
{{- include "tfk8s.validateAddedContainer" (dict "c" $c "at" $here "container" $container) -}}
{{- end -}}
{{- end -}}
{{- /* _env_set_twice: a valueFrom entry named like one of env or roles.<role>.env */ -}}
{{- $roleEnv := include "tfk8s.envNames" (default list $fields.env) | fromYamlArray -}}
{{- range $i, $container := default list $spec.containers -}}
{{- if eq (toString $container.name) $c.containerName -}}
{{- range $j, $item := default list $container.env -}}
{{- if has $item.name (concat $specEnv $roleEnv) -}}
{{- $where := ternary (printf "%s.env" $at) "env" (has $item.name $roleEnv) -}}
{{- $fill := dict "name" $item.name "where" $where "role" $role -}}
{{- include "tfk8s.refuse" (list (printf "%s.spec.containers.%d.env.%d.name" $t $i $j) $m.envSetTwice $fill) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The chart's own pod extras, under the same rules: sidecars are init containers, extraVolumes
a role's volumes, extraVolumeMounts the task container's mounts. */ -}}
{{- range $i, $sidecar := default list $v.sidecars -}}
{{- if has $sidecar.name $p.reservedContainers -}}
{{- include "tfk8s.refuse" (list (printf "sidecars.%d.name" $i) $m.reservedContainer $sidecar) -}}
{{- else -}}
{{- include "tfk8s.validateAddedContainer" (dict "c" $c "at" (printf "sidecars.%d" $i) "container" $sidecar) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "extraVolumes" "extraVolumeMounts" -}}
{{- range $i, $volume := default list (get $v $key) -}}
{{- if has $volume.name $p.reservedVolumes -}}
{{- include "tfk8s.refuse" (list (printf "%s.%d.name" $key $i) $m.reservedVolume $volume) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $volume := default list $v.extraVolumes -}}
{{- include "tfk8s.validateVolumeType" (dict "c" $c "at" (printf "extraVolumes.%d" $i) "volume" $volume) -}}
{{- end -}}
{{- range $i, $mount := default list $v.extraVolumeMounts -}}
{{- if has (regexReplaceAll "/+$" (toString $mount.mountPath) "") $ours -}}
{{- $fill := dict "path" $mount.mountPath -}}
{{- include "tfk8s.refuse" (list (printf "extraVolumeMounts.%d.mountPath" $i) $m.reservedMountPath $fill) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* pod_fields._container_problems of the task container (dict "c" $c "at" PATH "container" C "role" R). */}}
{{- define "tfk8s.validateTaskContainer" -}}
{{- $m := .c.messages -}}
{{- $p := .c.podPolicy -}}
{{- $at := .at -}}
{{- $byRole := dict "role" .role -}}
{{- range $key, $_ := .container -}}
{{- if and (ne $key "name") (not (has $key $p.taskContainerMaySet)) -}}
{{- if hasKey $p.taskContainerHomes $key -}}
{{- $home := include "tfk8s.message" (dict "message" (get $p.taskContainerHomes $key) "fields" $byRole) -}}
{{- $fill := dict "key" $key "home" $home -}}
{{- include "tfk8s.refuse" (list (printf "%s.%s" $at $key) $m.taskContainerKey $fill) -}}
{{- else -}}
{{- $fill := dict "key" $key "role" $byRole.role -}}
{{- include "tfk8s.refuse" (list (printf "%s.%s" $at $key) $m.taskContainerOther $fill) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $item := default list .container.env -}}
{{- $fill := dict "name" (default "" $item.name) "role" $byRole.role -}}
{{- if not (hasKey $item "valueFrom") -}}
{{- include "tfk8s.refuse" (list (printf "%s.env.%d" $at $i) $m.taskEnvPlain $fill) -}}
{{- else if has $item.name $.c.reservedEnv -}}
{{- include "tfk8s.refuse" (list (printf "%s.env.%d.name" $at $i) $m.taskEnvReserved $fill) -}}
{{- end -}}
{{- end -}}
{{- $security := default dict .container.securityContext -}}
{{- range $key, $_ := $security -}}
{{- if not (has $key $p.taskSecurityMaySet) -}}
{{- include "tfk8s.refuse" (list (printf "%s.securityContext.%s" $at $key) $m.taskSecurityKey (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- include "tfk8s.validateProfiles" (dict "c" .c "at" (printf "%s.securityContext" $at) "security" $security) -}}
{{- include "tfk8s.validateHosts" (dict "c" .c "at" $at "container" .container) -}}
{{- end }}

{{/* A list as the launcher's messages name allowed values (pod_fields.quoted): 'a', 'b'. */}}
{{- define "tfk8s.quoted" -}}
{{- $quoted := list -}}
{{- range . }}{{ $quoted = append $quoted (printf "'%s'" .) }}{{ end -}}
{{- join ", " $quoted -}}
{{- end }}

{{/* pod_fields.profile_problems: SELinux and AppArmor values of a securityContext
(dict "c" $c "at" PATH "security" S). */}}
{{- define "tfk8s.validateProfiles" -}}
{{- $m := .c.messages -}}
{{- $p := .c.podPolicy -}}
{{- $at := .at -}}
{{- $selinux := default dict .security.seLinuxOptions -}}
{{- if and $selinux.type (not (has $selinux.type $p.seLinuxTypes)) -}}
{{- $fill := dict "value" $selinux.type "allowed" (include "tfk8s.quoted" $p.seLinuxTypes) -}}
{{- include "tfk8s.refuse" (list (printf "%s.seLinuxOptions.type" $at) $m.seLinuxType $fill) -}}
{{- end -}}
{{- range $key := $p.seLinuxUnset -}}
{{- if get $selinux $key -}}
{{- include "tfk8s.refuse" (list (printf "%s.seLinuxOptions.%s" $at $key) $m.seLinuxSet (dict "key" $key)) -}}
{{- end -}}
{{- end -}}
{{- $apparmor := default dict .security.appArmorProfile -}}
{{- if and (not (kindIs "invalid" $apparmor.type)) (not (has $apparmor.type $p.appArmorTypes)) -}}
{{- $fill := dict "value" $apparmor.type "allowed" (include "tfk8s.quoted" $p.appArmorTypes) -}}
{{- include "tfk8s.refuse" (list (printf "%s.appArmorProfile.type" $at) $m.appArmorType $fill) -}}
{{- end -}}
{{- end }}

{{/* pod_fields.host_problems: a probe or lifecycle handler naming a host (dict "c" $c "at" PATH "container" C). */}}
{{- define "tfk8s.validateHosts" -}}
{{- $c := .c -}}
{{- $at := .at -}}
{{- $container := .container -}}
{{- $handlers := list -}}
{{- range $key := $c.podPolicy.probes -}}
{{- $handlers = append $handlers (list $key (get $container $key)) -}}
{{- end -}}
{{- range $key := $c.podPolicy.lifecycleHandlers -}}
{{- $handlers = append $handlers (list (printf "lifecycle.%s" $key) (get (default dict $container.lifecycle) $key)) -}}
{{- end -}}
{{- range $handler := $handlers -}}
{{- range $action := $c.podPolicy.hostActions -}}
{{- if get (default dict (get (default dict (index $handler 1)) $action)) "host" -}}
{{- $here := printf "%s.%s.%s.host" $at (index $handler 0) $action -}}
{{- include "tfk8s.refuse" (list $here $c.messages.hostSet dict) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* pod_fields.added_container_problems: a container the pod gets besides ours, held to
restricted (dict "c" $c "at" PATH "container" C). A value is compared as JSON text with the
refused ones (the contract holds them as JSON, so true is not 1). */}}
{{- define "tfk8s.validateAddedContainer" -}}
{{- $m := .c.messages -}}
{{- $p := .c.podPolicy -}}
{{- $at := printf "%s.securityContext" .at -}}
{{- $security := default dict .container.securityContext -}}
{{- range $key, $rule := $p.addedSecurityRefused -}}
{{- if and (hasKey $security $key) (has (toJson (get $security $key)) $rule.refused) -}}
{{- $fill := dict "key" $key "allowed" $rule.allowed -}}
{{- include "tfk8s.refuse" (list (printf "%s.%s" $at $key) $m.addedSecurity $fill) -}}
{{- end -}}
{{- end -}}
{{- range $i, $name := default list (default dict $security.capabilities).add -}}
{{- if not (has $name $p.addedCapabilities) -}}
{{- $fill := dict "name" $name "allowed" (include "tfk8s.quoted" $p.addedCapabilities) -}}
{{- include "tfk8s.refuse" (list (printf "%s.capabilities.add.%d" $at $i) $m.addedCapability $fill) -}}
{{- end -}}
{{- end -}}
{{- $seccomp := default dict $security.seccompProfile -}}
{{- if and (not (kindIs "invalid" $seccomp.type)) (not (has $seccomp.type $p.seccompTypes)) -}}
{{- $fill := dict "value" $seccomp.type "allowed" (include "tfk8s.quoted" $p.seccompTypes) -}}
{{- include "tfk8s.refuse" (list (printf "%s.seccompProfile.type" $at) $m.seccompType $fill) -}}
{{- end -}}
{{- include "tfk8s.validateProfiles" (dict "c" .c "at" $at "security" $security) -}}
{{- include "tfk8s.validateHosts" (dict "c" .c "at" .at "container" .container) -}}
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

{{- include "tfk8s.validatePodFields" . -}}

{{- if and $v.code (not $v.codeArchive) -}}
{{- include "tfk8s.refuse" (list "code" $m.codeNeedsArchive dict) -}}
{{- end -}}
{{- if $failed -}}
{{- include "tfk8s.refuse" (list "name" $m.generatedName $failed) -}}
{{- end -}}
{{- end }}

{{/* A volume of a kind Pod Security restricted refuses (pod_fields.VOLUME_TYPE), at its kind's key. */}}
{{- define "tfk8s.validateVolumeType" -}}
{{- $p := .c.podPolicy -}}
{{- range $kind, $_ := .volume -}}
{{- if and (ne $kind "name") (not (has $kind $p.restrictedVolumeTypes)) -}}
{{- $fill := dict "kind" $kind "allowed" (include "tfk8s.quoted" $p.restrictedVolumeTypes) -}}
{{- include "tfk8s.refuse" (list (printf "%s.%s" $.at $kind) $.c.messages.volumeType $fill) -}}
{{- end -}}
{{- end -}}
{{- end -}}
