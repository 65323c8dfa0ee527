{{/* The launcher's own objects per shape are in _plan.tpl (launcher/chart/chart_plan.py), with
tokens where the values go. Here: the values, and the filling. */}}
{{- define "tfk8s.name" -}}{{ default .Release.Name .Values.name }}{{- end }}
{{- define "tfk8s.namespace" -}}{{ default .Release.Namespace .Values.namespace }}{{- end }}
{{/* A Kubernetes quantity as text, like the launcher's str(): "500m", 2 -> "2". */}}
{{- define "tfk8s.quantity" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end -}}
{{- end }}
{{/* A token string filled: "@k@" -> the value's text (dict "s" TEXT "values" VALUES). */}}
{{- define "tfk8s.text" -}}{{/* one pass: a value's own text is never read for tokens */}}
{{- $tokens := regexFindAll "@[A-Za-z0-9_.]+@" .s -1 -}}
{{- range $i, $part := regexSplit "@[A-Za-z0-9_.]+@" .s -1 }}{{ $part }}{{ if lt $i (len $tokens) }}{{ toString (get $.values (trimAll "@" (index $tokens $i))) }}{{ end }}{{ end -}}
{{- end }}
{{/* Every value the tokens name (launcher/chart/chart_plan.py tokens), as JSON; unset ones absent. */}}
{{- define "tfk8s.values" -}}
{{- $c := include "tfk8s.contract" . | fromJson -}}
{{- $r := include "tfk8s.rules" . | fromJson -}}
{{- $v := .Values -}}
{{- $ckpt := default dict $v.checkpoint -}}
{{- $vol := default dict $ckpt.volume -}}
{{- $mount := default $c.defaults.mountPath $vol.mountPath -}}
{{- $program := default dict $v.program -}}
{{- $grace := int $v.terminationGracePeriodSeconds -}}
{{- $x := dict "name" (include "tfk8s.name" .) "ns" (include "tfk8s.namespace" .) "image" $v.image "imagePullPolicy" $v.imagePullPolicy "restartPolicy" $v.restartPolicy "port" $v.port "backoffLimit" $v.backoffLimit "terminationGracePeriodSeconds" $v.terminationGracePeriodSeconds "activeDeadlineSeconds" $v.activeDeadlineSeconds "ttlSecondsAfterFinished" $v.ttlSecondsAfterFinished "priorityClassName" $v.priorityClassName "serviceAccountName" $v.serviceAccountName "queue" $v.queue "mountPath" $mount "mountDir" (regexReplaceAll "/+$" $mount "") "claimName" (default dict $vol.persistentVolumeClaim).claimName "hostPath" (default dict $vol.hostPath).path -}}
{{- $_ := set $x "modelDir" (default (include "tfk8s.text" (dict "s" $r.names.modelDir "values" $x)) $ckpt.dir) -}}
{{- range $k := list "runAsUser" "runAsGroup" "fsGroup" }}{{ $_ := set $x $k (get $v.securityContext $k) }}{{ end -}}
{{- $_ := merge $x (dict "podGrace" (toString $grace) "evaluatorGrace" (toJson $v.evaluatorGraceSeconds) "peerTimeout" (toJson (default $c.defaults.peerTimeoutSeconds $v.peerTimeoutSeconds)) "serverLinger" (toString (sub $grace (min (int $c.serverLingerMarginSeconds) (div $grace 2))))) -}}
{{- $_ := merge $x (dict "programModule" (default $c.defaults.program $program.module) "programArgs" (default list $program.args) "command" (default list $v.command) "args" (default list $v.args) "labels" (default dict $v.labels) "annotations" (default dict $v.annotations)) -}}
{{- $env := list }}{{ range $k, $val := (default dict $v.env) }}{{ $env = append $env (dict "name" $k "value" $val) }}{{ end -}}
{{- $_ := set $x "env" $env -}}
{{- $data := dict }}{{ range $s := $c.supervisedPod.scripts }}{{ $_ := set $data $s ($.Files.Get (printf "files/%s" $s)) }}{{ end -}}
{{- $_ := set $x "rootData" $data -}}
{{- if $v.codeArchive -}}
{{- $archive := b64dec $v.codeArchive }}{{ $sha := sha256sum $archive -}}
{{- $_ := merge $x (dict "codeArchive" (b64enc $archive) "codeSha" $sha "codeSha10" (trunc 10 $sha) "codeBytes" (toString (len $archive))) -}}
{{- $_ := set $x "codeObject" (include "tfk8s.text" (dict "s" $r.names.code "values" $x)) -}}
{{- end -}}
{{- /* Per role: replicas, env, resources, nodeSelector, tolerations; the TF cluster. */ -}}
{{- $workload := default $c.workload.jobs $v.workload -}}
{{- $members := list -}}
{{- $nccl := false -}}
{{- range $role := $c.roles -}}
{{- $cfg := dig $role dict (default dict $v.roles) -}}
{{- $n := int (default 0 $cfg.replicas) -}}
{{- $_ := set $x (printf "replicas.%s" $role) $n -}}
{{- $renv := list }}{{ range $k, $val := (default dict $cfg.env) }}{{ $renv = append $renv (dict "name" $k "value" $val) }}{{ end -}}
{{- $_ := set $x (printf "env.%s" $role) $renv -}}
{{- $res := dict -}}
{{- range $kind, $given := (default dict $cfg.resources) }}{{ if $given -}}
{{- $q := dict }}{{ range $k, $val := $given }}{{ $_ := set $q $k (include "tfk8s.quantity" $val) }}{{ end }}{{ $_ := set $res $kind $q -}}
{{- end }}{{ end -}}
{{- $_ := set $x (printf "resources.%s" $role) $res -}}
{{- if and (gt $n 0) (has $role (get $c.strategies $v.strategy).ncclRoles) (ne "0" (include "tfk8s.quantity" (dig "limits" $c.gpuResource "0" $res))) }}{{ $nccl = true }}{{ end -}}
{{- if $cfg.nodeSelector }}{{ $_ := set $x (printf "nodeSelector.%s" $role) $cfg.nodeSelector }}{{ end -}}
{{- /* plan.role_tolerations: unset fields left out; the lost-node taints unless named. */ -}}
{{- $tols := list }}{{ $named := list -}}
{{- range $t := (default list $cfg.tolerations) -}}
{{- $clean := dict }}{{ range $k, $val := $t }}{{ if not (kindIs "invalid" $val) }}{{ $_ := set $clean $k $val }}{{ end }}{{ end -}}
{{- $tols = append $tols $clean }}{{ $named = append $named (get $clean "key") -}}
{{- end -}}
{{- if not (kindIs "invalid" $v.nodeLossTolerationSeconds) }}{{ range $key := $c.nodeLossTaints }}{{ if not (has $key $named) -}}
{{- $tols = append $tols (dict "key" $key "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" $v.nodeLossTolerationSeconds) -}}
{{- end }}{{ end }}{{ end -}}
{{- if $tols }}{{ $_ := set $x (printf "tolerations.%s" $role) $tols }}{{ end -}}
{{- if and (gt $n 0) (has $role $c.trainingRoles) -}}
{{- $addresses := list }}{{ range $i := until $n }}{{ $addresses = append $addresses (printf "%q" (include "tfk8s.text" (dict "s" (get (get $r.names.address $workload) $role) "values" (merge (dict "index" $i) $x)))) }}{{ end -}}
{{- $members = append $members (printf "%q:[%s]" $role (join "," $addresses)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $x "tfCluster" (printf "{%s}" (join "," $members)) -}}
{{- $_ := merge $x (dict "byo" (not (kindIs "invalid" $v.command)) "onFailure" (ne $v.restartPolicy "Never") "noUserSA" (kindIs "invalid" $v.serviceAccountName) "noQueue" (kindIs "invalid" $v.queue) "noNetworkPolicy" (not $v.networkPolicy) "noNccl" (not $nccl) "noCode" (not $v.codeArchive)) -}}
{{- $storage := ternary "remote" (ternary (ternary "pvc" "hostPath" (not (empty $vol.persistentVolumeClaim))) "emptyDir" (not (empty $vol))) (contains "://" $x.modelDir) -}}
{{- range $k, $item := (get $r.storage $storage) }}{{ $_ := set $x (printf "ckpt%s" (title $k)) (include "tfk8s.fill" (dict "node" $item "values" $x) | fromJson).v }}{{ end -}}
{{- range $k, $val := $x }}{{ if or (kindIs "invalid" $val) (and (kindIs "string" $val) (eq $val "") (ne $k "queue")) }}{{ $_ := unset $x $k }}{{ end }}{{ end -}}
{{- toJson $x -}}
{{- end }}
{{/*
One node of _plan.tpl filled with the values (dict "node" NODE "values" VALUES), as JSON
{"v": filled}, or {} when absent (the token forms: launcher/chart/chart_plan.py).
*/}}
{{- define "tfk8s.fill" -}}
{{- $n := .node }}{{ $v := .values -}}
{{- if and (kindIs "map" $n) (hasKey $n "@if") -}}
{{- $branch := ternary "@then" "@else" (not (empty (get $v (get $n "@if")))) -}}
{{- if hasKey $n $branch }}{{ include "tfk8s.fill" (dict "node" (get $n $branch) "values" $v) }}{{ else }}{}{{ end -}}
{{- else if kindIs "map" $n -}}
{{- $out := dict }}{{ $spliced := dict -}}
{{- range $k, $x := $n -}}
{{- if hasPrefix "@+" $k }}{{ $spliced = merge $spliced (deepCopy (get $v (trimPrefix "@+" $k) | default dict)) -}}
{{- else }}{{ $f := include "tfk8s.fill" (dict "node" $x "values" $v) | fromJson }}{{ if hasKey $f "v" }}{{ $_ := set $out $k $f.v }}{{ end }}{{ end -}}
{{- end -}}
{{- toJson (dict "v" (merge $out $spliced)) -}}
{{- else if kindIs "slice" $n -}}
{{- $out := list -}}
{{- range $x := $n -}}
{{- /* An item "@if" first: what it chooses may be a splice. */ -}}
{{- range $_ := until 4 }}{{ if and (kindIs "map" $x) (hasKey $x "@if") -}}
{{- $x = get $x (ternary "@then" "@else" (not (empty (get $v (get $x "@if"))))) | default dict -}}
{{- end }}{{ end -}}
{{- if and (kindIs "string" $x) (hasPrefix "@+" $x) }}{{ $out = concat $out (get $v (trimAll "@+" $x) | default list) -}}
{{- else if not (and (kindIs "map" $x) (empty $x)) }}{{ $f := include "tfk8s.fill" (dict "node" $x "values" $v) | fromJson }}{{ if hasKey $f "v" }}{{ $out = append $out $f.v }}{{ end }}{{ end -}}
{{- end -}}
{{- /* Named items (env) like a dict update: a later one keeps the first one's place. */ -}}
{{- $names := list }}{{ $last := dict }}{{ $named := 0 -}}
{{- range $x := $out }}{{ if and (kindIs "map" $x) (hasKey $x "name") }}{{ $named = add1 $named }}{{ if not (hasKey $last $x.name) }}{{ $names = append $names $x.name }}{{ end }}{{ $_ := set $last $x.name $x }}{{ end }}{{ end -}}
{{- if and $names (eq $named (len $out)) }}{{ $out = list }}{{ range $k := $names }}{{ $out = append $out (get $last $k) }}{{ end }}{{ end -}}
{{- toJson (dict "v" $out) -}}
{{- else if and (kindIs "string" $n) (regexMatch "^@[A-Za-z0-9_.]+@$" $n) -}}
{{- if hasKey $v (trimAll "@" $n) }}{{ toJson (dict "v" (get $v (trimAll "@" $n))) }}{{ else }}{}{{ end -}}
{{- else if kindIs "string" $n -}}
{{- toJson (dict "v" (include "tfk8s.text" (dict "s" $n "values" $v))) -}}
{{- else }}{{ toJson (dict "v" $n) }}{{ end -}}
{{- end }}
