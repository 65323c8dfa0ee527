{{/*
One role's Indexed Job: its metadata and spec (dict "root" $ "role" ROLE). jobs.yaml creates it
as a Job, jobset.yaml as a replicatedJob's template; manifests/job.yaml.j2 is the launcher's.
The index reaches TF_CONFIG through $(TFK8S_TASK_INDEX), which Kubernetes expands per pod.
*/}}
{{- define "tfk8s.jobMetadata" -}}
labels:
  {{- include "tfk8s.roleLabels" . | nindent 2 }}
annotations:
  {{- include "tfk8s.annotations" .root | nindent 2 }}
{{- end }}

{{- define "tfk8s.jobSpec" -}}
{{- $root := .root -}}
{{- $values := .root.Values -}}
{{- $c := include "tfk8s.contract" $root | fromYaml -}}
{{- $strategy := get $c.strategies $values.strategy -}}
{{- $name := include "tfk8s.name" $root -}}
{{- $replicas := include "tfk8s.replicas" . -}}
{{- $own := include "tfk8s.podFields" . | fromYaml -}}
completionMode: Indexed
completions: {{ $replicas }}
parallelism: {{ $replicas }}
{{- if and (eq $values.restartPolicy "Never") (has .role $strategy.perIndexRoles) }}
{{- /* A budget per worker; the first one out of it fails the Job (backoffLimit unset). */}}
backoffLimitPerIndex: {{ int $values.backoffLimit }}
maxFailedIndexes: 0
{{- else }}
backoffLimit: {{ int $values.backoffLimit }}
{{- end }}
{{- /* A replacement pod only once the old one has terminated: never two tasks with one hostname. */}}
podReplacementPolicy: Failed
{{- if eq $values.restartPolicy "Never" }}
{{- /* plan.failure_policy: the data service's servers always run the built-in worker, and are
judged by its codes, never by a command's fatalExitCodes. */}}
{{- $builtin := or (kindIs "invalid" $values.command) (has .role $c.dataServiceRoles) }}
{{- $policy := ternary $c.podFailurePolicy.builtin $c.podFailurePolicy.command $builtin }}
{{- $fatal := default list $values.fatalExitCodes }}
{{- if and (not $builtin) $fatal }}
{{- /* launcher/render/job_failure.py pod_failure_policy: the FailJob rule (the Keras check's and
the exception check's codes) takes the spec's codes too, in order. */}}
{{- $rules := list }}
{{- range $rule := $policy.rules }}
{{- if eq $rule.action "FailJob" }}
{{- $padded := list }}
{{- range $code := concat $rule.onExitCodes.values $fatal }}
{{- $padded = append $padded (printf "%03d" (int $code)) }}
{{- end }}
{{- $sorted := list }}
{{- range $code := sortAlpha $padded }}{{ $sorted = append $sorted (atoi $code) }}{{ end }}
{{- $exits := dict "containerName" $c.containerName "operator" "In" "values" $sorted }}
{{- $rules = append $rules (dict "action" "FailJob" "onExitCodes" $exits) }}
{{- else }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- $policy = dict "rules" $rules }}
{{- end }}
podFailurePolicy:
  {{- toYaml $policy | nindent 2 }}
{{- end }}
{{- if not (kindIs "invalid" $values.activeDeadlineSeconds) }}
activeDeadlineSeconds: {{ int $values.activeDeadlineSeconds }}
{{- end }}
{{- /* In a JobSet the set's TTL governs: a child Job deleted early would be recreated. */}}
{{- if and (not (kindIs "invalid" $values.ttlSecondsAfterFinished)) (eq (include "tfk8s.workload" $root) "jobs") }}
ttlSecondsAfterFinished: {{ int $values.ttlSecondsAfterFinished }}
{{- end }}
{{- if and $strategy.successPolicy (eq .role $strategy.successRole) }}
{{- /* MWMS: worker 0 is the chief, its success is the Job's. */}}
successPolicy:
  rules:
  - succeededIndexes: "0"
{{- end }}
{{- /* The role's podTemplate merged in (launcher/cluster_spec/pod_fields.py's rule). */}}
{{- with $own.podTemplate }}
template:
  {{- include "tfk8s.merge" (dict "base" (include "tfk8s.pod" $ | fromYaml) "over" .) | nindent 2 }}
{{- else }}
template:
  {{- include "tfk8s.pod" . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
One role's pod template (dict "root" $ "role" ROLE), before its podTemplate: the pod's fields,
then its containers and volumes, each a define of its own below.
*/}}
{{- define "tfk8s.pod" -}}
{{- $root := .root -}}
{{- $values := .root.Values -}}
{{- $name := include "tfk8s.name" $root -}}
{{- $supervised := include "tfk8s.supervised" . -}}
{{- $own := include "tfk8s.podFields" . | fromYaml -}}
{{- /* The role's labels under ours; its annotations over ours (launcher/render/context.py). */}}
{{- $labels := merge (include "tfk8s.roleLabels" . | fromYaml) (deepCopy (default dict $own.labels)) }}
{{- $ours := include "tfk8s.podAnnotations" $root | fromYaml }}
{{- $annotations := merge (deepCopy (default dict $own.annotations)) $ours }}
metadata:
  labels:
    {{- toYaml $labels | nindent 4 }}
  annotations:
    {{- toYaml $annotations | nindent 4 }}
