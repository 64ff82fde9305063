// The controller's agent NetworkPolicy (controller/src/kube/agent-network-policies.ts) against the
// fake API server, which checks a NetworkPolicy as kube-apiserver does: made when absent with the
// configured spec and labels, a check holding for AGENT_NETWORK_POLICY_RECHECK_MS (a moved clock),
// a policy deleted or loosened while the controller runs made again or put back by the first check
// after that, an operator's edit put back (their own labels kept), a spec the server stored with its defaults left alone, two
// replicas at once converging, and RBAC's 403 refused with the namespace and the fix, checked
// again after it. (The launcher's part, no Pod without it: launcher.test.ts; the chart's: helm.test.ts.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { KubeConfig, NetworkingV1Api, type V1NetworkPolicy } from "@kubernetes/client-node";
import { AgentNetworkPolicySpecSchema, type AgentNetworkPolicySpec } from "@flowsvc/controller";
import {
  AGENT_LABELS,
  AGENT_NETWORK_POLICY_LABELS,
  AGENT_NETWORK_POLICY_NAME,
  AGENT_NETWORK_POLICY_RECHECK_MS,
  AgentNetworkPolicies,
  AgentNetworkPolicyError,
} from "@flowsvc/controller/kube";
import { startFakeApiServer, type FakeApiServer } from "./server.js";

/** A spec as the chart renders it (in short), one port without a protocol (the server's default is TCP). */
const SPEC: AgentNetworkPolicySpec = AgentNetworkPolicySpecSchema.parse({
  podSelector: { matchLabels: AGENT_LABELS },
  policyTypes: ["Ingress", "Egress"],
  egress: [
    {
      to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
      ports: [{ protocol: "UDP", port: 53 }, { port: 53 }],
    },
    { to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16", "10.0.0.0/8"] } }] },
  ],
});

const NAMESPACES = ["team-a", "team-b", "team-c", "team-d", "team-e"];
let api: FakeApiServer;
let networking: NetworkingV1Api;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
/** A controller process's policies; `clock.ms` is its time. */
const policies = (clock = { ms: 0 }): AgentNetworkPolicies =>
  new AgentNetworkPolicies({ networking, spec: SPEC, logger: silent, now: () => clock.ms });

/** The NetworkPolicy requests served in a namespace since `from` (an index into api.requests): "GET 404", "POST 201", ... */
const requestsIn = (namespace: string, from: number): string[] =>
  api.requests
    .slice(from)
    .filter((r) => r.path.startsWith(`/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`))
    .map((r) => `${r.method} ${r.status}`);

const read = (namespace: string): Promise<V1NetworkPolicy> => networking.readNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace });

/** As JSON has it (client-node's objects carry undefined fields). */
const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v)) as unknown;

/** The object as stored, without the server's metadata. */
const stored = async (namespace: string) => {
  const p = await read(namespace);
  return { labels: p.metadata?.labels, spec: plain(p.spec) };
};

before(async () => {
  api = await startFakeApiServer({ namespaces: ["default", ...NAMESPACES] });
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  networking = kc.makeApiClient(NetworkingV1Api);
});
after(async () => {
  await api?.close();
});

