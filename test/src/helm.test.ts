/**
 * The Helm chart helm/flowsvc with the real helm (scripts/fetch-helm.mjs puts it in .tools/) and the
 * real kubectl against the fake API server (test/src/kube/): `helm lint --strict` with the demo flags
 * and with custom values, the refusals (no master key, no Postgres, values the schema refuses), and
 * the rendered objects: the names, images, ports, env, probes and securityContexts of the operator
 * contract (briefs: k8s-contract.md), RBAC verbs exactly as needed, and `kubectl apply` of them.
 * Then the rendered Deployments run: applied to the fake API server with an external Postgres
 * (`postgres.url`), their Pods made from the templates as a ReplicaSet would and run by the kubelet
 * simulator (the images mapped to this checkout's bins; env, Secrets, the downward API and the
 * mounted config file as the Pod spec says), ingest answers its probes, the controller takes the
 * Lease, and a run submitted through that ingest succeeds in an agent Pod, after the controller made
 * the agent NetworkPolicy in the run's namespace from the spec the chart put in its config (its
 * rules: the rendered spec, and the fake API server's NetworkPolicy validation under `kubectl
 * apply`; nothing here enforces a policy, a CNI does).
 */
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-argument, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return --
   rendered manifests are untyped YAML; the assertions are their type checks */
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parseAllDocuments, stringify } from "yaml";
import { BlockList, createServer, isIP } from "node:net";
import { randomBytes } from "node:crypto";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  NetworkingV1Api,
  Watch,
  type V1Pod,
} from "@kubernetes/client-node";
import { ConfigFileSchema } from "@flowsvc/controller";
import { AGENT_LABELS, AGENT_NETWORK_POLICY_LABELS } from "@flowsvc/controller/kube";
import { createTestDatabase, type TestDatabase } from "@flowsvc/store";
import { builtinTypes } from "./kube/resource-types.js";
import { startFakeApiServer, type FakeApiServer } from "./kube/server.js";
import { startKubelet, type Kubelet } from "./kube/kubelet.js";
import { applyCrds } from "./kube/reconcile-harness.js";
import { REPO_ROOT, runFlow } from "./support/server.js";
import { waitFor } from "./support/wait.js";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- rendered manifests

const CHART = join(REPO_ROOT, "helm", "flowsvc");
const ROOT_CRDS = join(REPO_ROOT, "crds");
const DEMO = ["--set", "demo.insecureMasterKey=true", "--set", "postgres.demo.enabled=true"];

let dir: string;
let chart: string;
let helmBin: string;

const runCmd = (file: string, args: string[], env: Record<string, string> = {}): Promise<Run> =>
  new Promise((resolve) => {
    execFile(file, args, { env: { ...process.env, ...env }, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });

const helm = (args: string[]): Promise<Run> =>
  runCmd(helmBin, args, { HELM_CACHE_HOME: join(dir, "cache"), HELM_CONFIG_HOME: join(dir, "config"), HELM_DATA_HOME: join(dir, "data") });

/** A values file (JSON is YAML); the same name always holds the same values. */
const valuesFile = (name: string, values: Obj): string => {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(values));
  return path;
};

const renders = new Map<string, Promise<Obj[]>>();

/** `helm template` of the chart as release `r` in namespace `flowsvc`: its objects (one helm run per set of arguments). */
const render = (args: string[]): Promise<Obj[]> => {
  const key = JSON.stringify(args);
  const cached = renders.get(key);
  if (cached) return cached;
  const objs = helm(["template", "r", chart, "--namespace", "flowsvc", ...args]).then((r) => {
    assert.equal(r.code, 0, r.stderr);
    return parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null);
  });
  renders.set(key, objs);
  return objs;
};

const find = (objs: Obj[], kind: string, name: string, namespace?: string): Obj => {
  const o = objs.find(
    (x) => x.kind === kind && x.metadata.name === name && (namespace === undefined || x.metadata.namespace === namespace),
  );
  assert.ok(o, `no ${kind} ${namespace ?? ""}/${name} in ${objs.map((x) => `${x.kind}/${x.metadata?.name}`).join(", ")}`);
  return o;
};

const CUSTOM = {
  image: { registry: "registry.example.com/platform/", tag: "1.2.3", pullPolicy: "Always" },
  publicUrl: "https://flows.example.com",
  watchNamespaces: ["team-a", "team-b"],
  rbac: { create: true, clusterWide: false },
  postgres: { existingSecret: "pg", existingSecretKey: "dsn" },
  masterKey: { existingSecret: "mk", existingSecretKey: "key" },
  controller: {
    replicas: 3,
    leaderElection: { leaseName: "my-lease", leaseDurationSeconds: 30 },
    initialAdmin: { secretName: "ops-admin-token" },
    httpEgress: { allowCidrs: ["10.20.0.0/16", "fd00:1::/32"], allowPrivate: true },
  },
  ingest: { replicas: 4, ingress: { enabled: true, className: "nginx", host: "flows.example.com", tls: { enabled: true } } },
  agent: {
    image: "registry.example.com/agent@sha256:" + "a".repeat(64),
    capabilities: ["polyglot", "gpu"],
    capabilityScheduling: { gpu: { nodeSelector: { "nvidia.com/gpu": "true" }, tolerations: [{ key: "gpu", operator: "Exists" }] } },
    maxPods: 5,
    networkPolicy: {
      allowPrivate: true,
      exceptCidrs: ["203.0.113.0/24", "2001:db8::/32"],
      // an in-cluster registry, and NodeLocal DNSCache (link-local: only a rule of one's own reaches it)
      extraEgress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "registry" } },
              podSelector: { matchLabels: { app: "zot" } },
            },
          ],
          ports: [{ protocol: "TCP", port: 5000 }],
        },
        { to: [{ ipBlock: { cidr: "169.254.20.10/32" } }], ports: [{ protocol: "UDP", port: 53 }] },
      ],
      dns: {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
        podSelector: { matchLabels: { "k8s-app": null, app: "coredns" } },
      },
    },
  },
  pdb: { enabled: false },
};

before(() => {
  dir = mkdtempSync(join(tmpdir(), "helm-test-"));
  helmBin = join(REPO_ROOT, ".tools", "helm");
  if (!existsSync(helmBin)) execFileSync(process.execPath, [join(REPO_ROOT, "scripts", "fetch-helm.mjs")], { stdio: "inherit" });
  // The chart's crds/ is a link to the generated crds/ at the root; copied with the files it names
  // (none when crds/ is not generated yet).
  chart = join(dir, "flowsvc");
  cpSync(CHART, chart, { recursive: true, filter: (src) => src !== join(CHART, "crds") });
  mkdirSync(join(chart, "crds"));
  if (existsSync(ROOT_CRDS)) cpSync(ROOT_CRDS, join(chart, "crds"), { recursive: true });
});
after(() => rmSync(dir, { recursive: true, force: true }));

test("crds/ is the generated crds/ at the root (a link, so never stale)", () => {
  assert.equal(execFileSync("readlink", [join(CHART, "crds")], { encoding: "utf8" }).trim(), "../../crds");
});

