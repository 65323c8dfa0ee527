{{/* What values.schema.json cannot state, with launcher/spec.py's and names.py's messages. */}}
{{- define "tfk8s.dns1035Problem" -}}
{{- $c := include "tfk8s.contract" . | fromJson -}}
{{- if gt (len .) (int $c.maxLabel) -}}
{{ len . }} characters; a DNS-1035 label has at most {{ int $c.maxLabel }}
{{- else if not (regexMatch $c.dns1035Pattern .) -}}
not a DNS-1035 label: use lowercase letters, digits and '-', start with a letter, end with a letter or digit
{{- end -}}
{{- end }}
{{- define "tfk8s.validate" -}}
{{- $c := include "tfk8s.contract" . | fromJson -}}
{{- $v := .Values -}}
{{- $name := include "tfk8s.name" . -}}
{{- /* name: the release name stands in when empty, and must make valid object names too. */ -}}
{{- $problem := include "tfk8s.dns1035Problem" $name -}}
{{- if $problem }}{{ fail (ternary (printf "name: %s" $problem) (printf "name: empty, so the release name %q is the cluster name, but it is %s; set name in the values or choose another release name" $name $problem) (not (empty $v.name))) }}{{ end -}}
{{- if and $v.namespace (ne $v.namespace .Release.Namespace) -}}
{{- fail (printf "namespace: the values say %q but the release namespace is %q; the pods' TF_CONFIG addresses contain it: install with --namespace %s, or set namespace to \"\" (the release namespace)" $v.namespace .Release.Namespace $v.namespace) -}}
{{- end -}}
{{- /* Reserved env names. */ -}}
{{- $envs := list (list "env" (default dict $v.env)) -}}
{{- range $role := $c.roles -}}
{{- $cfg := get (default dict $v.roles) $role | default dict -}}
{{- $envs = append $envs (list (printf "roles.%s.env" $role) (default dict $cfg.env)) -}}
{{- /* nvidia.com/gpu: requests == limits */ -}}
{{- $requests := dig "resources" "requests" dict $cfg | default dict }}{{ $limits := dig "resources" "limits" dict $cfg | default dict -}}
{{- if and (hasKey $requests "nvidia.com/gpu") (or (not (hasKey $limits "nvidia.com/gpu")) (ne (include "tfk8s.quantity" (get $requests "nvidia.com/gpu")) (include "tfk8s.quantity" (get $limits "nvidia.com/gpu")))) -}}
{{- fail (printf "roles.%s.resources: nvidia.com/gpu must be set under limits (Kubernetes requires requests == limits for extended resources); move it to resources.limits" $role) -}}
{{- end -}}
{{- end -}}
{{- range $pair := $envs }}{{ range $key := $c.reservedEnv }}{{ if hasKey (last $pair) $key -}}
{{- fail (printf "%s: %s is set by the launcher for every pod; remove it" (first $pair) $key) -}}
{{- end }}{{ end }}{{ end -}}
{{- /* checkpoint.dir under the volume's mountPath */ -}}
{{- $checkpoint := default dict $v.checkpoint -}}
{{- $dir := default "" $checkpoint.dir -}}
{{- $mountPath := default $c.defaults.mountPath (default dict $checkpoint.volume).mountPath -}}
{{- if and $dir $checkpoint.volume (not (contains "://" $dir)) (not (hasPrefix (printf "%s/" (regexReplaceAll "/+$" $mountPath "")) (printf "%s/" (regexReplaceAll "/+$" $dir "")))) -}}
{{- fail (printf "checkpoint: dir '%s' is not under the volume's mountPath '%s'" $dir $mountPath) -}}
{{- end -}}
{{- /* spec.mwms_storage_problem: several MWMS workers share checkpoints: a PVC or gs:// */ -}}
{{- $workers := int (dig $c.role.worker "replicas" 0 (default dict $v.roles)) -}}
{{- if and (eq $v.strategy $c.strategy.multiWorkerMirrored) (gt $workers 1) (not (contains "://" $dir)) (not (dig "volume" "persistentVolumeClaim" nil $checkpoint)) -}}
{{- $where := ternary "a hostPath is a different directory on each node" "without a volume each pod gets its own emptyDir" (not (empty $checkpoint.volume)) -}}
{{- fail (printf "checkpoint.volume: multi_worker_mirrored with %d workers needs checkpoint storage that every worker shares (%s): after a restart each worker would restore a different checkpoint and all-reduce gradients into different weights. Set checkpoint.volume.persistentVolumeClaim.claimName to a ReadWriteMany claim, or use a gs:// checkpoint.dir" $workers $where) -}}
{{- end -}}
{{- /* generated names (names.generated_names): the first one that is not a DNS-1035 label */ -}}
{{- $n := (include "tfk8s.rules" . | fromJson).names -}}
{{- $x := dict "name" $name -}}
{{- $generated := list (list "-" "Service" $name) (list "-" "ServiceAccount/Role" (include "tfk8s.text" (dict "s" $n.supervisor "values" $x))) -}}
{{- range $role := $c.roles -}}
{{- $count := int (dig $role "replicas" 0 (default dict $v.roles)) }}{{ $w := default $c.workload.jobs $v.workload -}}
{{- if gt $count 0 -}}
{{- $_ := set $x "index" (sub $count 1) -}}
{{- $generated = append $generated (list $role "Job" (include "tfk8s.text" (dict "s" (get (get $n.job $w) $role) "values" $x))) -}}
{{- $generated = append $generated (list $role "pod hostname" (include "tfk8s.text" (dict "s" (get (get $n.hostname $w) $role) "values" $x))) -}}
{{- end -}}
{{- end -}}
{{- $failed := "" -}}
{{- range $g := $generated }}{{ $problem := include "tfk8s.dns1035Problem" (index $g 2) }}{{ if and $problem (not $failed) -}}
{{- $failed = printf "name: generated %s name '%s' for role %s: %s; shorten name" (index $g 1) (index $g 2) (index $g 0) $problem -}}
{{- end }}{{ end -}}
{{- if and $v.code (not $v.codeArchive) -}}
{{- fail "code: the chart cannot read a local directory; set codeArchive to its archive in base64 (python -m launcher.code_bundle DIR > code.b64, then --set-file codeArchive=code.b64), or use the values of `python -m launcher render --helm-values SPEC`" -}}
{{- end -}}
{{- if $failed }}{{ fail $failed }}{{ end -}}
{{- end }}