describe("the agent NetworkPolicy", () => {
  test("absent: created with the configured spec and our labels; concurrent launches share the check, which holds for the recheck bound", async () => {
    const from = api.requests.length;
    const p = policies();
    await Promise.all([p.ensure("team-a"), p.ensure("team-a")]);
    assert.deepEqual(requestsIn("team-a", from), ["GET 404", "POST 201"], "one read and one create");
    assert.equal(AGENT_NETWORK_POLICY_NAME, "flowsvc-agent");
    assert.deepEqual(await stored("team-a"), { labels: AGENT_NETWORK_POLICY_LABELS, spec: plain(SPEC) });
    const again = api.requests.length;
    await p.ensure("team-a");
    assert.deepEqual(requestsIn("team-a", again), [], "nothing read or written the second time");
  });

  test("deleted or loosened while the controller runs: made again, or its spec put back, at the first launch after the recheck bound", async () => {
    const clock = { ms: 1_000_000 };
    const p = policies(clock);
    await p.ensure("team-e");
    await networking.deleteNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-e" }); // the README's cleanup line
    let from = api.requests.length;
    clock.ms += AGENT_NETWORK_POLICY_RECHECK_MS - 1;
    await p.ensure("team-e");
    assert.deepEqual(requestsIn("team-e", from), [], "within the bound: not read");
    clock.ms += 1;
    await Promise.all([p.ensure("team-e"), p.ensure("team-e")]);
    assert.deepEqual(requestsIn("team-e", from), ["GET 404", "POST 201"], "after it: read and made again, once");
    assert.deepEqual(await stored("team-e"), { labels: AGENT_NETWORK_POLICY_LABELS, spec: plain(SPEC) });

    const loosened = await read("team-e"); // a kubectl edit that lets every Pod reach everything
    loosened.spec = { podSelector: {}, policyTypes: ["Egress"], egress: [{}] };
    await networking.replaceNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-e", body: loosened });
    from = api.requests.length;
    clock.ms += AGENT_NETWORK_POLICY_RECHECK_MS;
    await p.ensure("team-e");
    assert.deepEqual(requestsIn("team-e", from), ["GET 200", "PUT 200"]);
    assert.deepEqual((await stored("team-e")).spec, plain(SPEC));
    from = api.requests.length;
    clock.ms += AGENT_NETWORK_POLICY_RECHECK_MS;
    await p.ensure("team-e");
    assert.deepEqual(requestsIn("team-e", from), ["GET 200"], "as configured: read, not written");
  });

  test("an operator's edit is put back by the next check (here a new process), their labels kept; a spec the server defaulted is left alone", async () => {
    await policies().ensure("team-b");
    const edited = await read("team-b");
    edited.metadata!.labels = { team: "platform" }; // ours removed too
    edited.spec = { podSelector: {}, policyTypes: ["Egress"], egress: [{}] }; // everything, for every Pod
    await networking.replaceNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-b", body: edited });
    let from = api.requests.length;
    await policies().ensure("team-b"); // a new controller process
    assert.deepEqual(requestsIn("team-b", from), ["GET 200", "PUT 200"]);
    assert.deepEqual(await stored("team-b"), {
      labels: { team: "platform", ...AGENT_NETWORK_POLICY_LABELS },
      spec: plain(SPEC),
    });
    // As kube-apiserver stores it: the protocol defaulted, empty lists left out. The same policy: not written.
    const defaulted = await read("team-b");
    defaulted.spec!.egress![0]!.ports![1]!.protocol = "TCP";
    defaulted.spec!.ingress = [];
    await networking.replaceNamespacedNetworkPolicy({ name: "flowsvc-agent", namespace: "team-b", body: defaulted });
    from = api.requests.length;
    await policies().ensure("team-b");
    assert.deepEqual(requestsIn("team-b", from), ["GET 200"]);
  });

  test("two replicas at once converge on one policy without a fight", async () => {
    const from = api.requests.length;
    await Promise.all([policies().ensure("team-d"), policies().ensure("team-d")]);
    assert.deepEqual((await stored("team-d")).spec, plain(SPEC));
    const seen = requestsIn("team-d", from);
    assert.equal(seen.filter((r) => r === "POST 201").length, 1, seen.join(", "));
    assert.ok(!seen.some((r) => r.startsWith("PUT")), seen.join(", "));
    assert.ok(seen.length <= 6, `a read, maybe a lost create and a read again, each: ${seen.join(", ")}`);
  });

  test("refused by RBAC (403): rejected naming the namespace, the API's message and the fix; checked again after the grant", async () => {
    const p = policies();
    api.forbid((a) => a.resource === "networkpolicies" && a.namespace === "team-c" && a.verb === "create");
    try {
      const from = api.requests.length;
      const refused = await p.ensure("team-c").then(
        () => assert.fail("ensured without create"),
        (err: unknown) => err,
      );
      assert.ok(refused instanceof AgentNetworkPolicyError);
      assert.equal(refused.namespace, "team-c");
      assert.match(
        refused.message,
        /^the agent NetworkPolicy flowsvc-agent could not be ensured in namespace team-c \(403: networkpolicies\.networking\.k8s\.io is forbidden: User "system:serviceaccount:flowsvc:flowsvc-controller" cannot create resource "networkpolicies" in API group "networking\.k8s\.io" in the namespace "team-c"\), so no agent Pod is made there: give the controller get, create and update on networkpolicies/,
      );
      assert.deepEqual(requestsIn("team-c", from), ["GET 404", "POST 403"]);
      // A read refused too: the same refusal, from the read.
      api.forbid((a) => a.resource === "networkpolicies" && a.namespace === "team-c");
      await assert.rejects(p.ensure("team-c"), /cannot get resource "networkpolicies"/);
    } finally {
      api.forbid(undefined);
    }
    await p.ensure("team-c");
    assert.deepEqual((await stored("team-c")).labels, AGENT_NETWORK_POLICY_LABELS);
  });
});
