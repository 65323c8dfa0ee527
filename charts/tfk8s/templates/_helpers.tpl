{{/*
Helpers the object templates share. Each computes one thing of the launcher's plan
(launcher/plan/plan.py) from the values; tests/charts/test_helm_parity.py keeps every object
equal to `python -m launcher render` of the same spec. Constants shared with the launcher come
from _contract.tpl (generated from the contract): include "tfk8s.contract" . | fromYaml.
A helper that computes a map or a list returns it as YAML, read back with fromYaml or
fromYamlArray. Helm reads every number in YAML (values.yaml too) as a float64, printed as
1e+06 from a million on: a number written into an object goes through int.
*/}}

{{/* The cluster's name and namespace: the release's when the values leave them empty. */}}
{{- define "tfk8s.name" -}}
{{- default .Release.Name .Values.name -}}
{{- end }}

{{- define "tfk8s.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end }}

{{- define "tfk8s.workload" -}}
{{- default "jobs" .Values.workload -}}
{{- end }}

{{/* What every pod of the cluster carries; selectors match on these. */}}
{{- define "tfk8s.selectorLabels" -}}
app.kubernetes.io/name: tfk8s
app.kubernetes.io/instance: {{ include "tfk8s.name" . | quote }}
{{- end }}

{{/* Every object's labels: the user's, then ours (ours win). */}}
{{- define "tfk8s.labels" -}}
{{- $ours := include "tfk8s.selectorLabels" . | fromYaml -}}
{{- $_ := set $ours "app.kubernetes.io/managed-by" "tfk8s" -}}
{{- $_ := set $ours "tfk8s.io/strategy" .Values.strategy -}}
{{- toYaml (merge $ours (deepCopy (default dict .Values.labels))) -}}
{{- end }}

{{/* A role's pods and Job: the cluster's labels and the role (dict "root" $ "role" ROLE). */}}
{{- define "tfk8s.roleLabels" -}}
{{- $labels := include "tfk8s.labels" .root | fromYaml -}}
{{- $_ := set $labels "app.kubernetes.io/component" .role -}}
{{- toYaml $labels -}}
{{- end }}

{{- define "tfk8s.annotations" -}}
{{- toYaml (default dict .Values.annotations) -}}
{{- end }}

{{/* The standard metadata of a cluster-wide object, given its name (dict "root" $ "name" N). */}}
{{- define "tfk8s.metadata" -}}
name: {{ .name | quote }}
namespace: {{ include "tfk8s.namespace" .root | quote }}
labels:
  {{- include "tfk8s.labels" .root | nindent 2 }}
annotations:
  {{- include "tfk8s.annotations" .root | nindent 2 }}
{{- end }}

{{/* A role's replicas as a number (dict "root" $ "role" ROLE): roles.<role>, or the data service's
one dispatcher and dataService.workers data workers (ClusterSpec.replicas). */}}
{{- define "tfk8s.replicas" -}}
{{- $service := .root.Values.dataService -}}
{{- if eq .role "dispatcher" -}}
{{- ternary 1 0 (not (empty $service)) -}}
{{- else if eq .role "data-worker" -}}
{{- int (dig "workers" 0 (default dict $service)) -}}
{{- else -}}
{{- int (dig .role "replicas" 0 (default dict .root.Values.roles)) -}}
{{- end -}}
{{- end }}

{{/* What a role's pods get, as YAML (ClusterSpec.pods): roles.<role>, or dataService.dispatcher
and dataService.worker for the data service's roles. */}}
{{- define "tfk8s.podFields" -}}
{{- $service := default dict .root.Values.dataService -}}
{{- if eq .role "dispatcher" -}}
{{- toYaml (default dict $service.dispatcher) -}}
{{- else if eq .role "data-worker" -}}
{{- toYaml (default dict $service.worker) -}}
{{- else -}}
{{- toYaml (get (default dict .root.Values.roles) .role | default dict) -}}
{{- end -}}
{{- end }}

{{/* The roles with replicas, in the contract's order, as a YAML list. */}}
{{- define "tfk8s.activeRoles" -}}
{{- $c := include "tfk8s.contract" . | fromYaml -}}
{{- $active := list -}}
{{- range $role := $c.roles -}}
{{- if gt (int (include "tfk8s.replicas" (dict "root" $ "role" $role))) 0 -}}
{{- $active = append $active $role -}}
{{- end -}}
{{- end -}}
{{- toYaml $active -}}
{{- end }}

{{/* A role's Job: <name>-<role>; a JobSet names its child Job <name>-<role>-0. */}}
{{- define "tfk8s.jobName" -}}
{{- $name := include "tfk8s.name" .root -}}
{{- if eq (include "tfk8s.workload" .root) "jobset" -}}
{{- printf "%s-%s-0" $name .role -}}
{{- else -}}
{{- printf "%s-%s" $name .role -}}
{{- end -}}
{{- end }}

{{/* Whether the supervisor ends this role's tasks (k8s_contract.supervised_roles): "true" or "". */}}
{{- define "tfk8s.supervised" -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $strategy := get $c.strategies .root.Values.strategy -}}
{{- $roles := get $strategy.supervisedRoles (include "tfk8s.workload" .root) -}}
{{- if or (has .role $roles) (eq .role "evaluator") -}}true{{- end -}}
{{- end }}

{{/* Whether any role with replicas is supervised: "true" or "". */}}
{{- define "tfk8s.anySupervised" -}}
{{- $root := . -}}
{{- range $role := include "tfk8s.activeRoles" . | fromYamlArray -}}
{{- if include "tfk8s.supervised" (dict "root" $root "role" $role) -}}true{{- end -}}
{{- end -}}
{{- end }}

{{/* The account supervised pods run as: the values' serviceAccountName, or <name>-supervisor. */}}
{{- define "tfk8s.supervisorAccount" -}}
{{- default (printf "%s-supervisor" (include "tfk8s.name" .)) .Values.serviceAccountName -}}
{{- end }}

{{/* The model dir: checkpoint.dir, or <volume mountPath>/<namespace>/<name>. */}}
{{- define "tfk8s.modelDir" -}}
{{- $checkpoint := default dict .Values.checkpoint -}}
{{- if $checkpoint.dir -}}
{{- $checkpoint.dir -}}
{{- else -}}
{{- $mountPath := dig "mountPath" "/ckpt" (default dict $checkpoint.volume) -}}
{{- printf "%s/%s/%s" (regexReplaceAll "/+$" $mountPath "") (include "tfk8s.namespace" .) (include "tfk8s.name" .) -}}
{{- end -}}
{{- end }}

{{/*
The model dir's volume and mount (launcher/plan/storage.py), as a map of "volumes" and "mounts":
a claim or a hostPath at the volume's mountPath, nothing for gs://, else an emptyDir at the dir.
*/}}
{{- define "tfk8s.checkpointStorage" -}}
{{- $checkpoint := default dict .Values.checkpoint -}}
{{- $volume := default dict $checkpoint.volume -}}
{{- $modelDir := include "tfk8s.modelDir" . -}}
{{- if $volume.persistentVolumeClaim -}}
{{- $source := dict "claimName" $volume.persistentVolumeClaim.claimName -}}
{{- toYaml (dict
    "volumes" (list (dict "name" "checkpoint" "persistentVolumeClaim" $source))
    "mounts" (list (dict "name" "checkpoint" "mountPath" $volume.mountPath))) -}}
{{- else if $volume.hostPath -}}
{{- $source := dict "path" $volume.hostPath.path "type" "DirectoryOrCreate" -}}
{{- toYaml (dict
    "volumes" (list (dict "name" "checkpoint" "hostPath" $source))
    "mounts" (list (dict "name" "checkpoint" "mountPath" $volume.mountPath))) -}}
{{- else if contains "://" $modelDir -}}
{{- toYaml (dict "volumes" list "mounts" list) -}}
{{- else -}}
{{- toYaml (dict
    "volumes" (list (dict "name" "checkpoint" "emptyDir" dict))
    "mounts" (list (dict "name" "checkpoint" "mountPath" $modelDir))) -}}
{{- end -}}
{{- end }}

{{/* The shipped code (codeArchive, base64): its sha256 (the ConfigMap's name, TFK8S_CODE_DIGEST). */}}
{{- define "tfk8s.codeSha" -}}
{{- sha256sum (b64dec .Values.codeArchive) -}}
{{- end }}

{{- define "tfk8s.codeObject" -}}
{{- printf "%s-code-%s" (include "tfk8s.name" .) (trunc 10 (include "tfk8s.codeSha" .)) -}}
{{- end }}

{{/* A Kubernetes quantity as text, like the launcher's str(): "500m" stays, 2 -> "2" (JSON's number text:
toString would write 1e+06). */}}
{{- define "tfk8s.quantity" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end -}}
{{- end }}

{{/* A role's resources: requests and limits that are set, each quantity as text. */}}
{{- define "tfk8s.resources" -}}
{{- $given := dig "resources" dict (include "tfk8s.podFields" . | fromYaml) | default dict -}}
{{- $resources := dict -}}
{{- range $kind := list "requests" "limits" -}}
{{- $quantities := dict -}}
{{- range $key, $value := (get $given $kind | default dict) -}}
{{- $_ := set $quantities $key (include "tfk8s.quantity" $value) -}}
{{- end -}}
{{- if $quantities }}{{ $_ := set $resources $kind $quantities }}{{ end -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end }}

{{/* Whether a role's pods get a GPU (a limit that is not "0"): "true" or "". */}}
{{- define "tfk8s.hasGpu" -}}
{{- $resources := include "tfk8s.resources" . | fromYaml -}}
{{- $gpus := dig "limits" "nvidia.com/gpu" "0" $resources -}}
{{- if ne $gpus "0" -}}true{{- end -}}
{{- end }}

{{/*
A role's tolerations (plan.role_tolerations): its own with unset fields left out, then the
lost-node taints for nodeLossTolerationSeconds, unless the role names that taint itself.
*/}}
{{- define "tfk8s.tolerations" -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $tolerations := list -}}
{{- $named := list -}}
{{- range $given := dig "tolerations" list (include "tfk8s.podFields" . | fromYaml) | default list -}}
{{- $toleration := dict -}}
{{- range $key, $value := $given -}}
{{- if not (kindIs "invalid" $value) }}{{ $_ := set $toleration $key $value }}{{ end -}}
{{- end -}}
{{- $tolerations = append $tolerations $toleration -}}
{{- $named = append $named (get $toleration "key") -}}
{{- end -}}
{{- $seconds := .root.Values.nodeLossTolerationSeconds -}}
{{- if not (kindIs "invalid" $seconds) -}}
{{- range $taint := $c.nodeLossTaints -}}
{{- if not (has $taint $named) -}}
{{- $toleration := dict "key" $taint "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" $seconds -}}
{{- $tolerations = append $tolerations $toleration -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $tolerations -}}
{{- end }}

{{/* A task's TF_CONFIG address: <job>-<index>.<service>.<namespace>.svc:<port> (dict "root" $ "role" R "index" I). */}}
{{- define "tfk8s.address" -}}
{{- $job := include "tfk8s.jobName" . -}}
{{- $name := include "tfk8s.name" .root -}}
{{- printf "%s-%v.%s.%s.svc:%v" $job .index $name (include "tfk8s.namespace" .root) (int .root.Values.port) -}}
{{- end }}

{{/*
A role's TF_CONFIG with the index left as $(TFK8S_TASK_INDEX) for Kubernetes to expand
(launcher/render/tfconfig.py). The evaluator's lists no cluster: a PSv2 coordinator that sees an
evaluator in the cluster waits for it forever (tensorflow#46169). The data service's tasks list
the service's own tasks.
*/}}
{{- define "tfk8s.tfConfig" -}}
{{- /* JSON here: TF_CONFIG's value is a JSON document (TensorFlow reads it so). */ -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $root := .root -}}
{{- $members := list -}}
{{- $group := list -}}
{{- if has .role $c.trainingRoles }}{{ $group = $c.trainingRoles }}{{ end -}}
{{- if has .role $c.dataServiceRoles }}{{ $group = $c.dataServiceRoles }}{{ end -}}
{{- range $role := $group -}}
{{- $replicas := int (include "tfk8s.replicas" (dict "root" $root "role" $role)) -}}
{{- if gt $replicas 0 -}}
{{- $addresses := list -}}
{{- range $index := until $replicas -}}
{{- $addresses = append $addresses (include "tfk8s.address" (dict "root" $root "role" $role "index" $index)) -}}
{{- end -}}
{{- $members = append $members (printf "%s:%s" (toJson $role) (toJson $addresses)) -}}
{{- end -}}
{{- end -}}
{{- $task := printf "{\"type\":%s,\"index\":$(TFK8S_TASK_INDEX)}" (toJson .role) -}}
{{- printf "{\"cluster\":{%s},\"task\":%s}" (join "," $members) $task -}}
{{- end }}

{{/*
What a role's task container gets besides its index and TF_CONFIG (plan.task_env, then the
renderer's HOME and supervision, then the user's env: plan.env_list), as a YAML list. Like the
launcher's dict updates: a name set again keeps its first place and takes the later entry.
*/}}
{{- define "tfk8s.taskEnv" -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $values := .root.Values -}}
{{- $order := list -}}
{{- $env := dict -}}
{{- $pairs := list
    (list "GRPC_FAIL_FAST" "use_caller")
    (list "TFK8S_STRATEGY" $values.strategy)
    (list "TFK8S_MODEL_DIR" (include "tfk8s.modelDir" .root))
    (list "TFK8S_PEER_TIMEOUT" (toString (int $values.peerTimeoutSeconds)))
    (list "TFK8S_CLUSTER" (include "tfk8s.name" .root))
    (list "TFK8S_NAMESPACE" (include "tfk8s.namespace" .root)) -}}
{{- if kindIs "invalid" $values.command -}}
{{- $program := dig "module" $c.defaults.program (default dict $values.program) -}}
{{- $pairs = append $pairs (list "TFK8S_PROGRAM" $program) -}}
{{- end -}}
{{- with $values.fatalExceptions -}}
{{- $pairs = append $pairs (list "TFK8S_FATAL_EXCEPTIONS" (join "," .)) -}}
{{- end -}}
{{- with $values.retriedExceptions -}}
{{- $pairs = append $pairs (list "TFK8S_RETRIED_EXCEPTIONS" (join "," .)) -}}
{{- end -}}
{{- with get (default dict $values.labels) $c.sweepLabel -}}
{{- $pairs = append $pairs (list $c.sweepEnv .) -}}
{{- end -}}
{{- if $values.codeArchive -}}
{{- $pairs = append $pairs (list "PYTHONPATH" $c.code.dir) -}}
{{- $pairs = append $pairs (list "TFK8S_CODE_DIGEST" (include "tfk8s.codeSha" .root)) -}}
{{- end -}}
{{- $gpus := dig "limits" $c.gpuResource "0" (include "tfk8s.resources" . | fromYaml) -}}
{{- if and (kindIs "invalid" $values.command) (ne $gpus "0") -}}
{{- $pairs = append $pairs (list "TFK8S_GPUS" $gpus) -}}
{{- end -}}
{{- $strategy := get $c.strategies $values.strategy -}}
{{- if has .role $strategy.serverRoles -}}
{{- /* contract.server_linger_seconds: the grace less a margin, at most half the grace */ -}}
{{- $grace := int $values.terminationGracePeriodSeconds -}}
{{- $linger := sub $grace (min (int $c.serverLingerMarginSeconds) (div $grace 2)) -}}
{{- $pairs = append $pairs (list "TFK8S_SERVER_LINGER_SECONDS" (toString $linger)) -}}
{{- end -}}
{{- if and $values.dataService (or (has .role $c.dataReaders) (eq .role "data-worker")) -}}
{{- $dispatcher := include "tfk8s.address" (dict "root" .root "role" "dispatcher" "index" 0) -}}
{{- $pairs = append $pairs (list "TFK8S_DATA_SERVICE" (printf "grpc://%s" $dispatcher)) -}}
{{- end -}}
{{- with include "tfk8s.metricsPort" .root -}}
{{- $pairs = append $pairs (list "TFK8S_METRICS_PORT" .) -}}
{{- end -}}
{{- $pairs = append $pairs (list "HOME" "/tmp") -}}
{{- if include "tfk8s.supervised" . -}}
{{- $grace := ternary (int $values.evaluatorGraceSeconds) 0 (eq .role "evaluator") -}}
{{- $pairs = append $pairs (list "TFK8S_GRACE_SECONDS" (toString $grace)) -}}
{{- $pairs = append $pairs (list "TFK8S_POD_GRACE_SECONDS" (toString (int $values.terminationGracePeriodSeconds))) -}}
{{- end -}}
{{- with include "tfk8s.platform" .root -}}
{{- $pairs = append $pairs (list "TFK8S_PLATFORM" .) -}}
{{- end -}}
{{- $entries := list -}}
{{- range $pair := $pairs -}}
{{- $entries = append $entries (dict "name" (first $pair) "value" (last $pair)) -}}
{{- end -}}
{{- /* The user's after ours, as written: the spec's env, then the role's. A list keeps its
    order; a map comes in name order (Helm ranges over a map so): render --helm-values writes
    lists. */ -}}
{{- range $given := list $values.env (dig "env" list (include "tfk8s.podFields" . | fromYaml)) -}}
{{- if kindIs "map" $given -}}
{{- range $key, $value := $given }}{{ $entries = append $entries (dict "name" $key "value" $value) }}{{ end -}}
{{- else -}}
{{- range $entry := default list $given }}{{ $entries = append $entries $entry }}{{ end -}}
{{- end -}}
{{- end -}}
{{- range $entry := $entries -}}
{{- if not (hasKey $env $entry.name) }}{{ $order = append $order $entry.name }}{{ end -}}
{{- $_ := set $env $entry.name $entry -}}
{{- end -}}
{{- $list := list -}}
{{- range $name := $order }}{{ $list = append $list (get $env $name) }}{{ end -}}
{{- toYaml $list -}}
{{- end }}

{{/*
The Kubernetes cluster as OWNER.json names it (TFK8S_PLATFORM): the value platform, else what
submit names (k8s_contract.kubernetes_platform), from the CA published in the release namespace;
lookup reads nothing under `helm template`, so then none.
*/}}
{{- define "tfk8s.platform" -}}
{{- if .Values.platform -}}
{{- .Values.platform -}}
{{- else -}}
{{- $c := include "tfk8s.contract" . | fromYaml -}}
{{- $p := $c.platform -}}
{{- $published := lookup "v1" "ConfigMap" (include "tfk8s.namespace" .) $p.configMap -}}
{{- with dig "data" $p.key "" $published -}}
{{- printf "%s%s" $p.prefix (sha256sum . | trunc (int $p.digits)) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The task's own command line (plan.task_command): the built-in worker with the program's args,
or the user's; the data service's servers run the built-in worker whatever the trainers run. */}}
{{- define "tfk8s.taskCommand" -}}
{{- $values := .root.Values -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $own := include "tfk8s.podFields" . | fromYaml -}}
{{- if kindIs "invalid" $values.command -}}
{{- toYaml (concat (list "python" "-m" "worker") (dig "args" list (default dict $values.program) | default list)) -}}
{{- else if has .role $c.dataServiceRoles -}}
{{- toYaml (list "python" "-m" "worker") -}}
{{- else if not (kindIs "invalid" $own.command) -}}
{{- toYaml (concat $own.command (default list $own.args)) -}}
{{- else if not (kindIs "invalid" $own.args) -}}
{{- toYaml (concat $values.command $own.args) -}}
{{- else -}}
{{- toYaml (concat $values.command (default list $values.args)) -}}
{{- end -}}
{{- end }}

{{/*
`over` merged into `base` (dict "base" MAP "over" MAP), as YAML: maps key by key, the over's
value winning; lists of named items by name (new names appended); other lists replaced.
launcher/cluster_spec/pod_fields.py merge is the launcher's.
*/}}
{{- define "tfk8s.merge" -}}
{{- $out := deepCopy .base -}}
{{- range $key, $value := .over -}}
{{- $old := get $out $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $old) -}}
{{- $_ := set $out $key (include "tfk8s.merge" (dict "base" $old "over" $value) | fromYaml) -}}
{{- else if and (include "tfk8s.named" $value) (include "tfk8s.named" $old) -}}
{{- $merged := $old -}}
{{- range $item := $value -}}
{{- $next := list -}}
{{- $found := false -}}
{{- range $was := $merged -}}
{{- if eq $was.name $item.name -}}
{{- $next = append $next (include "tfk8s.merge" (dict "base" $was "over" $item) | fromYaml) -}}
{{- $found = true -}}
{{- else -}}
{{- $next = append $next $was -}}
{{- end -}}
{{- end -}}
{{- if not $found }}{{ $next = append $next $item }}{{ end -}}
{{- $merged = $next -}}
{{- end -}}
{{- $_ := set $out $key $merged -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end }}

{{/* "true" when the value is a list of maps that each have a name, else "". */}}
{{- define "tfk8s.named" -}}
{{- if kindIs "slice" . -}}
{{- $named := true -}}
{{- range $item := . -}}
{{- if not (and (kindIs "map" $item) (hasKey $item "name")) }}{{ $named = false }}{{ end -}}
{{- end -}}
{{- if $named }}true{{ end -}}
{{- end -}}
{{- end }}

{{/* The cluster's pods of some roles (dict "root" $ "roles" LIST): every pod carries its role. */}}
{{- define "tfk8s.podSelector" -}}
matchLabels:
  {{- include "tfk8s.selectorLabels" .root | nindent 2 }}
matchExpressions:
- key: app.kubernetes.io/component
  operator: In
  {{- /* A flow list: JSON is YAML. */}}
  values: {{ toJson .roles }}
{{- end }}

{{/* The metrics port as a number, or "" when metrics.port is null. */}}
{{- define "tfk8s.metricsPort" -}}
{{- $port := dig "port" nil (default dict .Values.metrics) -}}
{{- if not (kindIs "invalid" $port) }}{{ int $port }}{{ end -}}
{{- end }}

{{/* Every pod's annotations: the values', then Prometheus' scrape annotations (metrics). */}}
{{- define "tfk8s.podAnnotations" -}}
{{- $annotations := deepCopy (default dict .Values.annotations) -}}
{{- $port := include "tfk8s.metricsPort" . -}}
{{- if and $port (dig "scrapeAnnotations" true (default dict .Values.metrics)) -}}
{{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $annotations "prometheus.io/port" $port -}}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- toYaml $annotations -}}
{{- end }}

{{/* metrics.scrapers as NetworkPolicy peers, unset selectors left out (a YAML list). */}}
{{- define "tfk8s.scrapers" -}}
{{- $peers := list -}}
{{- range $scraper := dig "scrapers" list (default dict .Values.metrics) | default list -}}
{{- $peer := dict -}}
{{- range $key, $selector := $scraper -}}
{{- if not (kindIs "invalid" $selector) }}{{ $_ := set $peer $key $selector }}{{ end -}}
{{- end -}}
{{- $peers = append $peers $peer -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end }}
