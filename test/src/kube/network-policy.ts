// networking.k8s.io/v1 NetworkPolicy as kube-apiserver v1.32 takes it: the fields of its OpenAPI
// schema (anything else is pruned, or refused under fieldValidation=Strict), then the checks of
// pkg/apis/networking/validation (ValidateNetworkPolicySpec): label selectors, policyTypes, ports
// (protocol, 1-65535 or an IANA name, endPort), peers (one of ipBlock or selectors), and ipBlocks
// (a valid CIDR; each `except` a strict subset of `cidr`, of the same family). Nothing enforces a
// policy here: there is no network between the simulated Pods.
import { isIP, BlockList } from "node:net";
import { rec } from "./object-meta.js";

type Obj = Record<string, unknown>;

export interface Cause {
  field: string;
  message: string;
}

const labelSelectorSchema = {
  type: "object",
  properties: {
    matchLabels: { type: "object", additionalProperties: { type: "string" } },
    matchExpressions: {
      type: "array",
      items: {
        type: "object",
        required: ["key", "operator"],
        properties: { key: { type: "string" }, operator: { type: "string" }, values: { type: "array", items: { type: "string" } } },
      },
    },
  },
};

const portSchema = {
  type: "object",
  properties: { protocol: { type: "string" }, port: { "x-kubernetes-int-or-string": true }, endPort: { type: "integer" } },
};

const peerSchema = {
  type: "object",
  properties: {
    ipBlock: {
      type: "object",
      required: ["cidr"],
      properties: { cidr: { type: "string" }, except: { type: "array", items: { type: "string" } } },
    },
    namespaceSelector: labelSelectorSchema,
    podSelector: labelSelectorSchema,
  },
};

const ruleSchema = (peers: "from" | "to") => ({
  type: "object",
  properties: { ports: { type: "array", items: portSchema }, [peers]: { type: "array", items: peerSchema } },
});

/** io.k8s.api.networking.v1.NetworkPolicy (v1.32: spec only; status went in 1.28). */
export const NETWORK_POLICY_SCHEMA: Obj = {
  type: "object",
  properties: {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: { type: "object" },
    spec: {
      type: "object",
      properties: {
        podSelector: labelSelectorSchema,
        policyTypes: { type: "array", items: { type: "string" } },
        ingress: { type: "array", items: ruleSchema("from") },
        egress: { type: "array", items: ruleSchema("to") },
      },
    },
  },
};

const invalidValue = (field: string, value: unknown, why: string): Cause => ({
  field,
  message: `Invalid value: ${JSON.stringify(value)}: ${why}`,
});

