{{/*
Names fixed by the operator contract: <release>-flowsvc-controller, <release>-flowsvc-ingest.
*/}}
{{- define "flowsvc.fullname" -}}
{{- printf "%s-flowsvc" .Release.Name | trunc 48 | trimSuffix "-" -}}
{{- end -}}

{{- define "flowsvc.controller.name" -}}{{ include "flowsvc.fullname" . }}-controller{{- end -}}
{{- define "flowsvc.ingest.name" -}}{{ include "flowsvc.fullname" . }}-ingest{{- end -}}
{{- define "flowsvc.postgres.name" -}}{{ include "flowsvc.fullname" . }}-postgres{{- end -}}

{{- define "flowsvc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; the component's selector labels come on top. */}}
{{- define "flowsvc.labels" -}}
helm.sh/chart: {{ include "flowsvc.chart" . }}
app.kubernetes.io/name: flowsvc
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of a component: (dict "ctx" $ "component" "controller") */}}
{{- define "flowsvc.selectorLabels" -}}
app.kubernetes.io/name: flowsvc
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "flowsvc.image" -}}
{{- printf "%s/%s:%s" (.ctx.Values.image.registry | trimSuffix "/") .name (.ctx.Values.image.tag | default .ctx.Chart.AppVersion) -}}
{{- end -}}

{{- define "flowsvc.ingestPort" -}}8080{{- end -}}
{{- define "flowsvc.healthPort" -}}8081{{- end -}}

{{/*
ingest's /metrics port (ingest.metrics.port, FLOWSVC_METRICS_PORT): a port of its own, which the
Ingress never routes to. Refuses the ports the chart already uses: ingest's app and the controller's health server.
*/}}
{{- define "flowsvc.ingestMetricsPort" -}}
{{- $port := int .Values.ingest.metrics.port -}}
{{- $taken := dict (include "flowsvc.ingestPort" .) "ingest's app port (http)" (include "flowsvc.healthPort" .) "the controller's health port" -}}
{{- with get $taken (toString $port) -}}
{{- fail (printf "ingest.metrics.port %d is %s: /metrics needs a port of its own (default 9090)" $port .) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{- define "flowsvc.ingestServiceUrl" -}}
{{- printf "http://%s.%s.svc:%s" (include "flowsvc.ingest.name" .) .Release.Namespace (include "flowsvc.ingestPort" .) -}}
{{- end -}}

{{- define "flowsvc.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else if .Values.ingest.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingest.ingress.tls.enabled) .Values.ingest.ingress.host -}}
{{- else -}}
{{- include "flowsvc.ingestServiceUrl" . -}}
{{- end -}}
{{- end -}}

{{- define "flowsvc.initialAdminSecret" -}}
{{- .Values.controller.initialAdmin.secretName | default (printf "%s-initial-admin-token" (include "flowsvc.fullname" .)) -}}
{{- end -}}

{{- define "flowsvc.leaseName" -}}
{{- .Values.controller.leaderElection.leaseName | default (include "flowsvc.controller.name" .) -}}
{{- end -}}

{{/* The Secret and key holding the database URL; fails when there is none. */}}
{{- define "flowsvc.databaseSecret" -}}
{{- if .Values.postgres.existingSecret -}}
{{- .Values.postgres.existingSecret -}}
{{- else if .Values.postgres.url -}}
{{- include "flowsvc.fullname" . }}-database
{{- else if .Values.postgres.demo.enabled -}}
{{- include "flowsvc.postgres.name" . -}}
{{- else -}}
{{- fail "flowsvc needs a Postgres: set postgres.url, postgres.existingSecret (a Secret holding the URL), or postgres.demo.enabled=true to try it out" -}}
{{- end -}}
{{- end -}}

{{- define "flowsvc.databaseSecretKey" -}}
{{- if .Values.postgres.existingSecret -}}{{ .Values.postgres.existingSecretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{/* The Secret and key holding the master key; refuses to render without one unless demo.insecureMasterKey. */}}
{{- define "flowsvc.masterKeySecret" -}}
{{- if .Values.masterKey.existingSecret -}}
{{- .Values.masterKey.existingSecret -}}
{{- else if .Values.demo.insecureMasterKey -}}
{{- include "flowsvc.fullname" . }}-master-key
{{- else -}}
{{- fail "flowsvc needs a master key: create a Secret with one (kubectl create secret generic flowsvc-master-key --from-literal=master-key=\"$(head -c 32 /dev/urandom | base64)\") and set masterKey.existingSecret=flowsvc-master-key, or set demo.insecureMasterKey=true to try the chart out with a generated key" -}}
{{- end -}}
{{- end -}}

{{- define "flowsvc.masterKeySecretKey" -}}
{{- if .Values.masterKey.existingSecret -}}{{ .Values.masterKey.existingSecretKey }}{{- else -}}master-key{{- end -}}
{{- end -}}

{{/* Every refusal, in the order a user meets them: master key, Postgres, RBAC. Renders nothing. */}}
{{- define "flowsvc.validate" -}}
{{- $_ := include "flowsvc.masterKeySecret" . -}}
{{- $_ = include "flowsvc.databaseSecret" . -}}
{{- include "flowsvc.checkRbac" . -}}
{{- end -}}

{{/* The env both deployables read (controller/src/config.ts, ingest/src/config.ts). */}}
{{- define "flowsvc.commonEnv" -}}
{{- include "flowsvc.validate" . -}}
- name: FLOWSVC_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "flowsvc.databaseSecret" . }}
      key: {{ include "flowsvc.databaseSecretKey" . }}
- name: FLOWSVC_MASTER_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "flowsvc.masterKeySecret" . }}
      key: {{ include "flowsvc.masterKeySecretKey" . }}
