{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "hoplite.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The headless Service that gives each pod its DNS name. */}}
{{- define "hoplite.headless" -}}
{{- printf "%s-members" (include "hoplite.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hoplite.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hoplite.labels" -}}
{{ include "hoplite.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "hoplite.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The DNS name of pod $i in the headless Service. */}}
{{- define "hoplite.podHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "hoplite.fullname" .root) (int .i) (include "hoplite.headless" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/*
--seeds: the manage ports of the first seedPods pods. It does not follow
replicas beyond them, so that scaling up leaves the pod template (and
the running members) as they are.
*/}}
{{- define "hoplite.seeds" -}}
{{- $seeds := list -}}
{{- range $i := until (min .Values.replicas .Values.seedPods | int) -}}
{{- $seeds = append $seeds (printf "%s:%d" (include "hoplite.podHost" (dict "root" $ "i" $i)) (int $.Values.ports.manage)) -}}
{{- end -}}
{{- join "," $seeds -}}
{{- end -}}

{{/* Memory of a pod in MiB: the store's capacity and the rest. */}}
{{- define "hoplite.memoryMiB" -}}
{{- add .Values.capacityMiB .Values.memoryOverheadMiB -}}
{{- end -}}

{{/* The path the probes GET: the etcd provider serves no /_health. */}}
{{- define "hoplite.probePath" -}}
{{- if eq .Values.provider "etcd" -}}/metrics{{- else -}}/_health{{- end -}}
{{- end -}}

{{/* The values that cannot work, refused at render time. */}}
{{- define "hoplite.check" -}}
{{- if not (has .Values.provider (list "automanaged" "etcd")) -}}
{{- fail (printf "provider %q: want automanaged or etcd" .Values.provider) -}}
{{- end -}}
{{- if and (eq .Values.provider "etcd") (not .Values.etcd.endpoint) -}}
{{- fail "provider etcd needs etcd.endpoint (HOST:PORT of etcd's client port)" -}}
{{- end -}}
{{- if and (not .Values.tls.secretName) (not .Values.insecure) -}}
{{- fail "members refuse plaintext beyond their pod: set tls.secretName to a Secret with the cluster's CA (ca.pem, ca-key.pem: hoplite certs), or insecure=true on a network you trust wholly" -}}
{{- end -}}
{{- if and (eq .Values.provider "etcd") (not .Values.etcd.tlsSecretName) (not .Values.insecure) -}}
{{- fail "members refuse a plaintext etcd beyond their pod: set etcd.tlsSecretName (ca.crt, and tls.crt, tls.key), or insecure=true" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.tls.secretName (not .Values.serviceMonitor.clientSecretName) -}}
{{- fail "with tls.secretName, the members require a client certificate on /metrics: set serviceMonitor.clientSecretName (tls.crt, tls.key signed by the cluster's CA)" -}}
{{- end -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) (add .Values.preStopSleepSeconds 15 | int) -}}
{{- fail "terminationGracePeriodSeconds must cover preStopSleepSeconds and the 15 s a member's graceful leave may take" -}}
{{- end -}}
{{- if lt (int .Values.capacityMiB) 1 -}}
{{- fail "capacityMiB must be at least 1" -}}
{{- end -}}
{{- end -}}

{{/* The pod's own name, namespace and IP, for $(VAR) in args. */}}
{{- define "hoplite.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{- define "hoplite.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
The probes' handler: the kubelet's GET without TLS; with TLS an exec of
hoplite-probe, which shows the member's certificate (the members require
one on every port, and the kubelet has none).
*/}}
{{- define "hoplite.probe" -}}
{{- if .Values.tls.secretName -}}
exec:
  command: ["/usr/local/bin/hoplite-probe"]
{{- else -}}
httpGet:
  path: {{ include "hoplite.probePath" . }}
  port: manage
{{- end -}}
{{- end -}}
