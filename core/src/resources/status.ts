// The status of each flowsvc custom resource (k8s-contract.md "CRDs"), as the controller writes it
// to the status subresource: observedGeneration and conditions in the Kubernetes convention.
import { z } from "zod";

/** A condition's reason: CamelCase, as Kubernetes' metav1.Condition requires. */
export const CONDITION_REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

export const Condition = z
  .object({
    type: z.string().min(1).max(316),
    status: z.enum(["True", "False", "Unknown"]),
    reason: z.string().min(1).max(1024).regex(CONDITION_REASON, "a reason is CamelCase"),
    message: z.string().max(32768),
    lastTransitionTime: z.iso.datetime(),
    observedGeneration: z.number().int().min(0).optional(),
  })
  .strict();
export type Condition = z.infer<typeof Condition>;

const common = {
  observedGeneration: z.number().int().min(0).optional(),
  conditions: z
    .array(Condition)
    .max(8)
    .optional()
    .meta({
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      description: "Kubernetes-style conditions, one per type.",
    }),
};

export const HandlerStatus = z.object({ ...common }).strict();
export type HandlerStatus = z.infer<typeof HandlerStatus>;

export const HookStatus = z
  .object({
    /** Where senders post: FLOWSVC_PUBLIC_URL + /api/v1/hooks/{org}/{project}/{name}. */
    url: z.string().max(2048).optional(),
    secretSetAt: z.iso.datetime().optional(),
    ...common,
  })
  .strict();
export type HookStatus = z.infer<typeof HookStatus>;

export const SecretStatus = z.object({ setAt: z.iso.datetime().optional(), ...common }).strict();
export type SecretStatus = z.infer<typeof SecretStatus>;

export const GraphStatus = z.object({ ...common }).strict();
export type GraphStatus = z.infer<typeof GraphStatus>;

export const CredentialStatus = z.object({ setAt: z.iso.datetime().optional(), ...common }).strict();
export type CredentialStatus = z.infer<typeof CredentialStatus>;

/** A FlowRun's summary stays short so the object stays under 4 KiB whatever the run prints. */
export const RUN_SUMMARY_MAX = 1024;

export const RunResourceStatus = z
  .object({
    runId: z.string().max(64).optional(),
    status: z.string().max(32).optional(),
    substate: z.string().max(64).optional(),
    startedAt: z.iso.datetime().optional(),
    finishedAt: z.iso.datetime().optional(),
    /** From start to finish, short (`1m12s`): the Duration column (a printer column cannot subtract dates). */
    duration: z.string().max(32).optional(),
    summary: z.string().max(RUN_SUMMARY_MAX).optional(),
    ...common,
  })
  .strict();
export type RunResourceStatus = z.infer<typeof RunResourceStatus>;

/** The conditions' reasons flowsvc writes. */
export const CONDITION_REASONS = {
  /** The spec was accepted and is in effect. */
  ready: "Reconciled",
  /** The spec breaks a rule (a `when` that does not compile, an unknown manifest): the message says which. */
  invalid: "InvalidSpec",
  /** A referenced Kubernetes Secret does not exist (the API server said 404): the value is withdrawn until it does. */
  missingSecret: "SecretNotFound",
  /** A referenced Secret exists without the referenced key: the value is withdrawn until it has it. */
  missingKey: "KeyNotFound",
  /** A referenced Secret could not be read (5xx, 403, no answer): Ready is Unknown, the last value stays. */
  unreadableSecret: "SecretUnreadable",
} as const;