- name: FLOWSVC_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: FLOWSVC_PUBLIC_URL
  value: {{ include "flowsvc.publicUrl" . | quote }}
- name: FLOWSVC_CONFIG_FILE
  value: /etc/flowsvc/config.json
{{- include "flowsvc.accountsEnv" . }}
{{- end -}}

{{/*
Connected accounts, when connectedAccounts.providersSecret.name is set: the providers JSON (it holds
client secrets) by reference to that Secret, and the redirect URI (default <publicUrl>/oauth/callback),
which must be https: the servers refuse to start otherwise, so the chart refuses to render.
*/}}
{{- define "flowsvc.accountsRedirectUri" -}}
{{- .Values.connectedAccounts.redirectUri | default (printf "%s/oauth/callback" (include "flowsvc.publicUrl" . | trimSuffix "/")) -}}
{{- end -}}

{{- define "flowsvc.accountsEnv" -}}
{{- $s := .Values.connectedAccounts.providersSecret -}}
{{- if $s.name }}
{{- $uri := include "flowsvc.accountsRedirectUri" . -}}
{{- if not (hasPrefix "https://" $uri) -}}
{{- fail (printf "connectedAccounts: the redirect URI %s is not https (providers refuse it, and so does flowsvc): set publicUrl to the https address users reach ingest by, or connectedAccounts.redirectUri" $uri) -}}
{{- end }}
- name: FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS
  valueFrom:
    secretKeyRef:
      name: {{ $s.name }}
      key: {{ $s.key | default "providers.json" }}
- name: FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI
  value: {{ $uri | quote }}
{{- end -}}
{{- end -}}

{{/* Pod-level securityContext: the images' user 10001, never root. */}}
{{- define "flowsvc.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "flowsvc.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The config file's volume and mount, and a scratch /tmp (the root filesystem is read-only). */}}
{{- define "flowsvc.volumes" -}}
- name: config
  configMap:
    name: {{ include "flowsvc.fullname" . }}-config
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "flowsvc.volumeMounts" -}}
- name: config
  mountPath: /etc/flowsvc
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Roles per namespace need the namespaces listed. */}}
{{- define "flowsvc.checkRbac" -}}
{{- if and .Values.rbac.create (not .Values.rbac.clusterWide) (empty .Values.watchNamespaces) -}}
{{- fail "watchNamespaces is [] (every namespace), which needs rbac.clusterWide=true; or list the namespaces to watch for a Role in each" -}}
{{- end -}}
{{- end -}}
