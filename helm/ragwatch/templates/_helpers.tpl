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

{{/* Environment shared by the worker and the replay job: ConfigMap + secrets. */}}
{{- define "ragwatch.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "ragwatch.fullname" . }}-config
env:
  - name: RAGWATCH_REDIS_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: redis-url
  - name: RAGWATCH_JUDGE_API_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "ragwatch.secretName" . }}
        key: judge-api-key
        optional: true
{{- end -}}