test("helm lint --strict is clean with the demo flags and with custom values", async () => {
  for (const args of [DEMO, ["-f", valuesFile("custom", CUSTOM)]]) {
    const r = await helm(["lint", "--strict", chart, ...args]);
    assert.equal(r.code, 0, `${args.join(" ")}\n${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    assert.doesNotMatch(r.stdout, /\[(WARNING|ERROR)\]/);
  }
});

test("helm template refuses without a master key, without a Postgres, and RBAC that cannot work", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["--set", "postgres.url=postgres://u:p@db/flowsvc"], /needs a master key: .*masterKey\.existingSecret.*demo\.insecureMasterKey=true/],
    [[], /needs a master key/],
    [
      ["--set", "masterKey.existingSecret=mk"],
      /needs a Postgres: set postgres\.url, postgres\.existingSecret .*postgres\.demo\.enabled=true/,
    ],
    [[...DEMO, "--set", "rbac.clusterWide=false"], /watchNamespaces is \[\] \(every namespace\), which needs rbac\.clusterWide=true/],
  ];
  for (const [args, message] of cases) {
    const r = await helm(["template", "r", chart, ...args]);
    assert.notEqual(r.code, 0, args.join(" "));
    assert.match(r.stderr, message, args.join(" "));
    assert.equal(r.stdout, "", "nothing is rendered");
  }
});

/** An agent.networkPolicy.extraEgress rule the schema refuses in five places. */
const HOSTILE_EGRESS_RULE = {
  to: [{ ipBlock: { cidr: "10.0.0.0/8\n" }, podSelector: { matchLabels: { "LD_PRELOAD\u0000": "x" } } }],
  ports: [{ protocol: "ICMP", port: 70000, endPort: Number("1e400") }],
};

test("values the schema refuses: hostile names, URLs, numbers and unknown keys, each named", async () => {
  // helm reports every schema violation at once: one run per file
  const hostile: Array<[Obj, RegExp[]]> = [
    [
      {
        watchNamespaces: ["../kube-system", "a\u0000b", "x".repeat(64)],
        publicUrl: "javascript:alert(1)",
        image: { registry: "ghcr.io/flowsvc", tag: "1.0; rm -rf /", pullPolicy: "IfNotPresent" },
        controller: { replicas: 1e300, initialAdmin: { secretName: "a\u0000b" } },
        agent: {
          maxPods: -1,
          resources: { limits: { cpu: "1\u00a0" } },
          networkPolicy: { extraEgress: [HOSTILE_EGRESS_RULE] },
        },
        postgres: { url: "mysql://x" },
        masterKey: { existingSecret: "Bad_Name" },
        LD_PRELOAD: "/tmp/x.so",
      },
      [
        /watchNamespaces\.0/,
        /watchNamespaces\.1/,
        /watchNamespaces\.2/,
        /publicUrl/,
        /image\.tag/,
        /controller\.replicas/,
        /controller\.initialAdmin\.secretName: Does not match pattern/,
        /agent\.maxPods/,
        /agent\.resources\.limits\.cpu/,
        /agent\.networkPolicy\.extraEgress\.0\.to\.0\.ipBlock\.cidr: Does not match pattern/,
        /agent\.networkPolicy\.extraEgress\.0\.to\.0\.podSelector\.matchLabels: Property name of "LD_PRELOAD." does not match/,
        /agent\.networkPolicy\.extraEgress\.0\.ports\.0\.protocol/,
        /agent\.networkPolicy\.extraEgress\.0\.ports\.0\.port/,
        /agent\.networkPolicy\.extraEgress\.0\.ports\.0\.endPort: Invalid type\. Expected: integer, given: null/,
        /postgres\.url/,
        /masterKey\.existingSecret/,
        /Additional property LD_PRELOAD is not allowed/,
      ],
    ],
    [
      {
        controller: {
          replicas: 0,
          httpEgress: { allowCidrs: ["10.0.0.0/8; rm -rf /"], allowPrivate: "yes" },
          initialAdmin: { enabled: "yes", secretName: "Admin-Token" },
        },
        ingest: { replicas: "2" },
        pdb: { minAvailable: "1%%" },
        agent: {
          networkPolicy: {
            exceptCidrs: ["10.0.0.0/8\u0000", "10.0.0.0/99", "0.0.0.0/0", "169.254.169.254", "fd00::/129"],
            extraEgress: { to: [{ ipBlock: { cidr: "0.0.0.0/0" } }] },
            dns: { podSelector: { matchLabels: { "k8s-app": "kube-dns; rm -rf /" } } },
            allowAll: true,
          },
        },
      },
      [
        /controller\.replicas/,
        /controller\.httpEgress\.allowCidrs\.0/,
        /controller\.httpEgress\.allowPrivate/,
        /controller\.initialAdmin\.enabled: Invalid type/,
        /controller\.initialAdmin\.secretName: Does not match pattern/,
        /ingest\.replicas/,
        /pdb\.minAvailable/,
        /agent\.networkPolicy\.exceptCidrs\.0: Does not match pattern/,
        /agent\.networkPolicy\.exceptCidrs\.1: Does not match pattern/,
        /agent\.networkPolicy\.exceptCidrs\.2: Does not match pattern/,
        /agent\.networkPolicy\.exceptCidrs\.3: Does not match pattern/,
        /agent\.networkPolicy\.exceptCidrs\.4: Does not match pattern/,
        /agent\.networkPolicy\.extraEgress: Invalid type\. Expected: array, given: object/,
        /agent\.networkPolicy\.dns\.podSelector\.matchLabels\.k8s-app: Does not match pattern/,
        /agent\.networkPolicy: Additional property allowAll is not allowed/,
      ],
    ],
    [
      { controller: { initialAdmin: { secretName: "x".repeat(300) } } },
      [/controller\.initialAdmin\.secretName: String length must be less than or equal to 253/],
    ],
    [
      { controller: { initialAdmin: { secretName: "../x", token: "flw_x" } } },
      [
        /controller\.initialAdmin\.secretName: Does not match pattern/,
        /controller\.initialAdmin: Additional property token is not allowed/,
      ],
    ],
    // a lone surrogate cannot even be read
    [{ agent: { image: "\ud800" } }, [/invalid Unicode/]],
  ];
  for (const [i, [values, messages]] of hostile.entries()) {
    const r = await helm(["template", "r", chart, ...DEMO, "-f", valuesFile(`bad-${i}`, values)]);
    assert.notEqual(r.code, 0, JSON.stringify(values));
    assert.equal(r.stdout, "");
    for (const m of messages) assert.match(r.stderr, m);
  }
});

test("every rendered object parses and is named, once", async () => {
  const objs = await render(DEMO);
  for (const o of objs) {
    assert.ok(o.apiVersion && o.kind && o.metadata?.name, JSON.stringify(o).slice(0, 200));
    assert.ok(o.metadata.name.length <= 63 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(o.metadata.name), o.metadata.name);
  }
  const keys = objs.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`);
  assert.equal(new Set(keys).size, keys.length, "no object is rendered twice");
});

test("the Deployments run the contract's images, ports and probes, the Service and PDBs select them", async () => {
  const objs = await render(DEMO);
  const controller = find(objs, "Deployment", "r-flowsvc-controller", "flowsvc");
  const ingest = find(objs, "Deployment", "r-flowsvc-ingest", "flowsvc");
  assert.equal(controller.spec.replicas, 2);
  assert.equal(ingest.spec.replicas, 2);
  const c = controller.spec.template.spec.containers[0];
  const i = ingest.spec.template.spec.containers[0];
  assert.equal(c.image, "ghcr.io/flowsvc/controller:0.1.0");
  assert.equal(i.image, "ghcr.io/flowsvc/ingest:0.1.0");
  // no command: the image's entrypoint runs (tini -- node /opt/flowsvc/<part>/dist/main.js; images.test.ts)
  assert.deepEqual([c.command, c.args, i.command, i.args], [undefined, undefined, undefined, undefined]);
  assert.deepEqual(c.ports, [{ name: "health", containerPort: 8081, protocol: "TCP" }]);
  assert.deepEqual(i.ports, [
    { name: "http", containerPort: 8080, protocol: "TCP" },
    { name: "metrics", containerPort: 9090, protocol: "TCP" },
  ]);
  for (const [container, port] of [
    [c, "health"],
    [i, "http"],
  ] as const) {
    assert.deepEqual(container.livenessProbe.httpGet, { path: "/healthz", port });
    assert.deepEqual(container.readinessProbe.httpGet, { path: "/readyz", port });
    assert.ok(container.resources.requests.cpu && container.resources.limits.memory);
  }
  const svc = find(objs, "Service", "r-flowsvc-ingest", "flowsvc");
  assert.deepEqual(svc.spec.ports, [
    { name: "http", port: 8080, targetPort: "http", protocol: "TCP" },
    { name: "metrics", port: 9090, targetPort: "metrics", protocol: "TCP" },
  ]);
  assert.deepEqual(svc.spec.selector, ingest.spec.selector.matchLabels);
  assert.notDeepEqual(controller.spec.selector.matchLabels, ingest.spec.selector.matchLabels);
  for (const name of ["r-flowsvc-controller", "r-flowsvc-ingest"]) {
    const pdb = find(objs, "PodDisruptionBudget", name, "flowsvc");
    assert.equal(pdb.spec.minAvailable, 1);
  }
  find(objs, "StatefulSet", "r-flowsvc-postgres", "flowsvc");
  assert.equal(objs.filter((o) => o.kind === "Ingress").length, 0, "no Ingress unless enabled");
});

test("ingest.metrics.port: ingest's env, containerPort and Service port named metrics; the Ingress still routes to http only", async () => {
  const objs = await render(["-f", valuesFile("metrics-port", { ...CUSTOM, ingest: { ...CUSTOM.ingest, metrics: { port: 9100 } } })]);
  const i = find(objs, "Deployment", "r-flowsvc-ingest", "flowsvc").spec.template.spec.containers[0];
  assert.deepEqual(
    (i.env as Obj[]).find((e) => e.name === "FLOWSVC_METRICS_PORT"),
    { name: "FLOWSVC_METRICS_PORT", value: "9100" },
  );
  assert.deepEqual(
    i.ports.find((p: Obj) => p.name === "metrics"),
    { name: "metrics", containerPort: 9100, protocol: "TCP" },
  );
  assert.deepEqual(
    find(objs, "Service", "r-flowsvc-ingest", "flowsvc").spec.ports.find((p: Obj) => p.name === "metrics"),
    { name: "metrics", port: 9100, targetPort: "metrics", protocol: "TCP" },
  );
  const ingress = find(objs, "Ingress", "r-flowsvc-ingest", "flowsvc");
  const backends = (ingress.spec.rules as Obj[]).flatMap((r) => (r.http.paths as Obj[]).map((p) => p.backend.service));
  assert.ok(backends.length > 0);
  for (const b of backends)
    assert.deepEqual(b, { name: "r-flowsvc-ingest", port: { name: "http" } }, "the Ingress never routes to the metrics port");
});

test("ingest.metrics.port: the ports the chart already uses are refused with a message, and what is not a port by the schema", async () => {
  const cases: Array<[unknown, RegExp]> = [
    [8080, /ingest\.metrics\.port 8080 is ingest's app port \(http\): \/metrics needs a port of its own/],
    [8081, /ingest\.metrics\.port 8081 is the controller's health port: \/metrics needs a port of its own/],
    [0, /ingest\.metrics\.port/],
    [70000, /ingest\.metrics\.port/],
    ["9090", /ingest\.metrics\.port/],
    [9090.5, /ingest\.metrics\.port/],
  ];
  for (const [port, message] of cases) {
    const r = await helm([
      "template",
      "r",
      chart,
      ...DEMO,
      "-f",
      valuesFile(`metrics-port-${String(port)}`, { ingest: { metrics: { port } } }),
    ]);
    assert.notEqual(r.code, 0, JSON.stringify(port));
    assert.match(r.stderr, message, JSON.stringify(port));
    assert.equal(r.stdout, "", "nothing is rendered");
  }
});

test("the Deployments' env: the contract's variables, the downward API, Secrets by reference, the config file mounted", async () => {
  const objs = await render(DEMO);
  const controller = find(objs, "Deployment", "r-flowsvc-controller", "flowsvc");
  const ingest = find(objs, "Deployment", "r-flowsvc-ingest", "flowsvc");
  /** name -> env entry; a missing name fails the test on access. */
  const env = (d: Obj): Obj => Object.fromEntries((d.spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name as string, e]));
  const ce = env(controller);
  const ie = env(ingest);
  assert.deepEqual(ce.FLOWSVC_POD_NAME.valueFrom, { fieldRef: { fieldPath: "metadata.name" } });
  assert.deepEqual(ce.FLOWSVC_POD_NAMESPACE.valueFrom, { fieldRef: { fieldPath: "metadata.namespace" } });
  assert.equal(ce.FLOWSVC_HEALTH_PORT.value, "8081");
  assert.equal(ie.FLOWSVC_HOST.value, "0.0.0.0");
  assert.equal(ie.FLOWSVC_PORT.value, "8080");
  assert.equal(ie.FLOWSVC_METRICS_PORT.value, "9090");
  assert.equal(ce.FLOWSVC_METRICS_PORT, undefined, "the controller's metrics are on its health port");
  for (const e of [ce, ie]) {
    assert.deepEqual(e.FLOWSVC_DATABASE_URL.valueFrom, { secretKeyRef: { name: "r-flowsvc-postgres", key: "url" } });
    assert.deepEqual(e.FLOWSVC_MASTER_KEY.valueFrom, { secretKeyRef: { name: "r-flowsvc-master-key", key: "master-key" } });
    assert.equal(e.FLOWSVC_CONFIG_FILE.value, "/etc/flowsvc/config.json");
    assert.equal(e.FLOWSVC_LOG_LEVEL.value, "info");
    assert.equal(e.FLOWSVC_PUBLIC_URL.value, "http://r-flowsvc-ingest.flowsvc.svc:8080");
    for (const v of Object.values(e) as Obj[])
      assert.ok(v.value === undefined || !/postgres:\/\//.test(String(v.value)), "no URL with a password in env");
  }
  for (const d of [controller, ingest]) {
    const pod = d.spec.template.spec;
    assert.deepEqual(
      pod.containers[0].volumeMounts.find((m: Obj) => m.name === "config"),
      {
        name: "config",
        mountPath: "/etc/flowsvc",
        readOnly: true,
      },
    );
    assert.deepEqual(pod.volumes.find((v: Obj) => v.name === "config").configMap, { name: "r-flowsvc-config" });
  }
});

test("http egress: the controller alone gets FLOWSVC_HTTP_ALLOW_PRIVATE (false by default) and the operator's CIDRs, comma-separated", async () => {
  const envOf = (objs: Obj[], name: string): Obj =>
    Object.fromEntries(
      (find(objs, "Deployment", name, "flowsvc").spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name as string, e]),
    );
  const byDefault = await render(DEMO);
  const c = envOf(byDefault, "r-flowsvc-controller");
  assert.deepEqual([c.FLOWSVC_HTTP_ALLOW_PRIVATE?.value, c.FLOWSVC_HTTP_ALLOW_CIDRS], ["false", undefined]);
  const custom = envOf(await render(["-f", valuesFile("custom", CUSTOM)]), "r-flowsvc-controller");
  assert.deepEqual(
    [custom.FLOWSVC_HTTP_ALLOW_PRIVATE?.value, custom.FLOWSVC_HTTP_ALLOW_CIDRS?.value],
    ["true", "10.20.0.0/16,fd00:1::/32"],
  );
  const ingest = envOf(byDefault, "r-flowsvc-ingest");
  assert.deepEqual(
    [ingest.FLOWSVC_HTTP_ALLOW_PRIVATE, ingest.FLOWSVC_HTTP_ALLOW_CIDRS],
    [undefined, undefined],
    "ingest runs no http node",
  );
});

/** The config file the ConfigMap holds. */
const configOf = (objs: Obj[]): Obj => JSON.parse(find(objs, "ConfigMap", "r-flowsvc-config").data["config.json"] as string) as Obj;

/** The agent NetworkPolicySpec of a render (in the controller's config), or undefined. */
const agentPolicySpec = (objs: Obj[]): Obj | undefined => configOf(objs).agentNetworkPolicy as Obj | undefined;

/** Whether `cidr` (a.b.c.d/n or an IPv6 one) holds `ip`; another family never does. */
const holds = (cidr: string, ip: string): boolean => {
  const [net = "", prefix = ""] = cidr.split("/");
  if (isIP(net) !== isIP(ip)) return false;
  const family = isIP(ip) === 4 ? "ipv4" : "ipv6";
  const list = new BlockList();
  list.addSubnet(net, Number(prefix), family);
  return list.check(ip, family);
};

/** Whether an egress rule of `spec` lets an agent Pod send to address `ip` (on some port), as a CNI reads ipBlock's cidr and except. */
const reaches = (spec: Obj, ip: string): boolean =>
  (spec.egress as Obj[]).some(
    (rule) =>
      rule.to === undefined ||
      (rule.to as Obj[]).some(
        (peer) =>
          peer.ipBlock && holds(peer.ipBlock.cidr as string, ip) && !((peer.ipBlock.except ?? []) as string[]).some((e) => holds(e, ip)),
      ),
  );

const METADATA = ["169.254.169.254", "169.254.0.1", "fd00:ec2::254", "fe80::1"];
const PRIVATE = ["10.96.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.10", "fd12:3456::1"];
const PUBLIC = ["8.8.8.8", "140.82.112.3", "172.32.0.1", "100.128.0.1", "2606:4700::1111"];

test("agent NetworkPolicy by default: in the controller's config, not an object; the agent labels, no ingress; DNS, ingest's port, and the internet but link-local, metadata and private ranges", async () => {
  const objs = await render(DEMO);
  assert.deepEqual(
    objs.filter((o) => o.kind === "NetworkPolicy"),
    [],
    "the controller owns the policy: the chart renders none",
  );
  const np = agentPolicySpec(objs)!;
  assert.deepEqual(np.podSelector, { matchLabels: AGENT_LABELS }, "exactly the labels the controller puts on agent Pods");
  assert.deepEqual(np.policyTypes, ["Ingress", "Egress"]);
  assert.equal(np.ingress, undefined, "no ingress rule: nothing may connect to an agent Pod");
  const [dns, ingest, internet, ...more] = np.egress as Obj[];
  assert.deepEqual(more, []);
  assert.deepEqual(dns, {
    to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
    ports: [
      { protocol: "UDP", port: 53 },
      { protocol: "TCP", port: 53 },
    ],
  });
  const ingestPods = find(objs, "Deployment", "r-flowsvc-ingest", "flowsvc").spec;
  assert.deepEqual(ingest, {
    to: [
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "flowsvc" } },
        podSelector: { matchLabels: ingestPods.selector.matchLabels },
      },
    ],
    ports: [{ protocol: "TCP", port: ingestPods.template.spec.containers[0].ports[0].containerPort }],
  });
  assert.equal(internet!.ports, undefined, "the internet on any port");
  assert.deepEqual(internet!.to, [
    { ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"] } },
    { ipBlock: { cidr: "::/0", except: ["fe80::/10", "fd00:ec2::254/128", "fc00::/7", "fec0::/10"] } },
  ]);
  for (const ip of [...METADATA, ...PRIVATE]) assert.equal(reaches(np, ip), false, `${ip} is not reached`);
  for (const ip of PUBLIC) assert.equal(reaches(np, ip), true, `${ip} is reached`);
  // The controller's own check of its config takes it as rendered.
  assert.deepEqual(ConfigFileSchema.parse(configOf(objs)).agentNetworkPolicy, np);
});

