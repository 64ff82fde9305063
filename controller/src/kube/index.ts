// @flowsvc/controller/kube: everything of the controller that talks to the Kubernetes API.
export * from "./client.js";
export * from "./pods.js";
export * from "./pod-launcher.js";
export * from "./agent-network-policies.js";
export * from "./leader.js";
export * from "./run-owners.js";
export * from "./reconcilers.js";
export * from "./kube-resource-store.js";
export * from "./reconcile-kinds.js";
export * from "./reconcile-names.js";
export * from "./flowrun-summary.js";
