// The Kubernetes test peers: a fake API server and a kubelet simulator (docs/internals.md,
// "Kubernetes test peers").
export { startFakeApiServer, type FakeApiServer, type FakeApiServerOptions, type RequestRecord } from "./server.js";
export { startKubelet, Kubelet, type KubeletOptions } from "./kubelet.js";
export type { SimNode } from "./scheduler.js";
export type { KubeObject } from "./api-error.js";
