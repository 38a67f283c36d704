{{/* Names are cut to 63 characters, the limit of a label value and of most names. */}}
{{- define "outbox-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "outbox-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The selector never changes after install (a Deployment's selector is immutable). */}}
{{- define "outbox-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "outbox-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "outbox-operator.labels" -}}
{{ include "outbox-operator.selectorLabels" . }}
app.kubernetes.io/part-of: outbox-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "outbox-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "outbox-operator.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "outbox-operator.leaderElectionNamespace" -}}
{{- .Values.leaderElection.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "outbox-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
