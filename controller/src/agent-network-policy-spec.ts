/**
 * The config file's `agentNetworkPolicy`: the networking.k8s.io/v1 NetworkPolicySpec the controller
 * keeps in each namespace it launches agent Pods in (kube/agent-network-policies.ts; the chart
 * renders it from agent.networkPolicy). Checked at start-up as kube-apiserver would check it
 * (strict fields, label selectors, ports, one kind of peer, an ipBlock's except inside its cidr),
 * plus two rules of ours: it selects exactly the agent Pods (AGENT_LABELS) and restricts both
 * directions, so a policy that covers nothing cannot be configured.
 */
import { BlockList } from "node:net";
import { z } from "zod";
import { LABEL_KEY, LABEL_VALUE, intIn, matching } from "./config-rules.js";
import { AGENT_LABELS } from "./kube/pods.js";
import { parseCidr } from "./net/egress-policy.js";

const LabelSelector = z.strictObject({
  matchLabels: z.record(matching(LABEL_KEY, "a label key"), matching(LABEL_VALUE, "a label value")).optional(),
  matchExpressions: z
    .array(
      z
        .strictObject({
          key: matching(LABEL_KEY, "a label key"),
          operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
          values: z.array(matching(LABEL_VALUE, "a label value")).max(256).optional(),
        })
        .check((ctx) => {
          const { operator, values = [] } = ctx.value;
          const listed = operator === "In" || operator === "NotIn";
          if (listed === values.length > 0) return;
          ctx.issues.push({
            code: "custom",
            input: values,
            path: ["values"],
            message: listed ? `are required with operator ${operator}` : `must be empty with operator ${operator}`,
          });
        }),
    )
    .max(64)
    .optional(),
});

/** An IANA service name (a named container port). */
const PORT_NAME = /^(?=.*[a-z])(?!.*--)[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;

const Port = z
  .strictObject({
    protocol: z.enum(["TCP", "UDP", "SCTP"]).optional(),
    port: z.union([intIn(1, 65535), z.string().max(15).regex(PORT_NAME, "must be a port number or an IANA service name")]).optional(),
    endPort: intIn(1, 65535).optional(),
  })
  .check((ctx) => {
    const { port, endPort } = ctx.value;
    if (endPort === undefined || (typeof port === "number" && endPort >= port)) return;
    const message = typeof port === "number" ? "must be at least port" : "needs a numeric port";
    ctx.issues.push({ code: "custom", input: endPort, path: ["endPort"], message });
  });

const Cidr = z
  .string()
  .max(64)
  .check((ctx) => {
    const c = parseCidr(ctx.value, true);
    if (typeof c === "string") ctx.issues.push({ code: "custom", input: ctx.value, message: c });
  });

/** Whether `inner` is a strict subset of `outer` (same family, longer prefix, inside it). */
const within = (outer: string, inner: string): boolean => {
  const o = parseCidr(outer, true);
  const i = parseCidr(inner, true);
  if (typeof o === "string" || typeof i === "string" || o.family !== i.family || i.prefix <= o.prefix) return false;
  const list = new BlockList();
  list.addSubnet(o.net, o.prefix, o.family);
  return list.check(i.net, i.family);
};

const IpBlock = z.strictObject({ cidr: Cidr, except: z.array(Cidr).max(256).optional() }).check((ctx) => {
  const { cidr, except = [] } = ctx.value;
  except.forEach((e, i) => {
    if (!within(cidr, e))
      ctx.issues.push({ code: "custom", input: e, path: ["except", i], message: `must be a strict subset of cidr ${cidr}` });
  });
});

const Peer = z
  .strictObject({ ipBlock: IpBlock.optional(), namespaceSelector: LabelSelector.optional(), podSelector: LabelSelector.optional() })
  .check((ctx) => {
    const { ipBlock, namespaceSelector, podSelector } = ctx.value;
    const selectors = namespaceSelector !== undefined || podSelector !== undefined;
    if (ipBlock !== undefined && selectors)
      ctx.issues.push({ code: "custom", input: ctx.value, message: "may not have both ipBlock and a selector" });
    else if (ipBlock === undefined && !selectors)
      ctx.issues.push({ code: "custom", input: ctx.value, message: "must have ipBlock, namespaceSelector or podSelector" });
  });

const EgressRule = z.strictObject({ to: z.array(Peer).max(256).optional(), ports: z.array(Port).max(256).optional() });
const IngressRule = z.strictObject({ from: z.array(Peer).max(256).optional(), ports: z.array(Port).max(256).optional() });

const SELECTS_AGENTS = `must be {"matchLabels": ${JSON.stringify(AGENT_LABELS)}} (the agent Pods' labels)`;

/** Exactly the agent Pods' labels: no other Pod of a project's namespace is restricted, and no agent Pod is left out. */
const AgentPodSelector = LabelSelector.check((ctx) => {
  const { matchLabels = {}, matchExpressions } = ctx.value;
  const exact =
    matchExpressions === undefined &&
    Object.keys(matchLabels).length === Object.keys(AGENT_LABELS).length &&
    Object.entries(AGENT_LABELS).every(([k, v]) => Object.hasOwn(matchLabels, k) && matchLabels[k] === v);
  if (!exact) ctx.issues.push({ code: "custom", input: ctx.value, message: SELECTS_AGENTS });
});

export const AgentNetworkPolicySpecSchema = z.strictObject({
  podSelector: AgentPodSelector,
  policyTypes: z
    .array(z.enum(["Ingress", "Egress"]))
    .max(2)
    .check((ctx) => {
      if (!ctx.value.includes("Ingress") || !ctx.value.includes("Egress"))
        ctx.issues.push({
          code: "custom",
          input: ctx.value,
          message: "must be Ingress and Egress (a direction not listed is not restricted)",
        });
    }),
  ingress: z.array(IngressRule).max(256).optional(),
  egress: z.array(EgressRule).max(256).optional(),
});

export type AgentNetworkPolicySpec = z.infer<typeof AgentNetworkPolicySpecSchema>;
