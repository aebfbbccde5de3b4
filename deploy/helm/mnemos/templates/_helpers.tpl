{{/* The chart's name. */}}
{{- define "mnemos.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the prefix of every object. */}}
{{- define "mnemos.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "mnemos.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "mnemos.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "mnemos.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "mnemos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mnemos
{{- end -}}

{{/* Selector labels of the release (every target). */}}
{{- define "mnemos.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mnemos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image reference. */}}
{{- define "mnemos.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The service account pods run as. */}}
{{- define "mnemos.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mnemos.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret every pod reads its credentials from. */}}
{{- define "mnemos.secretName" -}}
{{- default (include "mnemos.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/* The JetStream stream holding the events services publish (the extractor's). */}}
{{- define "mnemos.eventsStream" -}}
{{- if .Values.nats.namespace -}}
{{- printf "%s_EVENTS" (upper .Values.nats.namespace) -}}
{{- else -}}
EVENTS
{{- end -}}
{{- end -}}

{{/* Whether an autoscaler owns the replicas of a target: (dict "target" $t). */}}
{{- define "mnemos.autoscaled" -}}
{{- $t := .target -}}
{{- if or (and $t.keda $t.keda.enabled) (and $t.autoscaling $t.autoscaling.enabled) -}}true{{- end -}}
{{- end -}}
