{{/* Names and labels. */}}
{{- define "skyshift.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "skyshift.labels" -}}
app.kubernetes.io/name: skyshift
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "api") */}}
{{- define "skyshift.selector" -}}
app.kubernetes.io/name: skyshift
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "skyshift.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end -}}

{{/* Paths inside the containers. */}}
{{- define "skyshift.home" -}}/var/lib/skyshift{{- end -}}
{{- define "skyshift.temporalTlsDir" -}}/etc/skyshift/temporal-tls{{- end -}}
{{- define "skyshift.etcdAuthDir" -}}/etc/skyshift/etcd-auth{{- end -}}
{{- define "skyshift.etcdTlsDir" -}}/etc/skyshift/etcd-tls{{- end -}}

{{/* Environment every SkyShift process gets, after the ConfigMap's (envFrom). */}}
{{- define "skyshift.env" -}}
- name: SKYSHIFT_READY_FILE
  value: {{ include "skyshift.home" . }}/run/ready
{{- if .Values.metrics.port }}
- name: SKYSHIFT_METRICS_ADDRESS
  value: "0.0.0.0:{{ .Values.metrics.port }}"
{{- end }}
{{- if .Values.etcd.auth.enabled }}
- name: SKYSHIFT_ETCD_USER
  value: {{ required "etcd.auth.user" .Values.etcd.auth.user | quote }}
- name: SKYSHIFT_ETCD_PASSWORD_FILE
  value: {{ include "skyshift.etcdAuthDir" . }}/{{ .Values.etcd.auth.passwordKey }}
{{- end }}
{{- with .Values.etcd.tls }}
{{- if .enabled }}
- name: SKYSHIFT_ETCD_TLS_CERT
  value: {{ include "skyshift.etcdTlsDir" $ }}/{{ .certKey }}
- name: SKYSHIFT_ETCD_TLS_KEY
  value: {{ include "skyshift.etcdTlsDir" $ }}/{{ .keyKey }}
- name: SKYSHIFT_ETCD_TLS_CA
  value: {{ include "skyshift.etcdTlsDir" $ }}/{{ .caKey }}
{{- end }}
{{- end }}
{{- with .Values.temporal.tls }}
{{- if .enabled }}
- name: SKYSHIFT_TEMPORAL_TLS_CERT
  value: {{ include "skyshift.temporalTlsDir" $ }}/{{ .certKey }}
- name: SKYSHIFT_TEMPORAL_TLS_KEY
  value: {{ include "skyshift.temporalTlsDir" $ }}/{{ .keyKey }}
- name: SKYSHIFT_TEMPORAL_TLS_CA
  value: {{ include "skyshift.temporalTlsDir" $ }}/{{ .caKey }}
{{- if .serverName }}
- name: SKYSHIFT_TEMPORAL_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volumes every pod has: a writable home and /tmp (the root filesystem is read-only), and
the Secrets for etcd and Temporal. */}}
{{- define "skyshift.volumes" -}}
- name: home
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- if .Values.etcd.auth.enabled }}
- name: etcd-auth
  secret:
    secretName: {{ required "etcd.auth.passwordSecret" .Values.etcd.auth.passwordSecret }}
    defaultMode: 0440
    items:
      - {key: {{ .Values.etcd.auth.passwordKey }}, path: {{ .Values.etcd.auth.passwordKey }}}
{{- end }}
{{- if .Values.etcd.tls.enabled }}
- name: etcd-tls
  secret:
    secretName: {{ required "etcd.tls.secretName" .Values.etcd.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- if .Values.temporal.tls.enabled }}
- name: temporal-tls
  secret:
    secretName: {{ required "temporal.tls.secretName" .Values.temporal.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "skyshift.volumeMounts" -}}
- {name: home, mountPath: {{ include "skyshift.home" . }}}
- {name: tmp, mountPath: /tmp}
{{- if .Values.etcd.auth.enabled }}
- {name: etcd-auth, mountPath: {{ include "skyshift.etcdAuthDir" . }}, readOnly: true}
{{- end }}
{{- if .Values.etcd.tls.enabled }}
- {name: etcd-tls, mountPath: {{ include "skyshift.etcdTlsDir" . }}, readOnly: true}
{{- end }}
{{- if .Values.temporal.tls.enabled }}
- {name: temporal-tls, mountPath: {{ include "skyshift.temporalTlsDir" . }}, readOnly: true}
{{- end }}
{{- end -}}

{{/* The pod-level fields every Deployment shares. */}}
{{- define "skyshift.podCommon" -}}
serviceAccountName: {{ include "skyshift.fullname" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A worker's readiness: it writes its ready file once it polls its task queues. */}}
{{- define "skyshift.workerProbe" -}}
readinessProbe:
  exec:
    command: [test, -f, {{ include "skyshift.home" . }}/run/ready]
  periodSeconds: 5
  failureThreshold: 3
{{- end -}}

{{- define "skyshift.metricsPort" -}}
{{- if .Values.metrics.port }}
ports:
  - {name: metrics, containerPort: {{ .Values.metrics.port }}, protocol: TCP}
{{- end }}
{{- end -}}