const notSupported = (field: string, value: unknown, supported: string[]): Cause => ({
  field,
  message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported.map((s) => JSON.stringify(s)).join(", ")}`,
});

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** IsQualifiedName: [prefix/]name, the prefix a DNS subdomain, the name at most 63 characters. */
const qualifiedNameProblem = (key: string): string | undefined => {
  const parts = key.split("/");
  const name = parts.at(-1) ?? "";
  if (parts.length > 2)
    return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'";
  if (parts.length === 2 && (!parts[0] || parts[0].length > 253 || !DNS_SUBDOMAIN.test(parts[0])))
    return "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'";
  if (!name || name.length > 63 || !NAME.test(name))
    return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
  return undefined;
};

const labelValueProblem = (value: string): string | undefined =>
  value === "" || (value.length <= 63 && NAME.test(value))
    ? undefined
    : "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

const OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"];

const expressionProblems = (e: Obj, path: string): Cause[] => {
  const causes: Cause[] = [];
  const values = Array.isArray(e.values) ? (e.values as string[]) : [];
  const keyProblem = qualifiedNameProblem(String(e.key));
  if (keyProblem) causes.push(invalidValue(`${path}.key`, e.key, keyProblem));
  if (!OPERATORS.includes(String(e.operator))) causes.push(notSupported(`${path}.operator`, e.operator, OPERATORS));
  else if ((e.operator === "In" || e.operator === "NotIn") && values.length === 0)
    causes.push({ field: `${path}.values`, message: "Required value: must be specified when `operator` is 'In' or 'NotIn'" });
  else if ((e.operator === "Exists" || e.operator === "DoesNotExist") && values.length > 0)
    causes.push({ field: `${path}.values`, message: "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'" });
  values.forEach((v, i) => {
    const p = labelValueProblem(v);
    if (p) causes.push(invalidValue(`${path}.values[${i}]`, v, p));
  });
  return causes;
};

/** ValidateLabelSelector. */
const selectorProblems = (selector: unknown, path: string): Cause[] => {
  const s = rec(selector);
  const causes: Cause[] = [];
  for (const [k, v] of Object.entries(rec(s.matchLabels))) {
    const keyProblem = qualifiedNameProblem(k);
    if (keyProblem) causes.push(invalidValue(`${path}.matchLabels`, k, keyProblem));
    const valueProblem = labelValueProblem(String(v));
    if (valueProblem) causes.push(invalidValue(`${path}.matchLabels`, v, valueProblem));
  }
  const expressions = Array.isArray(s.matchExpressions) ? (s.matchExpressions as Obj[]) : [];
  expressions.forEach((e, i) => causes.push(...expressionProblems(rec(e), `${path}.matchExpressions[${i}]`)));
  return causes;
};

const PORT_RANGE = "must be between 1 and 65535, inclusive";

/** IsValidPortName (an IANA service name). */
const portNameProblem = (name: string): string | undefined => {
  if (name.length > 15) return "must be no more than 15 characters";
  if (!/^[-a-z0-9]+$/.test(name)) return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
  if (!/[a-z]/.test(name)) return "must contain at least one letter (a-z)";
  if (name.includes("--")) return "must not contain consecutive hyphens";
  if (name.startsWith("-") || name.endsWith("-")) return "must not begin or end with a hyphen";
  return undefined;
};

const numericPortProblems = (port: number, endPort: unknown, path: string): Cause[] => {
  const causes: Cause[] = [];
  if (port < 1 || port > 65535) causes.push(invalidValue(`${path}.port`, port, PORT_RANGE));
  if (typeof endPort !== "number") return causes;
  if (endPort < port) causes.push(invalidValue(`${path}.endPort`, port, "must be greater than or equal to `port`"));
  if (endPort < 1 || endPort > 65535) causes.push(invalidValue(`${path}.endPort`, endPort, PORT_RANGE));
  return causes;
};

const PROTOCOLS = ["TCP", "UDP", "SCTP"];

/** ValidateNetworkPolicyPort. */
const portProblems = (port: Obj, path: string): Cause[] => {
  const causes: Cause[] = [];
  if (port.protocol !== undefined && !(typeof port.protocol === "string" && PROTOCOLS.includes(port.protocol)))
    causes.push(notSupported(`${path}.protocol`, port.protocol, PROTOCOLS));
  if (typeof port.port === "number") return [...causes, ...numericPortProblems(port.port, port.endPort, path)];
  if (port.endPort !== undefined) {
    const why =
      port.port === undefined ? "may not be specified when `port` is not specified" : "may not be specified when `port` is non-numeric";
    causes.push(invalidValue(`${path}.endPort`, port.endPort, why));
  }
  const nameProblem = typeof port.port === "string" ? portNameProblem(port.port) : undefined;
  if (nameProblem) causes.push(invalidValue(`${path}.port`, port.port, nameProblem));
  return causes;
};

/** A CIDR as ParseCIDR reads it: address, family (4 or 6) and prefix length, or undefined. */
const parseCidr = (text: string): { address: string; family: 4 | 6; prefix: number } | undefined => {
  const [address = "", prefixText, ...rest] = text.split("/");
  const family = isIP(address) === 4 ? 4 : isIP(address) === 6 ? 6 : 0;
  if (family === 0 || prefixText === undefined || rest.length > 0 || !/^[0-9]{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  return prefix <= (family === 4 ? 32 : 128) ? { address, family, prefix } : undefined;
};

/** ValidateIPBlock: a valid cidr; each except a valid CIDR inside it with a longer prefix. */
const ipBlockProblems = (block: Obj, path: string): Cause[] => {
  if (typeof block.cidr !== "string" || block.cidr === "") return [{ field: `${path}.cidr`, message: "Required value" }];
  const cidr = parseCidr(block.cidr);
  if (!cidr) return [invalidValue(`${path}.cidr`, block.cidr, "not a valid CIDR")];
  const within = new BlockList();
  within.addSubnet(cidr.address, cidr.prefix, cidr.family === 4 ? "ipv4" : "ipv6");
  const excepts = Array.isArray(block.except) ? (block.except as string[]) : [];
  return excepts.flatMap((text, i): Cause[] => {
    const field = `${path}.except[${i}]`;
    const except = parseCidr(text);
    if (!except) return [invalidValue(field, text, "not a valid CIDR")];
    const inside =
      except.family === cidr.family && except.prefix > cidr.prefix && within.check(except.address, cidr.family === 4 ? "ipv4" : "ipv6");
    return inside ? [] : [invalidValue(field, text, "must be a strict subset of `cidr`")];
  });
};

/** ValidateNetworkPolicyPeer: selectors, or an ipBlock alone. */
const peerProblems = (peer: Obj, path: string): Cause[] => {
  const causes: Cause[] = [];
  if (peer.podSelector !== undefined) causes.push(...selectorProblems(peer.podSelector, `${path}.podSelector`));
  if (peer.namespaceSelector !== undefined) causes.push(...selectorProblems(peer.namespaceSelector, `${path}.namespaceSelector`));
  if (peer.ipBlock !== undefined) causes.push(...ipBlockProblems(rec(peer.ipBlock), `${path}.ipBlock`));
  const count = ["podSelector", "namespaceSelector", "ipBlock"].filter((k) => peer[k] !== undefined).length;
  if (count === 0) causes.push({ field: path, message: "Required value: must specify a peer" });
  else if (count > 1 && peer.ipBlock !== undefined)
    causes.push({ field: path, message: "Forbidden: may not specify both ipBlock and another peer" });
  return causes;
};

const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(rec) : []);

const ruleProblems = (rules: unknown, path: string, peers: "from" | "to"): Cause[] =>
  list(rules).flatMap((rule, i) => [
    ...list(rule.ports).flatMap((p, j) => portProblems(p, `${path}[${i}].ports[${j}]`)),
    ...list(rule[peers]).flatMap((p, j) => peerProblems(p, `${path}[${i}].${peers}[${j}]`)),
  ]);

const POLICY_TYPES = ["Ingress", "Egress"];

/** ValidateNetworkPolicySpec, on an object already pruned to the schema's fields and types. */
export const validateNetworkPolicy = (obj: Obj): Cause[] => {
  const spec = rec(obj.spec);
  const causes = [
    ...selectorProblems(spec.podSelector, "spec.podSelector"),
    ...ruleProblems(spec.ingress, "spec.ingress", "from"),
    ...ruleProblems(spec.egress, "spec.egress", "to"),
  ];
  const types = Array.isArray(spec.policyTypes) ? (spec.policyTypes as string[]) : [];
  if (types.length > 2) return [...causes, invalidValue("spec.policyTypes", types, "may not specify more than two policyTypes")];
  types.forEach((t, i) => {
    if (!POLICY_TYPES.includes(t)) causes.push(notSupported(`spec.policyTypes[${i}]`, t, POLICY_TYPES));
  });
  return causes;
};