test("agent NetworkPolicy: allowPrivate opens private ranges, never metadata; exceptCidrs, extraEgress, dns; off when disabled", async () => {
  const objs = await render(["-f", valuesFile("custom", CUSTOM)]);
  assert.deepEqual(
    objs.filter((o) => o.kind === "NetworkPolicy"),
    [],
    "none in the watched namespaces either",
  );
  const np = agentPolicySpec(objs)!;
  assert.deepEqual(ConfigFileSchema.parse(configOf(objs)).agentNetworkPolicy, np);
  assert.deepEqual(np.podSelector, { matchLabels: AGENT_LABELS });
  for (const ip of PRIVATE) assert.equal(reaches(np, ip), true, `allowPrivate: ${ip} is reached`);
  for (const ip of [...METADATA, "203.0.113.7", "2001:db8::1"]) assert.equal(reaches(np, ip), false, `${ip} is not reached`);
  assert.equal(reaches(np, "169.254.20.10"), true, "NodeLocal DNSCache by the operator's own rule");
  const [dns, ingest, , ...extra] = np.egress as Obj[];
  assert.deepEqual(
    dns!.to,
    [
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
        podSelector: { matchLabels: { app: "coredns" } },
      },
    ],
    "a null drops a default label",
  );
  assert.equal(
    ingest!.to[0].namespaceSelector.matchLabels["kubernetes.io/metadata.name"],
    "flowsvc",
    "ingest runs in the release's namespace",
  );
  assert.deepEqual(extra, CUSTOM.agent.networkPolicy.extraEgress, "extraEgress as given, after the chart's rules");
  const off = await render([...DEMO, "--set", "agent.networkPolicy.enabled=false"]);
  assert.equal(agentPolicySpec(off), undefined, "disabled: none in the config, so the controller reads and writes none");
  assert.deepEqual(
    off.filter((o) => o.kind === "NetworkPolicy"),
    [],
  );
});

