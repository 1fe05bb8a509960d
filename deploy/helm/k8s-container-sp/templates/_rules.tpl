{{/*
The Role's rules: the one place the chart says what the provider may do, in the namespace
its containers go to. Exactly what the service uses (access.Required), the same rules as
deploy/base/role.yaml: tools/devenv/chart's TestRoleRulesMatchKustomize compares them.
*/}}
{{- define "k8s-container-sp.roleRules" -}}
# Containers are Deployments: created, deleted, and read through an informer (list,
# watch). patch: a Deployment held at zero pods until its image resolves is pinned to
# the digest and let run.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# The Service that exposes a container's ports: as for Deployments.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch", "create", "delete"]
# Pods are only read, through an informer: their status is the container's status.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
# ConfigMaps: one per container id (its record, labelled dcm.project/record=container:
# atomic id reservation and the owner of the container's Deployment and Service, its
# finalizer keeping DELETED owed until delivered; no data) and one for electing the
# replica that publishes status events (the <SP_NAME>-status lock). list/watch: the
# records are cached like the containers (only those labelled as records); get: a
# record is read by name where a cache must not decide; patch: its finalizer comes off
# once its DELETED is delivered; delete: a DELETE deletes it; update: the election's
# lock. No configmaps/finalizers: nothing sets blockOwnerDeletion.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
{{- end }}

{{/*
The optional cluster-scoped grant (namespaceReader.enabled), as deploy/base/clusterrole.yaml:
get on the containers' namespace only, for podSecurity "auto".
*/}}
{{- define "k8s-container-sp.namespaceReaderRules" -}}
- apiGroups: [""]
  resources: ["namespaces"]
  resourceNames: [{{ include "k8s-container-sp.targetNamespace" . | quote }}]
  verbs: ["get"]
{{- end }}
