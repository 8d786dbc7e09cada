{{/* Names, labels and the values computed from several settings. */}}

{{- define "ferry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The full name prefixes every resource. It is kept to 50 characters so
that "<fullname>-<ordinal>.<fullname>-headless" pod names and the
"-headless" Service stay within DNS label limits.
*/}}
{{- define "ferry.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ferry.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ferry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ferry.labels" -}}
helm.sh/chart: {{ include "ferry.chart" . }}
{{ include "ferry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "ferry.headless" -}}
{{- printf "%s-headless" (include "ferry.fullname" .) -}}
{{- end -}}

{{- define "ferry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ferry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ferry.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The domain the headless Service's names end in. */}}
{{- define "ferry.headlessDomain" -}}
{{- printf "%s.%s.svc.%s" (include "ferry.headless" .) .Release.Namespace .Values.cluster.domain -}}
{{- end -}}

{{/*
-join: the headless Service's name, which resolves to the IP of every pod
that has one, ready or not (publishNotReadyAddresses); ferryd's gossip
joins each of them. It does not change with the replica count, so scaling
does not touch the pod template through it.
*/}}
{{- define "ferry.join" -}}
{{- printf "%s:%d" (include "ferry.headlessDomain" .) (int .Values.ports.gossip) -}}
{{- end -}}

{{- define "ferry.bootstrapExpect" -}}
{{- if kindIs "invalid" .Values.bootstrapExpect -}}
{{- int .Values.replicas -}}
{{- else -}}
{{- int .Values.bootstrapExpect -}}
{{- end -}}
{{- end -}}

{{/*
The names every node certificate carries besides the pod's own IP and
headless names: the client Service's names and tls.extraHosts.
*/}}
{{- define "ferry.serviceHosts" -}}
{{- $full := include "ferry.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $full (printf "%s.%s" $full $ns) (printf "%s.%s.svc" $full $ns) (printf "%s.%s.svc.%s" $full $ns .Values.cluster.domain) -}}
{{- join "," (concat $hosts .Values.tls.extraHosts) -}}
{{- end -}}

{{- define "ferry.caSecretName" -}}
{{- if eq .Values.tls.ca.source "existingSecret" -}}
{{- required "tls.ca.existingSecret is required with tls.ca.source existingSecret" .Values.tls.ca.existingSecret -}}
{{- else if has .Values.tls.ca.source (list "generate" "certManager") -}}
{{- printf "%s-ca" (include "ferry.fullname" .) -}}
{{- else -}}
{{- fail (printf "tls.ca.source %q: want generate, existingSecret or certManager" .Values.tls.ca.source) -}}
{{- end -}}
{{- end -}}

{{- define "ferry.gossipSecretName" -}}
{{- default (printf "%s-gossip" (include "ferry.fullname" .)) .Values.gossip.existingSecret -}}
{{- end -}}

{{- define "ferry.tokensSecretName" -}}
{{- default (printf "%s-tokens" (include "ferry.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "ferry.metricsTokenSecretName" -}}
{{- if .Values.serviceMonitor.tokenSecret -}}
{{- .Values.serviceMonitor.tokenSecret -}}
{{- else if .Values.auth.existingSecret -}}
{{- fail "serviceMonitor.tokenSecret is required with auth.existingSecret: the chart cannot add a metrics token to your tokens file" -}}
{{- else -}}
{{- printf "%s-metrics-token" (include "ferry.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The preStop hook's longest run: the drain, then safe-to-stop. */}}
{{- define "ferry.preStopSeconds" -}}
{{- $s := int .Values.lifecycle.safeToStopTimeoutSeconds -}}
{{- if .Values.lifecycle.drainOnStop -}}
{{- $s = add $s (int .Values.lifecycle.drainTimeoutSeconds) -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{- define "ferry.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add (include "ferry.preStopSeconds" . | int) (int .Values.lifecycle.shutdownSeconds) -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}
