{{/* The release's full name: the names of every object, the lease and the status ConfigMap. */}}
{{- define "dra-autoscaler.fullname" -}}
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

{{- define "dra-autoscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dra-autoscaler.labels" -}}
{{ include "dra-autoscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "dra-autoscaler.serviceAccountName" -}}
{{- if .Values.rbac.serviceAccount.create -}}
{{- default (include "dra-autoscaler.fullname" .) .Values.rbac.serviceAccount.name -}}
{{- else -}}
{{- required "rbac.serviceAccount.name is required when rbac.serviceAccount.create is false" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dra-autoscaler.statusConfigMap" -}}
{{- printf "%s-status" (include "dra-autoscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dra-autoscaler.priorityConfigMap" -}}
{{- printf "%s-priority-expander" (include "dra-autoscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The provider, checked: every template that depends on it calls this. There is no default: kwok, the one that needs no infrastructure, fakes nodes and may create and delete Nodes. */}}
{{- define "dra-autoscaler.provider" -}}
{{- if not .Values.cloudProvider -}}
{{- fail "cloudProvider is required: set it to kwok (demo and tests only: it creates and deletes Node objects), clusterapi or externalgrpc" -}}
{{- end -}}
{{- if not (has .Values.cloudProvider (list "kwok" "clusterapi" "externalgrpc")) -}}
{{- fail (printf "cloudProvider %q: want kwok (demo and tests only), clusterapi or externalgrpc" .Values.cloudProvider) -}}
{{- end -}}
{{- .Values.cloudProvider -}}
{{- end -}}

{{/* The kwok provider's configuration: the values' or the bundled example. */}}
{{- define "dra-autoscaler.kwokConfig" -}}
{{- if .Values.kwok.config -}}
{{- toYaml .Values.kwok.config -}}
{{- else -}}
{{- .Files.Get "files/kwok-provider.yaml" -}}
{{- end -}}
{{- end -}}
