import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FlowError } from "@flowsvc/core";
import { loadControllerConfig } from "./config.js";

const KEY = Buffer.alloc(32, 7).toString("base64");
const good = { FLOWSVC_DATABASE_URL: "postgres://u@127.0.0.1:5432/flowsvc", FLOWSVC_MASTER_KEY: KEY };

/** The problems a refused configuration lists (its FlowError("config") details). */
const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    loadControllerConfig(env);
  } catch (err) {
    assert.ok(err instanceof FlowError);
    assert.equal(err.code, "config");
    return err.details?.["problems"] as string[];
  }
  assert.fail("the configuration was accepted");
};

const withConfigFile = (text: string, fn: (path: string) => void): void => {
  const dir = mkdtempSync(join(tmpdir(), "controller-config-"));
  try {
    writeFileSync(join(dir, "config.json"), text);
    fn(join(dir, "config.json"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

void test("defaults: the contract's config file values, health on 8081, info logs", () => {
  const c = loadControllerConfig({ ...good, FLOWSVC_POD_NAME: "ctl-0", FLOWSVC_POD_NAMESPACE: "flowsvc" });
  assert.equal(c.podName, "ctl-0");
  assert.equal(c.podNamespace, "flowsvc");
  assert.equal(c.healthPort, 8081);
  assert.equal(c.logLevel, "info");
  assert.equal(c.masterKey.length, 32);
  assert.equal(c.file.agentServerUrl, "http://flowsvc-ingest:8080");
  assert.deepEqual(c.file.agent.resources, { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "512Mi" } });
  assert.equal(c.file.agent.maxPods, 50);
  assert.equal(c.file.agent.maxPodsPerProject, 10);
  assert.deepEqual(c.file.leaderElection, {
    enabled: true,
    leaseName: "flowsvc-controller",
    leaseDurationSeconds: 15,
    renewDeadlineSeconds: 10,
    retryPeriodSeconds: 2,
  });
});

void test("no master key and no database refuse the start, naming each variable and never echoing a bad key", () => {
  assert.deepEqual(
    problemsOf({}).map((p) => p.split(":")[0]),
    ["FLOWSVC_DATABASE_URL", "FLOWSVC_MASTER_KEY"],
  );
  const secretish = "c2VjcmV0LXRoYXQtaXMtbm90LTMyLWJ5dGVz\u0000";
  const problems = problemsOf({ ...good, FLOWSVC_MASTER_KEY: secretish, FLOWSVC_HEALTH_PORT: "1e99", FLOWSVC_LOG_LEVEL: "loud" });
  assert.ok(problems.some((p) => p.startsWith("FLOWSVC_MASTER_KEY: ")));
  assert.ok(problems.some((p) => p.startsWith("FLOWSVC_HEALTH_PORT: ")));
  assert.ok(problems.some((p) => p.startsWith("FLOWSVC_LOG_LEVEL: ")));
  assert.ok(!problems.join("\n").includes(secretish.slice(0, 12)), "the bad key is not repeated");
});

void test("FLOWSVC_AGENT_LEASE_MS takes decimal digits only, as flow server's --lease-ms", () => {
  assert.equal(loadControllerConfig({ ...good, FLOWSVC_AGENT_LEASE_MS: "4096" }).leaseMs, 4096);
  for (const bad of ["0x1000", "1e4", " 5000 ", "5000.0", "-5000", "1e400", "5000\u0000", "499"])
    assert.ok(
      problemsOf({ ...good, FLOWSVC_AGENT_LEASE_MS: bad }).includes(
        "FLOWSVC_AGENT_LEASE_MS: must be a whole number of milliseconds from 500 to 600000",
      ),
      JSON.stringify(bad),
    );
});

void test("a bad config file names the JSON path of each problem; unknown fields and hostile values are refused", () => {
  withConfigFile(
    JSON.stringify({
      agent: { maxPods: 0, image: "bad image\u0000", capabilityScheduling: { gpu: { nodeSelector: { "a/b/c": "x" } } }, extra: 1 },
      leaderElection: { leaseDurationSeconds: 5, renewDeadlineSeconds: 9 },
      watchNamespaces: ["Team_A"],
    }),
    (path) => {
      const problems = problemsOf({ ...good, FLOWSVC_CONFIG_FILE: path });
      for (const where of [
        "agent.maxPods: ",
        "agent.image: ",
        "agent.capabilityScheduling.gpu.nodeSelector.a/b/c",
        "agent: ",
        "leaderElection.renewDeadlineSeconds: must be less than leaseDurationSeconds",
        "watchNamespaces.0: ",
      ])
        assert.ok(
          problems.some((p) => p.startsWith(where)),
          `${where} in ${problems.join(" | ")}`,
        );
    },
  );
  withConfigFile("{not json", (path) =>
    assert.match(problemsOf({ ...good, FLOWSVC_CONFIG_FILE: path })[0]!, /^FLOWSVC_CONFIG_FILE \(.*\): not JSON/),
  );
  assert.match(problemsOf({ ...good, FLOWSVC_CONFIG_FILE: "/nonexistent/config.json" })[0]!, /cannot read it \(ENOENT\)/);
});

void test("connected-account providers are parsed with the rest: a non-https provider URL refuses the start with every other problem", () => {
  const provider = {
    name: "slack",
    authorize_url: "https://slack.com/oauth/v2/authorize",
    token_url: "http://slack.com/api/oauth.v2.access",
    client_id: "1.2",
    client_secret: "shh-client-secret",
    scopes: ["chat:write"],
    capabilities: { rotates_refresh_token: true, reuse_revokes_family: false },
    identity: { url: "https://slack.com/api/auth.test", id_pointer: "/user_id", label_pointer: "/user" },
  };
  const env = { ...good, FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([provider]), FLOWSVC_LOG_LEVEL: "loud" };
  const problems = problemsOf({ ...env, FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: "https://flow.example.com/oauth/callback" });
  assert.ok(problems.some((p) => p.startsWith("FLOWSVC_LOG_LEVEL: ")));
  assert.ok(problems.some((p) => p.startsWith("FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS[0] (provider slack).token_url: must be https")));
  assert.ok(!problems.join("\n").includes("shh-client-secret"));
  const ok = loadControllerConfig({
    ...good,
    FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([{ ...provider, token_url: "https://slack.com/api/oauth.v2.access" }]),
    FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: "https://flow.example.com/oauth/callback",
  });
  assert.deepEqual([...ok.accounts.providers.keys()], ["slack"]);
  assert.equal(loadControllerConfig(good).accounts.providers.size, 0);
});

void test("http node egress: Kubernetes mode refuses private addresses by default; the two settings are read, a bad one refused with the rest", () => {
  const d = loadControllerConfig(good).httpEgress;
  assert.deepEqual([d.allowPrivate, d.allowCidrs], [false, []]);
  const s = loadControllerConfig({
    ...good,
    FLOWSVC_HTTP_ALLOW_PRIVATE: "true",
    FLOWSVC_HTTP_ALLOW_CIDRS: "10.96.0.0/12,fd00::/8",
  }).httpEgress;
  assert.deepEqual([s.allowPrivate, s.allowCidrs], [true, ["10.96.0.0/12", "fd00::/8"]]);
  assert.deepEqual(
    problemsOf({
      ...good,
      FLOWSVC_LOG_LEVEL: "loud",
      FLOWSVC_HTTP_ALLOW_CIDRS: "10.96.0.0/12,svc-range",
      FLOWSVC_HTTP_ALLOW_PRIVATE: "no",
    }),
    [
      "FLOWSVC_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent",
      'FLOWSVC_HTTP_ALLOW_CIDRS: "svc-range" is not a CIDR (an IPv4 or IPv6 address, then /prefix length)',
      'FLOWSVC_HTTP_ALLOW_PRIVATE: must be true or false, not "no"',
    ],
  );
});

/** The agent NetworkPolicy spec the chart renders by default (helm/flowsvc/templates/_agent-networkpolicy.tpl). */
const AGENT_POLICY = {
  podSelector: { matchLabels: { "app.kubernetes.io/name": "flowsvc-agent", "app.kubernetes.io/managed-by": "flowsvc" } },
  policyTypes: ["Ingress", "Egress"],
  egress: [
    {
      to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
      ports: [
        { protocol: "UDP", port: 53 },
        { protocol: "TCP", port: 53 },
      ],
    },
    {
      to: [
        { ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16", "10.0.0.0/8"] } },
        { ipBlock: { cidr: "::/0", except: ["fe80::/10"] } },
      ],
    },
  ],
};

void test("agentNetworkPolicy: absent means none; a NetworkPolicySpec is taken as given; a hostile one refuses the start, naming each path", () => {
  assert.equal(loadControllerConfig(good).file.agentNetworkPolicy, undefined);
  withConfigFile(JSON.stringify({ agentNetworkPolicy: AGENT_POLICY }), (path) =>
    assert.deepEqual(loadControllerConfig({ ...good, FLOWSVC_CONFIG_FILE: path }).file.agentNetworkPolicy, AGENT_POLICY),
  );
  const [dns, internet] = AGENT_POLICY.egress;
  const hostile = {
    podSelector: { matchLabels: { "app.kubernetes.io/name": "flowsvc-agent" } },
    policyTypes: ["Egress"],
    egress: [
      {
        ...dns,
        ports: [
          { protocol: "ICMP", port: 70000 },
          { port: "http", endPort: 90 },
          { port: 10, endPort: "1e400" },
        ],
      },
      {
        to: [
          { ipBlock: { cidr: "10.0.0.0/8\u0000", except: ["10.1.0.0/16"] } },
          { ipBlock: { cidr: "::/0", except: ["169.254.0.0/16", "::/0"] } },
          { podSelector: { matchLabels: { "LD_PRELOAD\u0000": "x", app: "\ud800" } } },
          {},
          { ipBlock: { cidr: "10.0.0.1" } },
          { ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} },
        ],
        toPorts: [{ port: 53 }],
      },
      internet,
    ],
  };
  // 1e400 as JSON text: an infinite number, not a string
  const text = JSON.stringify({ agentNetworkPolicy: hostile }).replace('"1e400"', "1e400");
  withConfigFile(text, (path) => {
    const problems = problemsOf({ ...good, FLOWSVC_CONFIG_FILE: path });
    for (const where of [
      "agentNetworkPolicy.podSelector: must be",
      "agentNetworkPolicy.policyTypes: must be Ingress and Egress",
      "agentNetworkPolicy.egress.0.ports.0.protocol: ",
      "agentNetworkPolicy.egress.0.ports.0.port: ",
      "agentNetworkPolicy.egress.0.ports.1.endPort: needs a numeric port",
      "agentNetworkPolicy.egress.0.ports.2.endPort: ",
      'agentNetworkPolicy.egress.1.to.0.ipBlock.cidr: "10.0.0.0/8\\u0000" is not a CIDR: the prefix length',
      "agentNetworkPolicy.egress.1.to.1.ipBlock.except.0: must be a strict subset of cidr ::/0",
      "agentNetworkPolicy.egress.1.to.1.ipBlock.except.1: must be a strict subset of cidr ::/0",
      "agentNetworkPolicy.egress.1.to.5: may not have both ipBlock and a selector",
      'agentNetworkPolicy.egress.1.to.2.podSelector.matchLabels."LD_PRELOAD\\u0000": ',
      "agentNetworkPolicy.egress.1.to.2.podSelector.matchLabels.app: must be a label value",
      "agentNetworkPolicy.egress.1.to.3: must have ipBlock, namespaceSelector or podSelector",
      'agentNetworkPolicy.egress.1.to.4.ipBlock.cidr: "10.0.0.1" is not a CIDR',
      'agentNetworkPolicy.egress.1: Unrecognized key: "toPorts"',
    ])
      assert.ok(
        problems.some((p) => p.startsWith(where)),
        `${where} in\n${problems.join("\n")}`,
      );
    assert.ok(!problems.some((p) => p.includes("egress.2")), "the good rule passes");
  });
});

void test("initialAdmin: absent means no admin is made; a Secret name and labels are taken; a hostile Secret name refuses the start", () => {
  assert.equal(loadControllerConfig(good).file.initialAdmin, undefined);
  const given = { secretName: "r-flowsvc-initial-admin-token", labels: { "app.kubernetes.io/instance": "r" } };
  withConfigFile(JSON.stringify({ initialAdmin: given }), (path) =>
    assert.deepEqual(loadControllerConfig({ ...good, FLOWSVC_CONFIG_FILE: path }).file.initialAdmin, { enabled: true, ...given }),
  );
  for (const name of ["a\u0000b", "Admin-Token", "x".repeat(300), "../x", "", "a/b"])
    withConfigFile(JSON.stringify({ initialAdmin: { secretName: name } }), (path) => {
      const problems = problemsOf({ ...good, FLOWSVC_CONFIG_FILE: path });
      assert.ok(
        problems.some((p) => p.startsWith("initialAdmin.secretName: must be a Secret name")),
        `${JSON.stringify(name)}: ${problems.join("\n")}`,
      );
      assert.ok(!problems.some((p) => p.includes("\u0000")), "the NUL is never printed");
    });
  withConfigFile(JSON.stringify({ initialAdmin: { secretName: "s", labels: { "LD_PRELOAD\u0000": "x" }, token: "flw_x" } }), (path) => {
    const problems = problemsOf({ ...good, FLOWSVC_CONFIG_FILE: path });
    assert.ok(
      problems.some((p) => p.startsWith('initialAdmin.labels."LD_PRELOAD\\u0000"')),
      problems.join("\n"),
    );
    assert.ok(
      problems.some((p) => p.startsWith('initialAdmin: Unrecognized key: "token"')),
      problems.join("\n"),
    );
  });
});
