{{/* Names, labels and the pieces the API and builder pods share. */}}

{{- define "grail.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "grail.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "grail.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "grail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (dict "root" $ "component" "api"). */}}
{{- define "grail.selectorLabels" -}}
app.kubernetes.io/name: {{ include "grail.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "grail.secretName" -}}
{{- default (include "grail.fullname" .) .Values.secret.name -}}
{{- end -}}

{{- define "grail.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "grail.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image of a component: (dict "root" $ "override" .Values.builder.image), the override's fields if set. */}}
{{- define "grail.image" -}}
{{- $repository := .root.Values.image.repository -}}
{{- $tag := .root.Values.image.tag -}}
{{- with .override -}}
{{- $repository = default $repository .repository -}}
{{- $tag = default $tag .tag -}}
{{- end -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{/* Environment of every process: its role, the metadata store, the artifact store and the extra settings. */}}
{{- define "grail.env" -}}
- name: GRAIL_ROLE
  value: {{ .role }}
- name: GRAIL_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "grail.secretName" .root }}
      key: {{ .root.Values.secret.keys.databaseUrl }}
- name: GRAIL_STORE
  value: {{ required "store.url is required (s3://BUCKET/PREFIX)" .root.Values.store.url | quote }}
{{- with .root.Values.store.endpoint }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
- name: AWS_REGION
  value: {{ .root.Values.store.region | quote }}
{{- if .root.Values.store.allowHttp }}
- name: AWS_ALLOW_HTTP
  value: "true"
{{- end }}
{{- if eq .root.Values.store.credentials "secret" }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "grail.secretName" .root }}
      key: {{ .root.Values.secret.keys.s3AccessKeyId }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "grail.secretName" .root }}
      key: {{ .root.Values.secret.keys.s3SecretAccessKey }}
{{- else if ne .root.Values.store.credentials "none" }}
{{- fail "store.credentials is \"secret\" or \"none\"" }}
{{- end }}
- name: GRAIL_PORT
  value: "8000"
{{- range $name, $value := .root.Values.config }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The container's probes: /health for start-up and liveness, /ready for readiness. */}}
{{- define "grail.probes" -}}
startupProbe:
  httpGet:
    path: /health
    port: http
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: /health
    port: http
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: /ready
    port: http
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
{{- end -}}

{{/* The writable places of a read-only root file system. */}}
{{- define "grail.mounts" -}}
- name: data
  mountPath: /data
- name: kernel-cache
  mountPath: /var/cache/grail
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* emptyDir volumes behind grail.mounts: (dict "root" $ "dataSize" "20Gi"). */}}
{{- define "grail.volumes" -}}
- name: data
  emptyDir:
    sizeLimit: {{ .dataSize }}
- name: kernel-cache
  emptyDir:
    sizeLimit: 2Gi
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- end -}}

{{/* Copies the image's compiled kernels into the writable cache, so that a pod on a CPU of the image build's
kind loads them instead of compiling before /ready. */}}
{{- define "grail.kernelCacheInit" -}}
- name: kernel-cache
  image: {{ .image }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command: ["cp", "-a", "/var/cache/grail/.", "/cache/"]
  securityContext:
    {{- toYaml .root.Values.securityContext | nindent 4 }}
  resources:
    requests:
      cpu: 100m
      memory: 64Mi
    limits:
      cpu: "1"
      memory: 256Mi
  volumeMounts:
    - name: kernel-cache
      mountPath: /cache
{{- end -}}

{{/* GRAIL_REPLICA_CACHE_MB of the API replicas: api.replicaCachePercent of their memory limit, in MiB. */}}
{{- define "grail.replicaCacheMb" -}}
{{- $limit := toString .Values.api.resources.limits.memory -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $limit -}}
{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}
{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- end -}}
{{- if le $mib 0 -}}
{{- fail "api.resources.limits.memory is given in Mi or Gi (e.g. 8Gi)" -}}
{{- end -}}
{{- div (mul $mib .Values.api.replicaCachePercent) 100 -}}
{{- end -}}
