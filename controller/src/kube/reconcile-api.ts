// The few calls the reconcilers make on our kinds, through CustomObjectsApi (the typed object APIs
// drop fields of plain-object kinds: ARCHITECTURE.md dependency notes). Merge patches set their
// content type explicitly; status goes to the /status subresource only.
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesListObject,
  type V1Namespace,
  type V1Secret,
} from "@kubernetes/client-node";
import { FLOWSVC_GROUP, FLOWSVC_VERSION, FLOW_KINDS, type FlowKindName, type FlowObject } from "./reconcile-kinds.js";
import type { WatchSource } from "./informers.js";
import { apiStatus } from "./client.js";
import { withTimeout } from "../timeout.js";

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export { apiStatus } from "./client.js";

/** Whether a refused call is the API server's own 404 (a `Status` with reason NotFound), not a proxy's or a load balancer's. */
export const isNotFound = (err: unknown): boolean => {
  if (!(err instanceof ApiException) || err.code !== 404) return false;
  const body: unknown = err.body;
  let status: unknown = body;
  if (typeof body === "string")
    try {
      status = JSON.parse(body) as unknown;
    } catch {
      return false;
    }
  return (status as { reason?: unknown } | null)?.reason === "NotFound";
};

/** How long a read the reconcilers wait on may take before it counts as failed (not as an answer). */
const READ_TIMEOUT_MS = 10_000;

export class FlowApi {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  #where(kind: FlowKindName, namespace: string) {
    return { group: FLOWSVC_GROUP, version: FLOWSVC_VERSION, plural: FLOW_KINDS[kind].plural, namespace };
  }

  async get<T extends FlowObject<unknown, unknown>>(kind: FlowKindName, namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...this.#where(kind, namespace), name })) as T;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  async create<T extends FlowObject>(kind: FlowKindName, namespace: string, body: T): Promise<T> {
    return (await this.custom.createNamespacedCustomObject({ ...this.#where(kind, namespace), body })) as T;
  }

  /** A merge patch of the object (spec, metadata); answers the object after it. */
  async patch<T extends FlowObject>(kind: FlowKindName, namespace: string, name: string, body: object): Promise<T> {
    return (await this.custom.patchNamespacedCustomObject({ ...this.#where(kind, namespace), name, body }, mergePatch)) as T;
  }

  /** A merge patch of the status subresource only. */
  async patchStatus<T extends FlowObject>(kind: FlowKindName, namespace: string, name: string, status: object): Promise<T> {
    return (await this.custom.patchNamespacedCustomObjectStatus(
      { ...this.#where(kind, namespace), name, body: { status } },
      mergePatch,
    )) as T;
  }

  /** False when it was already gone. */
  async delete(kind: FlowKindName, namespace: string, name: string, uid?: string): Promise<boolean> {
    try {
      await this.custom.deleteNamespacedCustomObject({
        ...this.#where(kind, namespace),
        name,
        ...(uid ? { body: { preconditions: { uid } } } : {}),
      });
      return true;
    } catch (err) {
      if (apiStatus(err) === 404 || apiStatus(err) === 409) return false;
      throw err;
    }
  }

  /** Watch sources of a kind: one for all namespaces, or one per watched namespace. */
  sources<T extends FlowObject>(kind: FlowKindName, namespaces: readonly string[]): Array<WatchSource<T>> {
    const { group, version, plural } = this.#where(kind, "");
    if (namespaces.length === 0)
      return [
        {
          path: `/apis/${group}/${version}/${plural}`,
          list: async () => (await this.custom.listClusterCustomObject({ group, version, plural })) as KubernetesListObject<T>,
        },
      ];
    return namespaces.map((namespace) => ({
      path: `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
      list: async () => (await this.custom.listNamespacedCustomObject({ group, version, plural, namespace })) as KubernetesListObject<T>,
    }));
  }

  /**
   * A Secret as the API server has it now (not an informer's cache): undefined only when the server
   * answers that it does not exist; any other failure (5xx, 403, no answer within 10 s) throws.
   */
  async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await withTimeout(this.core.readNamespacedSecret({ namespace, name }), READ_TIMEOUT_MS);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  secretSources(namespaces: readonly string[]): Array<WatchSource<V1Secret>> {
    if (namespaces.length === 0) return [{ path: "/api/v1/secrets", list: () => this.core.listSecretForAllNamespaces() }];
    return namespaces.map((namespace) => ({
      path: `/api/v1/namespaces/${namespace}/secrets`,
      list: () => this.core.listNamespacedSecret({ namespace }),
    }));
  }

  namespaceSource(): WatchSource<V1Namespace> {
    return { path: "/api/v1/namespaces", list: () => this.core.listNamespace() };
  }
}