spec:
  restartPolicy: {{ $values.restartPolicy }}
  terminationGracePeriodSeconds: {{ int $values.terminationGracePeriodSeconds }}
  subdomain: {{ $name | quote }}
  {{- if $own.serviceAccountName }}
  serviceAccountName: {{ $own.serviceAccountName | quote }}
  {{- else if or $supervised $values.serviceAccountName }}
  serviceAccountName: {{ include "tfk8s.supervisorAccount" $root | quote }}
  {{- end }}
  {{- /* No container where TF runs gets a token: its gRPC server would hand it to any caller. */}}
  automountServiceAccountToken: false
  {{- with $values.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ int $values.securityContext.runAsUser }}
    runAsGroup: {{ int $values.securityContext.runAsGroup }}
    fsGroup: {{ int $values.securityContext.fsGroup }}
    seccompProfile:
      type: RuntimeDefault
  {{- with $own.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with include "tfk8s.tolerations" . | fromYamlArray }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $own.affinity | default $values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $own.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or $values.codeArchive $values.sidecars }}
  initContainers:
  {{- if $values.codeArchive }}
  {{- include "tfk8s.codeUnpackerContainer" . | nindent 2 }}
  {{- end }}
  {{- /* Native sidecars: they run beside the task and never keep the Job from completing. */}}
  {{- range $sidecar := $values.sidecars }}
  - {{- toYaml (merge (dict "restartPolicy" "Always") $sidecar) | nindent 4 }}
  {{- end }}
  {{- end }}
  containers:
  {{- include "tfk8s.taskContainer" . | nindent 2 }}
  {{- if $supervised }}
  {{- include "tfk8s.jobWatchContainer" . | nindent 2 }}
  {{- end }}
  volumes:
  {{- include "tfk8s.podVolumes" . | nindent 2 }}
{{- end }}

