{{/*
The chart's name.
*/}}
{{- define "k8s-container-sp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of everything the chart creates: <release>-<chart>, or <release> when the
release name already contains the chart's name (DCM's charts do the same).
*/}}
{{- define "k8s-container-sp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "k8s-container-sp.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "k8s-container-sp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dcm
{{- end }}

{{/*
What selects the provider's own pods (Deployment, Service, NetworkPolicy, spread,
PodDisruptionBudget). dcm.project/ is a prefix the service refuses in a container's
labels (container.ReservedLabelPrefix), so no tenant pod can carry it and become an
endpoint of the provider's Service or fall under its NetworkPolicy, even in the same
namespace; app.kubernetes.io/* are not used to select, as tenants may set them. The
instance label tells two releases in one namespace apart. deploy/base uses the same
dcm.project/provider label.
*/}}
{{- define "k8s-container-sp.selectorLabels" -}}
dcm.project/provider: k8s-container-sp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "k8s-container-sp.serviceAccountName" -}}
{{- default (include "k8s-container-sp.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/*
The namespace the containers go to (SP_K8S_NAMESPACE), where the Role and the
containers' NetworkPolicies are: one of their own, <release namespace>-containers unless
named.
*/}}
{{- define "k8s-container-sp.targetNamespace" -}}
{{- default (printf "%s-containers" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.namespace }}
{{- end }}

{{/*
DCM's namespace: where its control plane and NATS run (networkPolicy's default peer).
*/}}
{{- define "k8s-container-sp.dcmNamespace" -}}
{{- default .Release.Namespace .Values.dcmNamespace }}
{{- end }}

{{/*
Refuses a layout that puts tenants' containers beside the provider or DCM (unless
allowSharedNamespace), and a provider NetworkPolicy whose default peer would then admit
them. Included by the Deployment, so every render runs it. With kubeconfigRef the
containers run in another cluster: the names cannot clash.
*/}}
{{- define "k8s-container-sp.checkLayout" -}}
{{- $containers := include "k8s-container-sp.targetNamespace" . }}
{{- $dcm := include "k8s-container-sp.dcmNamespace" . }}
{{- $shared := and (not .Values.kubeconfigRef) (or (eq $containers .Release.Namespace) (eq $containers $dcm)) }}
{{- if and $shared (not .Values.allowSharedNamespace) }}
{{- fail (printf "namespace %q is the provider's or DCM's namespace: tenants' containers would run beside the provider and DCM and reach them. Give them a namespace of their own (namespace, default <release namespace>-containers), or set allowSharedNamespace=true to accept it" $containers) }}
{{- end }}
{{- if and $shared .Values.networkPolicy.enabled (not .Values.networkPolicy.from) (eq $containers $dcm) }}
{{- fail (printf "allowSharedNamespace: the containers are in DCM's namespace %q, so networkPolicy's default peer (that namespace) would admit every tenant: set networkPolicy.from to a peer tenants' pods cannot match" $dcm) }}
{{- end }}
{{- if and .Values.createNamespace .Values.kubeconfigRef }}
{{- fail "createNamespace: with kubeconfigRef the containers' namespace is in another cluster; create it there" }}
{{- end }}
{{- end }}

{{- define "k8s-container-sp.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "k8s-container-sp.scheme" -}}
{{- if .Values.tls.secretName }}https{{ else }}http{{ end }}
{{- end }}

{{- define "k8s-container-sp.endpoint" -}}
{{- default (printf "%s://%s.%s.svc:%d" (include "k8s-container-sp.scheme" .) (include "k8s-container-sp.fullname" .) .Release.Namespace (int .Values.service.port)) .Values.spEndpoint }}
{{- end }}

{{/*
Where the provider registers (DCM_REGISTRATION_URL) and publishes (SP_NATS_URL): the
values when set, else derived from DCM's release (dcmRelease) and namespace
(dcmNamespace): today's DCM takes providers' registrations at its environment agent,
<dcmRelease>-environment-agent, and runs NATS as <dcmRelease>-nats. Derived, they are
right only where DCM's chart is installed under that name in that namespace: NOTES.txt
says so (k8s-container-sp.derivedURLs).
*/}}
{{- define "k8s-container-sp.registrationURL" -}}
{{- default (printf "http://%s-environment-agent.%s.svc:8080/api/v1alpha1" .Values.dcmRelease (include "k8s-container-sp.dcmNamespace" .)) .Values.registrationURL }}
{{- end }}

{{- define "k8s-container-sp.natsURL" -}}
{{- default (printf "nats://%s-nats.%s.svc:4222" .Values.dcmRelease (include "k8s-container-sp.dcmNamespace" .)) .Values.natsURL }}
{{- end }}

{{/*
What extraEnv sets variable .name to (called with dict "name" and "Values"), for
NOTES.txt: empty when extraEnv does not name it, else its value ("" quoted when empty),
or "extraEnv's <name> (valueFrom)" when the value comes from elsewhere. extraEnv wins
over the chart's own variables (k8s-container-sp.env); of a name repeated, the last.
*/}}
{{- define "k8s-container-sp.extraEnvValue" -}}
{{- $name := .name }}
{{- $v := "" }}
{{- range .Values.extraEnv }}
{{- if eq .name $name }}
{{- if .valueFrom }}{{ $v = printf "extraEnv's %s (valueFrom)" $name }}{{ else }}{{ $v = .value | default "\"\"" }}{{ end }}
{{- end }}
{{- end }}
{{- $v }}
{{- end }}

{{/*
The URLs the service is given, as NOTES.txt shows them: extraEnv's when it sets the
variable, else the chart's (the value, or derived).
*/}}
{{- define "k8s-container-sp.shownEndpoint" -}}
{{- include "k8s-container-sp.extraEnvValue" (dict "name" "SP_ENDPOINT" "Values" .Values) | default (include "k8s-container-sp.endpoint" .) }}
{{- end }}
{{- define "k8s-container-sp.shownRegistrationURL" -}}
{{- include "k8s-container-sp.extraEnvValue" (dict "name" "DCM_REGISTRATION_URL" "Values" .Values) | default (include "k8s-container-sp.registrationURL" .) }}
{{- end }}
{{- define "k8s-container-sp.shownNATSURL" -}}
{{- include "k8s-container-sp.extraEnvValue" (dict "name" "SP_NATS_URL" "Values" .Values) | default (include "k8s-container-sp.natsURL" .) }}
{{- end }}

{{/*
The URLs NOTES.txt warns are derived, set neither by their value nor by their variable
in extraEnv: "registrationURL", "natsURL", both ("registrationURL and natsURL"), or
empty.
*/}}
{{- define "k8s-container-sp.derivedURLs" -}}
{{- $d := list }}
{{- if not (or .Values.registrationURL (include "k8s-container-sp.extraEnvValue" (dict "name" "DCM_REGISTRATION_URL" "Values" .Values))) }}
{{- $d = append $d "registrationURL" }}
{{- end }}
{{- if not (or .Values.natsURL (include "k8s-container-sp.extraEnvValue" (dict "name" "SP_NATS_URL" "Values" .Values))) }}
{{- $d = append $d "natsURL" }}
{{- end }}
{{- join " and " $d }}
{{- end }}

{{/*
Where the secrets are mounted, and so the files the service is told to read.
*/}}
{{- define "k8s-container-sp.kubeconfigDir" -}}/kubeconfig{{- end }}
{{- define "k8s-container-sp.tokenDir" -}}/etc/k8s-container-sp/token{{- end }}
{{- define "k8s-container-sp.tlsDir" -}}/etc/k8s-container-sp/tls{{- end }}
{{- define "k8s-container-sp.natsDir" -}}/etc/k8s-container-sp/nats{{- end }}

{{/*
The service's environment: the settings the chart derives from its values (each is a
variable of internal/config), then extraEnv; a name in extraEnv replaces the chart's.
*/}}
{{- define "k8s-container-sp.env" -}}
{{- $own := list
  (dict "name" "SP_NAME" "value" .Values.spName)
  (dict "name" "SP_ENDPOINT" "value" (include "k8s-container-sp.endpoint" .))
  (dict "name" "DCM_REGISTRATION_URL" "value" (include "k8s-container-sp.registrationURL" .))
  (dict "name" "SP_NATS_URL" "value" (include "k8s-container-sp.natsURL" .))
  (dict "name" "SP_K8S_NAMESPACE" "value" (include "k8s-container-sp.targetNamespace" .))
  (dict "name" "SP_K8S_EXTERNAL_SVC_TYPE" "value" .Values.externalSvcType)
  (dict "name" "SP_K8S_POD_SECURITY" "value" .Values.podSecurity)
  (dict "name" "SP_MONITOR_IDENTITY" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))
}}
{{- with .Values.spDisplayName }}
{{- $own = append $own (dict "name" "SP_DISPLAY_NAME" "value" .) }}
{{- end }}
{{- if .Values.kubeconfigRef }}
{{- $own = append $own (dict "name" "SP_K8S_KUBECONFIG" "value" (printf "%s/kubeconfig" (include "k8s-container-sp.kubeconfigDir" .))) }}
{{- end }}
{{- if .Values.apiToken.secretName }}
{{- $own = append $own (dict "name" "SP_API_TOKEN_FILE" "value" (printf "%s/%s" (include "k8s-container-sp.tokenDir" .) .Values.apiToken.key)) }}
{{- end }}
{{- if .Values.tls.secretName }}
{{- $own = append $own (dict "name" "SP_SERVER_TLS_CERT_FILE" "value" (printf "%s/tls.crt" (include "k8s-container-sp.tlsDir" .))) }}
{{- $own = append $own (dict "name" "SP_SERVER_TLS_KEY_FILE" "value" (printf "%s/tls.key" (include "k8s-container-sp.tlsDir" .))) }}
{{- end }}
{{- if .Values.natsAuth.secretName }}
{{- $dir := include "k8s-container-sp.natsDir" . }}
{{- range $var, $key := dict "SP_NATS_CREDS_FILE" .Values.natsAuth.credsKey "SP_NATS_NKEY_SEED_FILE" .Values.natsAuth.nkeySeedKey "SP_NATS_TLS_CA_FILE" .Values.natsAuth.caKey "SP_NATS_TLS_CERT_FILE" .Values.natsAuth.certKey "SP_NATS_TLS_KEY_FILE" .Values.natsAuth.keyKey }}
{{- if $key }}
{{- $own = append $own (dict "name" $var "value" (printf "%s/%s" $dir $key)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $extra := dict }}
{{- range .Values.extraEnv }}
{{- $_ := set $extra .name true }}
{{- end }}
{{- $env := list }}
{{- range $own }}
{{- if not (hasKey $extra .name) }}
{{- $env = append $env . }}
{{- end }}
{{- end }}
{{- concat $env .Values.extraEnv | toYaml }}
{{- end }}
