// References from a flowsvc resource to a key of a Kubernetes Secret in the same namespace: how a
// FlowSecret's value and a FlowEventHook's secret reach flowsvc without any value in etcd.
import { z } from "zod";

/** A Kubernetes object name (DNS-1123 subdomain), as the apiserver checks a Secret's name. */
export const KUBE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A key of a Secret's data. */
export const SECRET_DATA_KEY = /^[-._a-zA-Z0-9]+$/;

export const SecretKeyRef = z
  .object({
    name: z.string().max(253).regex(KUBE_NAME, "a Secret's name is a DNS subdomain: lower-case a-z 0-9 - and ., at most 253"),
    key: z.string().min(1).max(253).regex(SECRET_DATA_KEY, "a Secret's key is 1-253 of A-Z a-z 0-9 - _ ."),
  })
  .strict();
export type SecretKeyRef = z.infer<typeof SecretKeyRef>;
