/**
 * The controller's Kubernetes clients (@kubernetes/client-node 2.x; ARCHITECTURE.md's dependency
 * notes: undici 7 by override, CustomObjectsApi for our own kinds, merge patches with their content
 * type set explicitly). Everything in controller/src/kube talks to the API server through these.
 */
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";

export interface KubeClients {
  kc: KubeConfig;
  core: CoreV1Api;
  coordination: CoordinationV1Api;
  custom: CustomObjectsApi;
  networking: NetworkingV1Api;
}

/** The in-cluster service account, or KUBECONFIG (tests), or ~/.kube/config: `KubeConfig.loadFromDefault()`. */
export const loadKubeConfig = (): KubeConfig => {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
};

export const kubeClients = (kc: KubeConfig = loadKubeConfig()): KubeClients => ({
  kc,
  core: kc.makeApiClient(CoreV1Api),
  coordination: kc.makeApiClient(CoordinationV1Api),
  custom: kc.makeApiClient(CustomObjectsApi),
  networking: kc.makeApiClient(NetworkingV1Api),
});

/** Options for a JSON merge patch (client-node would otherwise send a JSON patch content type). */
export const MERGE_PATCH = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** The HTTP status of a refused API call, or undefined for anything else (a network error). */
export const apiStatus = (err: unknown): number | undefined => (err instanceof ApiException ? err.code : undefined);

/** The API server's message for a refused call (its Status body's message), else the error's own. */
export const apiMessage = (err: unknown): string => {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    try {
      const status = (typeof body === "string" ? JSON.parse(body) : body) as { message?: unknown } | undefined;
      if (typeof status?.message === "string") return `${err.code}: ${status.message}`;
    } catch {
      // not JSON: fall through to the code alone
    }
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
};