{{/* The shipped code's unpacker, an init container (codeArchive; the rest of it is _contract.tpl's). */}}
{{- define "tfk8s.codeUnpackerContainer" -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
- image: {{ .root.Values.image | quote }}
  imagePullPolicy: {{ .root.Values.imagePullPolicy }}
  {{- toYaml $c.code.initContainer | nindent 2 }}
  securityContext:
    {{- include "tfk8s.containerSecurity" . | nindent 4 }}
{{- end }}

{{/*
A role's pod volumes (dict "root" $ "role" ROLE): /tmp, the model dir's, the supervisor's, the
shipped code's, the role's own, then extraVolumes.
*/}}
{{- define "tfk8s.podVolumes" -}}
{{- $root := .root -}}
{{- $values := .root.Values -}}
{{- $storage := include "tfk8s.checkpointStorage" $root | fromYaml -}}
{{- $own := include "tfk8s.podFields" . | fromYaml -}}
{{- $supervised := include "tfk8s.supervised" . -}}
- name: tmp
  emptyDir: {}
{{- with $storage.volumes }}
{{ toYaml . }}
{{- end }}
{{- if $supervised }}
{{ include "tfk8s.supervisorVolumes" $root }}
{{- end }}
{{- if $values.codeArchive }}
{{- $c := include "tfk8s.contract" $root | fromYaml }}
{{ list $c.code.volume | toYaml }}
- name: code-archive
  configMap:
    name: {{ include "tfk8s.codeObject" $root }}
{{- end }}
{{- with $own.volumes }}
{{ toYaml . }}
{{- end }}
{{- with $values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
A role's task container, `tensorflow` (dict "root" $ "role" ROLE; manifests/job.yaml.j2 has the
launcher's): its command (under the supervisor when supervised), TF_CONFIG and env, ports,
resources and mounts.
*/}}
{{- define "tfk8s.taskContainer" -}}
{{- $values := .root.Values -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $storage := include "tfk8s.checkpointStorage" .root | fromYaml -}}
{{- $metricsPort := include "tfk8s.metricsPort" .root -}}
{{- $own := include "tfk8s.podFields" . | fromYaml -}}
{{- $supervised := include "tfk8s.supervised" . -}}
{{- $command := include "tfk8s.taskCommand" . | fromYamlArray -}}
{{- if $supervised }}
{{- $command = concat (list "python3" "/var/run/tfk8s/supervise.py" "run" "--") $command -}}
{{- end -}}
- name: tensorflow
  image: {{ $own.image | default $values.image | quote }}
  imagePullPolicy: {{ $values.imagePullPolicy }}
  terminationMessagePolicy: FallbackToLogsOnError
  command:
    {{- toYaml $command | nindent 4 }}
  {{- if $values.codeArchive }}
  workingDir: {{ $c.code.dir }}
  {{- else if $values.workingDir }}
  workingDir: {{ $values.workingDir | quote }}
  {{- end }}
  env:
  - name: TFK8S_TASK_INDEX
    valueFrom:
      fieldRef:
        fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
  - name: TF_CONFIG
    value: {{ include "tfk8s.tfConfig" . | quote }}
  - name: TFK8S_NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
  {{- include "tfk8s.taskEnv" . | nindent 2 }}
  {{- $listens := or (has .role $c.trainingRoles) (has .role $c.dataServiceRoles) }}
  {{- if or $listens $metricsPort }}
  ports:
  {{- if $listens }}
  - name: tf-grpc
    containerPort: {{ int $values.port }}
    protocol: TCP
  {{- end }}
  {{- if $metricsPort }}
  - name: metrics
    containerPort: {{ $metricsPort }}
    protocol: TCP
  {{- end }}
  {{- end }}
  resources:
    {{- include "tfk8s.resources" . | nindent 4 }}
  securityContext:
    {{- include "tfk8s.containerSecurity" . | nindent 4 }}
  volumeMounts:
  - name: tmp
    mountPath: /tmp
  {{- with $storage.mounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- if $supervised }}
  - name: supervisor
    mountPath: /var/run/tfk8s
    readOnly: true
  - name: supervisor-state
    mountPath: /var/run/tfk8s-state
  {{- end }}
  {{- if $values.codeArchive }}
  - name: code
    mountPath: {{ $c.code.dir }}
    readOnly: true
  {{- end }}
  {{- with $own.volumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with $values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
A supervised pod's job-watch container (manifests/job.yaml.j2 has the launcher's): it alone mounts the
account's token, follows the Job whose end ends the task, and tells the task's container through
a shared emptyDir. TF's gRPC server can read any file of its own container: no token there.
*/}}
{{- define "tfk8s.jobWatchContainer" -}}
{{- $c := include "tfk8s.contract" .root | fromYaml -}}
{{- $strategy := get $c.strategies .root.Values.strategy -}}
- name: job-watch
  image: {{ .root.Values.image | quote }}
  imagePullPolicy: {{ .root.Values.imagePullPolicy }}
  command: [python3, /var/run/tfk8s/supervise.py, watch]
  resources:
    requests: {cpu: 10m, memory: 48Mi}
    limits: {cpu: 100m, memory: 96Mi}
  securityContext:
    {{- include "tfk8s.containerSecurity" . | nindent 4 }}
  volumeMounts:
  - name: supervisor
    mountPath: /var/run/tfk8s
    readOnly: true
  - name: supervisor-state
    mountPath: /var/run/tfk8s-state
  - name: kube-api-access
    mountPath: /var/run/secrets/kubernetes.io/serviceaccount
    readOnly: true
  env:
  - name: TFK8S_WATCH_JOB
    value: {{ include "tfk8s.jobName" (dict "root" .root "role" $strategy.successRole) | quote }}
  - name: TFK8S_NAMESPACE
    value: {{ include "tfk8s.namespace" .root | quote }}
  - name: TFK8S_POD_RESTART_POLICY
    value: {{ .root.Values.restartPolicy }}
  {{- if eq (include "tfk8s.workload" .root) "jobset" }}
  {{- /* A JobSet recreates the watched Job on every restart: which attempt this pod is. */}}
  - name: TFK8S_RESTART_ATTEMPT
    valueFrom:
      fieldRef:
        fieldPath: metadata.annotations['jobset.sigs.k8s.io/restart-attempt']
  {{- end }}
{{- end }}

{{/* The supervisor's scripts (the root ConfigMap), its shared state, and the job-watch's token. */}}
{{- define "tfk8s.supervisorVolumes" -}}
- name: supervisor
  configMap:
    name: {{ include "tfk8s.name" . | quote }}
    items:
    - {key: supervise.py, path: supervise.py}
    - {key: job_watch.py, path: job_watch.py}
- name: supervisor-state
  emptyDir: {}
- name: kube-api-access
  projected:
    defaultMode: 420
    sources:
    - serviceAccountToken:
        path: token
        expirationSeconds: 600
    - configMap:
        name: kube-root-ca.crt
        items:
        - {key: ca.crt, path: ca.crt}
    - downwardAPI:
        items:
        - path: namespace
          fieldRef:
            apiVersion: v1
            fieldPath: metadata.namespace
{{- end }}

{{/* Pod Security `restricted` for every container (manifests/_security.j2 is the launcher's). */}}
{{- define "tfk8s.containerSecurity" -}}
allowPrivilegeEscalation: false
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}