test("connected accounts: off by default; the providers JSON from a Secret by reference in both Deployments, the redirect from publicUrl", async () => {
  const envOf = (objs: Obj[], name: string): Obj =>
    Object.fromEntries(
      (find(objs, "Deployment", name, "flowsvc").spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name as string, e]),
    );
  const DEPLOYMENTS = ["r-flowsvc-controller", "r-flowsvc-ingest"];
  const off = await render(DEMO);
  for (const d of DEPLOYMENTS) {
    const e = envOf(off, d);
    assert.equal(e.FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS, undefined, `${d}: no providers unless configured`);
    assert.equal(e.FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI, undefined);
  }
  const on = await render([
    ...DEMO,
    "--set",
    "publicUrl=https://flows.example.com/",
    "--set",
    "connectedAccounts.providersSecret.name=oauth-providers",
  ]);
  const custom = await render([
    ...DEMO,
    "-f",
    valuesFile("accounts", {
      connectedAccounts: { providersSecret: { name: "p", key: "gh.json" }, redirectUri: "https://login.example.com/oauth/callback" },
    }),
  ]);
  for (const d of DEPLOYMENTS) {
    const e = envOf(on, d);
    assert.deepEqual(e.FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS, {
      name: "FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS",
      valueFrom: { secretKeyRef: { name: "oauth-providers", key: "providers.json" } },
    });
    assert.equal(e.FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI.value, "https://flows.example.com/oauth/callback");
    const c = envOf(custom, d);
    assert.deepEqual(c.FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS.valueFrom, { secretKeyRef: { name: "p", key: "gh.json" } });
    assert.equal(c.FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI.value, "https://login.example.com/oauth/callback");
  }
  assert.equal(
    on.filter((o) => o.kind === "Secret" && o.metadata.name === "oauth-providers").length,
    0,
    "the chart never makes that Secret",
  );
});

