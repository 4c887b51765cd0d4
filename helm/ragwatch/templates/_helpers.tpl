{{/* Chart name, truncated to 63 characters. */}}
{{- define "ragwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name. */}}
{{- define "ragwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ragwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ragwatch.labels" -}}
helm.sh/chart: {{ include "ragwatch.chart" . }}
{{ include "ragwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
ragwatch.io/service: {{ .Values.serviceName | replace ":" "_" | trunc 63 | quote }}
{{- end -}}

{{- define "ragwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ragwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ragwatch.workerSelectorLabels" -}}
{{ include "ragwatch.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "ragwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ragwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ragwatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding redis-url and judge-api-key. */}}
{{- define "ragwatch.secretName" -}}
{{- default (printf "%s-secrets" (include "ragwatch.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{/* A secret value: the one given in values, else the one the installed Secret already holds (kept across
upgrades), else a fresh random one. Args: dict root, key (the Secret key), value. */}}
{{- define "ragwatch.generatedSecret" -}}
{{- if .value -}}
{{- .value -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace (include "ragwatch.secretName" .root) -}}
{{- $data := (get ($existing | default dict) "data") | default dict -}}
{{- if hasKey $data .key -}}
{{- index $data .key | b64dec -}}
{{- else -}}
{{- randAlphaNum 40 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The {name, key} of the Secret holding the Redis password, or an empty dict. keda.passwordSecret is the
older name of the same thing: both may be set only when they agree. */}}
{{- define "ragwatch.redisPasswordSecret" -}}
{{- $redis := .Values.redis.passwordSecret | default dict -}}
{{- $keda := .Values.keda.passwordSecret | default dict -}}
{{- if and $redis $keda (not (eq (toJson $redis) (toJson $keda))) -}}
{{- fail "redis.passwordSecret and keda.passwordSecret differ: KEDA must use the workers' Redis credentials (set redis.passwordSecret only)" -}}
{{- end -}}
{{- toJson (default $keda $redis) -}}
{{- end -}}

{{/* Redis settings of every pod: the URL from the Secret, the password (when separate) from its own Secret. */}}
{{- define "ragwatch.redisEnv" -}}
envFrom:
  - configMapRef:
      name: {{ include "ragwatch.fullname" . }}-config
env:
  - name: RAGWATCH_REDIS_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: redis-url
  {{- $password := include "ragwatch.redisPasswordSecret" . | fromJson }}
  {{- if $password }}
  - name: RAGWATCH_REDIS_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ $password.name }}
        key: {{ $password.key }}
  {{- end }}
{{- end -}}

{{/* Worker environment: Redis, plus the LLM judge's API key (the replay job never gets it) and the
dashboard token while the page is on. */}}
{{- define "ragwatch.env" -}}
{{ include "ragwatch.redisEnv" . }}
  - name: RAGWATCH_JUDGE_API_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: judge-api-key
        optional: true
  {{- if .Values.worker.dashboard }}
  - name: RAGWATCH_DASHBOARD_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: dashboard-token
  {{- end }}
{{- end -}}

{{/* Replay environment: Redis, plus the probe secret that signs its probes (unless replay.unsigned). */}}
{{- define "ragwatch.replayEnv" -}}
{{ include "ragwatch.redisEnv" . }}
  {{- if not .Values.replay.unsigned }}
  - name: RAGWATCH_PROBE_SECRET
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: probe-secret
  {{- end }}
{{- end -}}

{{/* Egress both workers and the replay job need: DNS and Redis. */}}
{{- define "ragwatch.baseEgress" -}}
- to:
    - namespaceSelector:
        {{- toYaml .dns.namespaceSelector | nindent 8 }}
      podSelector:
        {{- toYaml .dns.podSelector | nindent 8 }}
  ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
- to:
    {{- toYaml .redis.to | nindent 4 }}
  ports:
    {{- range .redis.ports }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
{{- end }}


{{/* Ingress of the worker port: Prometheus's namespace, and (while the dashboard is on) its peers. */}}
{{- define "ragwatch.workerIngress" -}}
- from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .Values.networkPolicy.metricsNamespace | quote }}
    {{- if .Values.worker.dashboard }}
    {{- with .Values.networkPolicy.dashboardFrom }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- end }}
  ports:
    - protocol: TCP
      port: {{ .Values.worker.port }}
{{- end }}
