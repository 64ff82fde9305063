{{- /*
The agent Pods' NetworkPolicySpec (agent.networkPolicy), rendered into the controller's config file
as agentNetworkPolicy. The controller is the policy's one owner: before the first agent Pod of a
namespace (the run's project: any namespace when watchNamespaces is []) it makes sure the
NetworkPolicy flowsvc-agent there has exactly this spec (controller/src/kube/agent-network-policies.ts),
so the chart renders no NetworkPolicy object (helm and the controller would revert each other).
It selects the agent Pods by the labels the controller gives them (AGENT_LABELS in
controller/src/kube/pods.ts; the controller refuses to start with any other podSelector).
Policies only add what they allow: a Pod selected by any policy may send only what one of them
allows, so extraEgress can open more, never close.
*/ -}}
{{- define "flowsvc.agentNetworkPolicySpec" -}}
{{- $np := .Values.agent.networkPolicy -}}
{{- /* Always excepted: link-local (the cloud's instance metadata 169.254.169.254, fe80::/10) and
AWS's IPv6 metadata address; unless allowPrivate, the private and CGNAT ranges (the cluster's Pods,
Services and nodes) too; then the operator's exceptCidrs, each by its family. */ -}}
{{- $v4 := list "169.254.0.0/16" -}}
{{- $v6 := list "fe80::/10" "fd00:ec2::254/128" -}}
{{- if not $np.allowPrivate -}}
{{- $v4 = concat $v4 (list "10.0.0.0/8" "172.16.0.0/12" "192.168.0.0/16" "100.64.0.0/10") -}}
{{- $v6 = concat $v6 (list "fc00::/7" "fec0::/10") -}}
{{- end -}}
{{- range $np.exceptCidrs -}}
{{- if contains ":" . -}}
{{- $v6 = append $v6 . -}}
{{- else -}}
{{- $v4 = append $v4 . -}}
{{- end -}}
{{- end -}}
# The agent Pods the controller launches (AGENT_LABELS in controller/src/kube/pods.ts).
podSelector:
  matchLabels:
    app.kubernetes.io/name: flowsvc-agent
    app.kubernetes.io/managed-by: flowsvc
# Ingress with no rule: nothing may connect to an agent Pod (it serves nothing).
policyTypes:
  - Ingress
  - Egress
egress:
  # DNS: the cluster's resolver Pods (agent.networkPolicy.dns).
  - to:
      - namespaceSelector:
          {{- toYaml $np.dns.namespaceSelector | nindent 10 }}
        podSelector:
          {{- toYaml $np.dns.podSelector | nindent 10 }}
    ports:
      - protocol: UDP
        port: 53
      - protocol: TCP
        port: 53
  # ingest's agent API (agentServerUrl: the ingest Service, whose Pods listen on this port).
  - to:
      - namespaceSelector:
          matchLabels:
            kubernetes.io/metadata.name: {{ .Release.Namespace }}
        podSelector:
          matchLabels:
            {{- include "flowsvc.selectorLabels" (dict "ctx" . "component" "ingest") | nindent 12 }}
    ports:
      - protocol: TCP
        port: {{ include "flowsvc.ingestPort" . }}
  # The internet: any address but the excepted ranges.
  - to:
      - ipBlock:
          cidr: 0.0.0.0/0
          except:
            {{- toYaml (uniq $v4) | nindent 12 }}
      - ipBlock:
          cidr: ::/0
          except:
            {{- toYaml (uniq $v6) | nindent 12 }}
  {{- with $np.extraEgress }}
  # The operator's rules (agent.networkPolicy.extraEgress), as given.
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}