test("connected accounts: a redirect URI that is not https, inline providers, bad Secret names are refused; no client secret echoed", async () => {
  // The in-cluster default publicUrl is http: the servers would refuse to start, so the chart refuses to render.
  const http = await helm([
    "template",
    "r",
    chart,
    "--namespace",
    "flowsvc",
    ...DEMO,
    "--set",
    "connectedAccounts.providersSecret.name=oauth-providers",
  ]);
  assert.notEqual(http.code, 0);
  assert.match(
    http.stderr,
    /connectedAccounts: the redirect URI http:\/\/r-flowsvc-ingest\.flowsvc\.svc:8080\/oauth\/callback is not https/,
  );
  assert.equal(http.stdout, "");
  // Inline providers (client secrets in values) are not a value; names and URIs are checked.
  const bad = await helm([
    "template",
    "r",
    chart,
    ...DEMO,
    "-f",
    valuesFile("accounts-bad", {
      connectedAccounts: {
        providers: [{ name: "github", client_secret: "s3cret" }],
        providersSecret: { name: "Bad_Name", key: "a/b" },
        redirectUri: "http://flows.example.com/oauth/callback",
      },
    }),
  ]);
  assert.notEqual(bad.code, 0);
  for (const m of [
    /Additional property providers is not allowed/,
    /connectedAccounts\.providersSecret\.name/,
    /connectedAccounts\.providersSecret\.key/,
    /connectedAccounts\.redirectUri/,
  ])
    assert.match(bad.stderr, m);
  assert.doesNotMatch(bad.stderr + bad.stdout, /s3cret/, "a client secret is never echoed");
});

test("securityContexts: non-root 10001, read-only root, no privilege escalation, all capabilities dropped", async () => {
  for (const d of (await render(DEMO)).filter((o) => o.kind === "Deployment")) {
    const pod = d.spec.template.spec;
    assert.deepEqual(pod.securityContext, {
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      fsGroup: 10001,
      seccompProfile: { type: "RuntimeDefault" },
    });
    assert.deepEqual(pod.containers[0].securityContext, {
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      privileged: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    assert.deepEqual(pod.containers[0].volumeMounts.find((m: Obj) => m.mountPath === "/tmp")?.name, "tmp", "a writable /tmp");
  }
});

test("the ConfigMap holds the contract's config file: the defaults, then custom values", async () => {
  const config = configOf;
  const { agentNetworkPolicy, initialAdmin, ...byDefault } = config(await render(DEMO));
  assert.ok(agentNetworkPolicy, "the agent NetworkPolicy's spec (checked above)");
  // The bootstrap admin's Secret: the chart's name and labels (controller/src/initial-admin.ts).
  assert.deepEqual(initialAdmin, {
    enabled: true,
    secretName: "r-flowsvc-initial-admin-token",
    labels: {
      "helm.sh/chart": "flowsvc-0.1.0",
      "app.kubernetes.io/name": "flowsvc",
      "app.kubernetes.io/instance": "r",
      "app.kubernetes.io/version": "0.1.0",
      "app.kubernetes.io/managed-by": "Helm",
    },
  });
  assert.deepEqual(byDefault, {
    watchNamespaces: [],
    agentServerUrl: "http://r-flowsvc-ingest.flowsvc.svc:8080",
    agent: {
      image: "ghcr.io/flowsvc/agent:0.1.0",
      imagePullPolicy: "IfNotPresent",
      resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "512Mi" } },
      capabilities: ["polyglot"],
      capabilityScheduling: { gpu: { nodeSelector: {}, tolerations: [] } },
      maxPods: 50,
      maxPodsPerProject: 10,
      pendingTimeoutSeconds: 120,
    },
    runTtlSecondsAfterFinished: 3600,
    leaderElection: {
      enabled: true,
      leaseName: "r-flowsvc-controller",
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
    },
  });
  const objs = await render(["-f", valuesFile("custom", CUSTOM)]);
  const custom = config(objs);
  assert.deepEqual(custom.watchNamespaces, ["team-a", "team-b"]);
  assert.equal(custom.agent.image, CUSTOM.agent.image);
  assert.equal(custom.agent.imagePullPolicy, "Always");
  assert.deepEqual(custom.agent.capabilityScheduling, CUSTOM.agent.capabilityScheduling);
  assert.equal(custom.agent.maxPods, 5);
  assert.deepEqual(custom.leaderElection, { ...custom.leaderElection, leaseName: "my-lease", leaseDurationSeconds: 30 });
  assert.equal(custom.initialAdmin.secretName, "ops-admin-token");
  const off = config(await render([...DEMO, "--set", "controller.initialAdmin.enabled=false"]));
  assert.equal(off.initialAdmin, undefined, "disabled: the controller makes no admin");
  const c = find(objs, "Deployment", "r-flowsvc-controller").spec.template.spec.containers[0];
  assert.equal(c.image, "registry.example.com/platform/controller:1.2.3");
  const env = new Map((c.env as Obj[]).map((e) => [e.name as string, e]));
  assert.deepEqual(env.get("FLOWSVC_DATABASE_URL")?.valueFrom, { secretKeyRef: { name: "pg", key: "dsn" } });
  assert.deepEqual(env.get("FLOWSVC_MASTER_KEY")?.valueFrom, { secretKeyRef: { name: "mk", key: "key" } });
  assert.equal(env.get("FLOWSVC_PUBLIC_URL")?.value, "https://flows.example.com");
  assert.equal(objs.filter((o) => o.kind === "Secret").length, 0, "existing Secrets: the chart renders none");
  assert.equal(objs.filter((o) => o.kind === "PodDisruptionBudget").length, 0);
  const ingress = find(objs, "Ingress", "r-flowsvc-ingest");
  assert.deepEqual(ingress.spec.tls, [{ hosts: ["flows.example.com"], secretName: "r-flowsvc-ingest-tls" }]);
  assert.deepEqual(ingress.spec.rules[0].http.paths[0].backend, { service: { name: "r-flowsvc-ingest", port: { name: "http" } } });
});

test("a postgres.url is kept in a Secret; the generated master key is 32 random bytes, base64", async () => {
  const objs = await render(["--set", "postgres.url=postgres://u:p%40ss@db:5432/flowsvc", "--set", "demo.insecureMasterKey=true"]);
  const db = find(objs, "Secret", "r-flowsvc-database");
  assert.equal(Buffer.from(db.data.url as string, "base64").toString(), "postgres://u:p%40ss@db:5432/flowsvc");
  const key = Buffer.from(find(objs, "Secret", "r-flowsvc-master-key").data["master-key"] as string, "base64").toString();
  assert.equal(Buffer.from(key, "base64").length, 32);
  assert.equal(Buffer.from(key, "base64").toString("base64"), key);
  assert.equal(objs.filter((o) => o.kind === "StatefulSet").length, 0, "no demo Postgres with an external one");
});

test("RBAC: exactly the verbs each component needs, cluster-wide or a Role per watched namespace", async () => {
  const kinds = ["flowhandlers", "floweventhooks", "flowsecrets", "flowcredentials", "flowgraphs", "flowruns"];
  const controllerRules = [
    { apiGroups: ["flowsvc.io"], resources: kinds, verbs: ["get", "list", "watch", "create", "update", "patch", "delete"] },
    { apiGroups: ["flowsvc.io"], resources: kinds.map((k) => `${k}/status`), verbs: ["get", "update", "patch"] },
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "create", "delete"] },
    { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch", "create", "delete"] },
    { apiGroups: [""], resources: ["events"], verbs: ["create"] },
    // The agent NetworkPolicy (agent.networkPolicy.enabled): made, read and put back; never listed, patched or deleted.
    { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["create"] },
    { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], resourceNames: ["flowsvc-agent"], verbs: ["get", "update"] },
  ];
  const ingestRules = [{ apiGroups: ["flowsvc.io"], resources: kinds, verbs: ["get", "create", "update", "patch", "delete"] }];
  const wide = await render(DEMO);
  assert.deepEqual(find(wide, "ClusterRole", "r-flowsvc-controller").rules, controllerRules);
  assert.deepEqual(find(wide, "ClusterRole", "r-flowsvc-ingest").rules, ingestRules);
  assert.deepEqual(find(wide, "ClusterRole", "r-flowsvc-controller-namespaces").rules, [
    { apiGroups: [""], resources: ["namespaces"], verbs: ["get", "list", "watch"] },
  ]);
  assert.deepEqual(find(wide, "Role", "r-flowsvc-controller-leader-election", "flowsvc").rules, [
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      resourceNames: ["r-flowsvc-controller"],
      verbs: ["get", "update", "patch"],
    },
  ]);
  // The initial admin token's Secret, in the release's namespace only (watchNamespaces' Roles may not cover it).
  const initialAdminRules = (name: string) => [
    { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
    { apiGroups: [""], resources: ["secrets"], resourceNames: [name], verbs: ["get", "update"] },
  ];
  assert.deepEqual(
    find(wide, "Role", "r-flowsvc-controller-initial-admin", "flowsvc").rules,
    initialAdminRules("r-flowsvc-initial-admin-token"),
  );
  assert.deepEqual(find(wide, "RoleBinding", "r-flowsvc-controller-initial-admin", "flowsvc").subjects, [
    { kind: "ServiceAccount", name: "r-flowsvc-controller", namespace: "flowsvc" },
  ]);
  const binding = find(wide, "ClusterRoleBinding", "r-flowsvc-ingest");
  assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: "r-flowsvc-ingest", namespace: "flowsvc" }]);
  assert.deepEqual(binding.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "r-flowsvc-ingest" });
  find(wide, "ServiceAccount", "r-flowsvc-controller", "flowsvc");

  const scoped = await render(["-f", valuesFile("custom", CUSTOM)]);
  for (const ns of CUSTOM.watchNamespaces) {
    assert.deepEqual(find(scoped, "Role", "r-flowsvc-controller", ns).rules, controllerRules);
    assert.deepEqual(find(scoped, "Role", "r-flowsvc-ingest", ns).rules, ingestRules);
    assert.deepEqual(find(scoped, "RoleBinding", "r-flowsvc-controller", ns).subjects, [
      { kind: "ServiceAccount", name: "r-flowsvc-controller", namespace: "flowsvc" },
    ]);
  }
  assert.deepEqual(
    scoped.filter((o) => o.kind === "ClusterRole").map((o) => o.metadata.name),
    ["r-flowsvc-controller-namespaces"],
    "no cluster-wide access to pods, secrets or flowsvc kinds",
  );
  assert.equal(find(scoped, "Role", "r-flowsvc-controller-leader-election").rules[1].resourceNames[0], "my-lease");
  assert.deepEqual(find(scoped, "Role", "r-flowsvc-controller-initial-admin", "flowsvc").rules, initialAdminRules("ops-admin-token"));
  for (const o of [...wide, ...scoped].filter((x) => /Role$/.test(x.kind as string))) {
    for (const rule of o.rules as Obj[])
      assert.ok(![...rule.verbs, ...rule.resources, ...rule.apiGroups].includes("*"), `no wildcard in ${o.metadata.name}`);
  }
  const noPolicy = await render([...DEMO, "--set", "agent.networkPolicy.enabled=false"]);
  assert.deepEqual(
    find(noPolicy, "ClusterRole", "r-flowsvc-controller").rules,
    controllerRules.slice(0, -2),
    "no policy: no access to one",
  );
  const noAdmin = await render([...DEMO, "--set", "controller.initialAdmin.enabled=false"]);
  assert.ok(!noAdmin.some((o) => /initial-admin/.test(o.metadata.name as string)), "no initial admin: no Role for its Secret");
  const none = await render([...DEMO, "--set", "rbac.create=false"]);
  assert.equal(none.filter((o) => /Role/.test(o.kind as string)).length, 0);
});

/**
 * The agent NetworkPolicySpecs the chart renders (by default, and with the custom values), as the
 * controller makes them in a namespace (flowsvc-agent), pass the API's checks under `kubectl apply
 * --validate=strict` and are stored as rendered (nothing pruned); the hostile ones the API refuses
 * are refused.
 */
const agentPoliciesServed = async (kubectl: (args: string[]) => Promise<Run>, ok: (args: string[]) => Promise<string>): Promise<void> => {
  const specs: Record<string, Obj> = {
    flowsvc: agentPolicySpec(await render(DEMO))!,
    "team-a": agentPolicySpec(await render(["-f", valuesFile("custom", CUSTOM)]))!,
  };
  const file = join(dir, "agent-netpol.yaml");
  writeFileSync(
    file,
    Object.entries(specs)
      .map(([namespace, spec]) =>
        stringify({
          apiVersion: "networking.k8s.io/v1",
          kind: "NetworkPolicy",
          metadata: { name: "flowsvc-agent", namespace, labels: AGENT_NETWORK_POLICY_LABELS },
          spec,
        }),
      )
      .join("---\n"),
  );
  await ok(["apply", "--validate=strict", "-f", file]);
  const policies = JSON.parse(await ok(["get", "networkpolicies", "--all-namespaces", "-o", "json"])) as Obj;
  assert.deepEqual(policies.items.map((o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`).sort(), [
    "flowsvc/flowsvc-agent",
    "team-a/flowsvc-agent",
  ]);
  for (const o of policies.items as Obj[]) assert.deepEqual(o.spec, specs[o.metadata.namespace as string], o.metadata.namespace as string);
  // What the API refuses in a NetworkPolicy: an except outside its cidr (an IPv4 range under ::/0),
  // a field it does not know (--validate=strict), a bad port and protocol, an ipBlock with a selector.
  const policy = (name: string, egress: Obj[]): Obj => ({
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name, namespace: "team-a" },
    spec: { podSelector: {}, policyTypes: ["Egress"], egress },
  });
  const hostile = join(dir, "hostile-netpol.yaml");
  writeFileSync(
    hostile,
    [
      policy("family", [{ to: [{ ipBlock: { cidr: "::/0", except: ["169.254.0.0/16"] } }] }]),
      policy("unknown", [{ toPorts: [{ port: 53 }] }]),
      policy("ports", [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }], ports: [{ protocol: "ICMP", port: 70000 }] }]),
    ]
      .map((o) => stringify(o))
      .join("---\n"),
  );
  const refused = await kubectl(["apply", "--validate=strict", "-f", hostile]);
  assert.notEqual(refused.code, 0);
  for (const m of [
    /"family" is invalid: spec\.egress\[0\]\.to\[0\]\.ipBlock\.except\[0\]: Invalid value: "169\.254\.0\.0\/16": must be a strict subset of `cidr`/,
    /strict decoding error: unknown field "spec\.egress\[0\]\.toPorts"/,
    /spec\.egress\[0\]\.ports\[0\]\.protocol: Unsupported value: "ICMP"/,
    /spec\.egress\[0\]\.ports\[0\]\.port: Invalid value: 70000: must be between 1 and 65535, inclusive/,
    /spec\.egress\[0\]\.to\[0\]: Forbidden: may not specify both ipBlock and another peer/,
  ])
    assert.match(refused.stderr, m);
  assert.equal(JSON.parse(await ok(["get", "networkpolicies", "-n", "team-a", "-o", "json"])).items.length, 1, "none of them stored");
};

test("kubectl apply of the rendered objects to the API server (validated against its OpenAPI) creates them; NOTES.txt prints the next commands", async () => {
  const api: FakeApiServer = await startFakeApiServer();
  try {
    const kubectl = (args: string[]): Promise<Run> =>
      runCmd("kubectl", ["--kubeconfig", api.kubeconfigPath, "--cache-dir", join(dir, "kube-cache"), ...args]);
    const ok = async (args: string[]): Promise<string> => {
      const r = await kubectl(args);
      assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    const crds = readdirSync(join(chart, "crds")).filter((f) => /\.ya?ml$/.test(f));
    for (const f of crds) await ok(["apply", "-f", join(chart, "crds", f)]);
    const namespaces = ["flowsvc", ...CUSTOM.watchNamespaces].map((name) => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name },
    }));
    // The kinds this API server serves; RBAC and StatefulSets it does not (checked above from the render).
    const served = new Set(builtinTypes().map((t) => `${t.group ? `${t.group}/` : ""}${t.version}/${t.kind}`));
    const objs = [...(await render(DEMO)), ...(await render(["-f", valuesFile("custom", CUSTOM), "--set", "pdb.enabled=true"]))];
    const applied = objs.filter((o) => served.has(`${o.apiVersion}/${o.kind}`));
    assert.ok(applied.length >= 10, `applied ${applied.length}`);
    const file = join(dir, "rendered.yaml");
    writeFileSync(file, [...namespaces, ...applied].map((o) => stringify(o)).join("---\n"));
    const out = await ok(["apply", "--validate=strict", "-f", file]);
    assert.match(out, /deployment\.apps\/r-flowsvc-controller (created|configured)/);
    const deployments = JSON.parse(await ok(["get", "deployments", "-n", "flowsvc", "-o", "json"])) as Obj;
    assert.deepEqual(deployments.items.map((d: Obj) => d.metadata.name).sort(), ["r-flowsvc-controller", "r-flowsvc-ingest"]);
    const cm = JSON.parse(await ok(["get", "configmap", "r-flowsvc-config", "-n", "flowsvc", "-o", "json"])) as Obj;
    assert.deepEqual(JSON.parse(cm.data["config.json"] as string).watchNamespaces, ["team-a", "team-b"]);
    await agentPoliciesServed(kubectl, ok);

    // The example manifests of the README, against the generated CRDs (when crds/ is generated).
    if (crds.length > 0) {
      const examples = join(REPO_ROOT, "examples", "k8s");
      const namespaced = ["-n", "team-a"];
      for (const f of ["handler.yaml", "event-hook.yaml", "secret.yaml"])
        await ok(["apply", "--validate=strict", ...namespaced, "-f", join(examples, f)]);
      assert.match(
        await ok(["create", "--validate=strict", ...namespaced, "-f", join(examples, "run.yaml")]),
        /flowrun\.flowsvc\.io\/hello-\S+ created/,
      );
      const all = await ok(["get", "flowsvc", ...namespaced]);
      for (const name of ["flowhandler.flowsvc.io/announce-deploy", "floweventhook.flowsvc.io/ci", "flowsecret.flowsvc.io/slack-token"])
        assert.ok(all.includes(name), `${name} in\n${all}`);
    }

    // NOTES.txt, as `helm install` prints it. A client-side dry run still maps every kind through the
    // server's discovery: without RBAC and the demo StatefulSet, which this server does not serve, in a
    // namespace of its own (helm refuses to adopt the objects applied above).
    const install = ["install", "r", chart, "--namespace", "notes", "--dry-run=client", "--disable-openapi-validation"];
    const values = ["--set", "demo.insecureMasterKey=true", "--set", "postgres.url=postgres://u@db/f", "--set", "rbac.create=false"];
    const r = await helm([...install, ...values, "--kubeconfig", api.kubeconfigPath]);
    assert.equal(r.code, 0, r.stderr);
    const notes = r.stdout.slice(r.stdout.indexOf("NOTES:"));
    for (const line of [
      "kubectl -n notes rollout status deployment/r-flowsvc-controller",
      "kubectl get flowsvc --all-namespaces",
      "kubectl -n demo create -f examples/k8s/run.yaml",
      "kubectl -n demo get flowruns -w",
      "(every namespace is watched)",
      "kubectl -n notes port-forward service/r-flowsvc-ingest 8080:8080",
      "helm uninstall r -n notes",
      "Agent Pods' network: before the first agent Pod of a namespace, the controller creates the",
      "kubectl delete networkpolicy -A -l app.kubernetes.io/managed-by=flowsvc",
      // the bootstrap admin's token: read it, log in with it, delete the Secret; the recovery command
      "TOKEN=$(kubectl -n notes get secret r-flowsvc-initial-admin-token -o jsonpath='{.data.token}' | base64 -d)",
      'flow login --url http://127.0.0.1:8080 --token "$TOKEN" --project default/demo',
      "kubectl -n notes delete secret r-flowsvc-initial-admin-token",
      "kubectl -n notes exec deploy/r-flowsvc-controller -- node /opt/flowsvc/controller/dist/main.js admin-token",
    ])
      assert.ok(notes.includes(line), `NOTES.txt: ${line}\n${notes}`);
    assert.match(notes, /WARNING: demo\.insecureMasterKey/);
    assert.doesNotMatch(notes, /WARNING: watchNamespaces/, "every namespace watched: the controller covers each with the policy");
  } finally {
    await api.close();
  }
});

/** A port nothing listens on now. */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

/** GET on 127.0.0.1: the status, or 0 when nothing answers. */
const probe = (port: number, path: string): Promise<number> =>
  fetch(`http://127.0.0.1:${port}${path}`).then(
    (r) => r.status,
    () => 0,
  );

/** The token in the chart's initial admin Secret (release r in flowsvc), checked against what the controller logged. */
const initialAdminToken = async (core: CoreV1Api, controllerLog: string): Promise<string> => {
  const secret = await core.readNamespacedSecret({ name: "r-flowsvc-initial-admin-token", namespace: "flowsvc" });
  assert.equal(secret.type, "Opaque");
  assert.equal(secret.metadata?.labels?.["app.kubernetes.io/instance"], "r");
  const token = Buffer.from(secret.data?.["token"] ?? "", "base64").toString("utf8");
  assert.match(token, /^flw_[A-Za-z0-9_-]{43}$/);
  assert.match(controllerLog, /made the user admin; its token is in Secret flowsvc\/r-flowsvc-initial-admin-token/);
  assert.ok(!controllerLog.includes(token), "the token is in no log line");
  return token;
};

/**
 * A Pod as a ReplicaSet makes it from a Deployment's template. All Pods here share the host's
 * network (the kubelet simulator has no network namespaces), so each port variable gets a free
 * port instead of the chart's fixed 8080/8081; nothing else of the template changes.
 */
const podFromTemplate = (deployment: Obj, ports: Record<string, number>): V1Pod => {
  const template = structuredClone(deployment.spec.template) as Obj;
  for (const c of template.spec.containers as Obj[])
    for (const e of (c.env ?? []) as Obj[]) if (ports[e.name as string] !== undefined) e.value = String(ports[e.name as string]);
  const pod: V1Pod = {
    metadata: { name: `${deployment.metadata.name}-${randomBytes(4).toString("hex")}`, labels: template.metadata.labels },
    spec: template.spec,
  };
  return pod;
};

test("the rendered controller and ingest Deployments, started from their Pod specs with an external Postgres, run a submitted run in a Pod", async () => {
  const api = await startFakeApiServer({ namespaces: ["default", "kube-system", "flowsvc", "demo"] });
  let kubelet: Kubelet | undefined;
  let db: TestDatabase | undefined;
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    await applyCrds(kc.makeApiClient(CustomObjectsApi));
    db = await createTestDatabase();
    // The install of the README: the master key in a Secret of one's own, Postgres by URL.
    await core.createNamespacedSecret({
      namespace: "flowsvc",
      body: { metadata: { name: "flowsvc-master-key" }, stringData: { "master-key": randomBytes(32).toString("base64") } },
    });
    const [ingestPort, healthPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const ingestUrl = `http://127.0.0.1:${ingestPort}`;
    const agentImage = "ghcr.io/flowsvc/agent:chart-run";
    const values = {
      postgres: { url: db.url },
      masterKey: { existingSecret: "flowsvc-master-key" },
      agentServerUrl: ingestUrl,
      publicUrl: ingestUrl,
      agent: { image: agentImage },
    };
    const objs = await render(["-f", valuesFile("external-pg", values)]);
    const served = new Set(builtinTypes().map((t) => `${t.group ? `${t.group}/` : ""}${t.version}/${t.kind}`));
    const file = join(dir, "external-pg.yaml");
    writeFileSync(
      file,
      objs
        .filter((o) => served.has(`${o.apiVersion}/${o.kind}`))
        .map((o) => stringify(o))
        .join("---\n"),
    );
    const applied = await runCmd("kubectl", [
      "--kubeconfig",
      api.kubeconfigPath,
      "--cache-dir",
      join(dir, "kube-cache-run"),
      "apply",
      "-f",
      file,
    ]);
    assert.equal(applied.code, 0, applied.stderr);

    // The images' entrypoints (tini -- node /opt/flowsvc/<part>/dist/main.js, images.test.ts) are this checkout's bins.
    const apps = kc.makeApiClient(AppsV1Api);
    const deployment = async (name: string) => (await apps.readNamespacedDeployment({ name, namespace: "flowsvc" })) as Obj;
    const [controller, ingest] = [await deployment("r-flowsvc-controller"), await deployment("r-flowsvc-ingest")];
    const bin = (part: string) => [process.execPath, join(REPO_ROOT, part, "dist", "main.js")];
    const agentMain = join(dirname(fileURLToPath(import.meta.resolve("@flowsvc/agent"))), "main.js");
    kubelet = await startKubelet({
      kubeconfigPath: api.kubeconfigPath,
      images: {
        [controller.spec.template.spec.containers[0].image as string]: bin("controller"),
        [ingest.spec.template.spec.containers[0].image as string]: bin("ingest"),
        [agentImage]: [process.execPath, agentMain],
      },
      // In a cluster the API comes from the ServiceAccount mount (automountServiceAccountToken: true).
      baseEnv: { KUBECONFIG: api.kubeconfigPath },
    });
    const ingestPod = await core.createNamespacedPod({
      namespace: "flowsvc",
      body: podFromTemplate(ingest, { FLOWSVC_PORT: ingestPort, FLOWSVC_METRICS_PORT: metricsPort }),
    });
    const controllerPod = await core.createNamespacedPod({
      namespace: "flowsvc",
      body: podFromTemplate(controller, { FLOWSVC_HEALTH_PORT: healthPort }),
    });
    const story = () =>
      [ingestPod, controllerPod].map((p) => `${p.metadata!.name}:\n${kubelet!.logs("flowsvc", p.metadata!.name!)}`).join("\n");

    // The probes of the Pod specs answer: ingest's /healthz and /readyz, the controller's /healthz.
    await waitFor("ingest ready", async () => (await probe(ingestPort, "/readyz")) === 200, 30_000).catch((e: Error) =>
      assert.fail(`${e.message}\n${story()}`),
    );
    assert.equal(await probe(ingestPort, "/healthz"), 200);
    // /metrics on the metrics port only, not on the port the Ingress routes to.
    assert.deepEqual([await probe(ingestPort, "/metrics"), await probe(metricsPort, "/metrics")], [404, 200]);
    await waitFor("controller healthy", async () => (await probe(healthPort, "/healthz")) === 200, 30_000);
    // The controller takes the Lease the chart names, as its Pod (the downward API's metadata.name).
    const leases = kc.makeApiClient(CoordinationV1Api);
    await waitFor(
      "the controller to hold the Lease",
      async () =>
        (await leases.readNamespacedLease({ name: "r-flowsvc-controller", namespace: "flowsvc" }).catch(() => undefined))?.spec
          ?.holderIdentity === controllerPod.metadata!.name,
      30_000,
    ).catch((e: Error) => assert.fail(`${e.message}\n${story()}`));
    // Its first start made the user admin and put its token in the Secret the chart names (NOTES.txt's
    // kubectl line reads it); the token is in no line the controller printed.
    const adminToken = await initialAdminToken(core, kubelet.logs("flowsvc", controllerPod.metadata!.name!));

    // The README's example handler makes the project demo (org default); a run submitted through ingest succeeds in a Pod.
    const handler = await runCmd("kubectl", [
      "--kubeconfig",
      api.kubeconfigPath,
      "--cache-dir",
      join(dir, "kube-cache-run"),
      "apply",
      "-n",
      "demo",
      "-f",
      join(REPO_ROOT, "examples", "k8s", "handler.yaml"),
    ]);
    assert.equal(handler.code, 0, handler.stderr);
    const env = {
      FLOWSVC_URL: ingestUrl,
      FLOWSVC_TOKEN: adminToken,
      FLOWSVC_PROJECT: "default/demo",
      FLOWSVC_CONFIG: join(dir, "cli-run.json"),
    };
    await waitFor("the project demo", async () => (await runFlow(["handler", "list"], env)).code === 0, 30_000);
    const script = join(dir, "hello-chart.sh");
    writeFileSync(script, 'echo "hello from agent $FLOW_AGENT_ID"\n');
    // The agent Pods as made (the controller deletes each when it ends: it may be gone before it is read).
    const agentPods: V1Pod[] = [];
    const watch = await new Watch(kc).watch(
      "/api/v1/namespaces/demo/pods",
      {},
      (type: string, pod: V1Pod) => void (type === "ADDED" && agentPods.push(pod)),
      () => undefined,
    );
    const submitted = await runFlow(["submit", script, "--follow"], env).finally(() => watch.abort());
    assert.equal(submitted.code, 0, `${submitted.stdout}${submitted.stderr}\n${story()}`);
    const runId = /run-[a-z0-9]+/.exec(submitted.stderr)?.[0];
    assert.ok(runId, submitted.stderr);
    // The agent ran in the job's Pod (named by the job id) in the project's namespace.
    const { rows } = await db.pool.query<{ id: string }>(`select id from jobs where run_id = $1`, [runId]);
    const jobId = rows[0]!.id;
    assert.match(submitted.stdout, /^hello from agent \S+$/m);
    await waitFor("the agent's Pod to finish", () => /agent done/.test(kubelet!.logs("demo", jobId)));
    // Before that Pod, the controller made the agent NetworkPolicy in demo, with the spec the chart
    // put in its config; it selects the Pod (each label of its podSelector is on it).
    const requests = api.requests.map((r) => `${r.method} ${r.path.split("?")[0]} ${r.status}`);
    const made = requests.indexOf("POST /apis/networking.k8s.io/v1/namespaces/demo/networkpolicies 201");
    const podMade = requests.indexOf("POST /api/v1/namespaces/demo/pods 201");
    assert.ok(made >= 0 && podMade > made, `the policy before the Pod:\n${requests.filter((l) => /demo/.test(l)).join("\n")}`);
    const policy = (await kc
      .makeApiClient(NetworkingV1Api)
      .readNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "demo" })) as Obj;
    assert.deepEqual(policy.metadata.labels, AGENT_NETWORK_POLICY_LABELS);
    assert.deepEqual(JSON.parse(JSON.stringify(policy.spec)), agentPolicySpec(objs));
    const agentLabels = agentPods.find((p) => p.metadata?.name === jobId)?.metadata?.labels ?? {};
    assert.ok(Object.keys(agentLabels).length > 0, `the agent Pod ${jobId} was seen`);
    for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels as Record<string, string>))
      assert.equal(agentLabels[k], v, `the agent Pod's label ${k}`);
  } finally {
    await kubelet?.stop();
    await db?.drop();
    await api.close();
  }
});

test("the chart's version and appVersion are the repository's", () => {
  const chartYaml = readFileSync(join(CHART, "Chart.yaml"), "utf8");
  const version = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
  assert.match(chartYaml, new RegExp(`^appVersion: "${version.replaceAll(".", "\\.")}"$`, "m"));
});
