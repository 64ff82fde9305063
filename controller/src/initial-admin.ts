/**
 * The cluster's bootstrap `admin` user (README "Run it on Kubernetes"): at start, every controller
 * replica makes sure `admin` exists (store's ensureClusterAdmin; exactly one makes it). The one that
 * makes it puts its token in the Secret `initialAdmin.secretName` of its own namespace (key `token`)
 * before the transaction commits: a Secret that cannot be written rolls the user back and fails the
 * start, so there is never an admin whose token nobody has. An existing Secret (a database made
 * anew, a start whose commit failed) gets the new token. When admin exists: nothing, whatever the
 * Secret's state (its reader may have deleted it). The token is never logged nor put in an error.
 */
import type { Pool } from "pg";
import type { Logger } from "pino";
import type { CoreV1Api, V1Secret } from "@kubernetes/client-node";
import { FlowError } from "@flowsvc/core";
import { ensureClusterAdmin, type ClusterAdminResult } from "@flowsvc/store";
import type { InitialAdminSettings } from "./config.js";
import { apiMessage, apiStatus } from "./kube/client.js";

export interface InitialAdminOptions {
  pool: Pool;
  core: CoreV1Api;
  /** The controller's own namespace (the release's). */
  namespace: string;
  settings: InitialAdminSettings;
  logger: Logger;
}

/** The Secret's data key. */
export const INITIAL_ADMIN_TOKEN_KEY = "token";

const secretBody = (o: InitialAdminOptions, token: string, resourceVersion?: string): V1Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: {
    name: o.settings.secretName,
    namespace: o.namespace,
    labels: { ...o.settings.labels, "app.kubernetes.io/component": "controller" },
    annotations: { "flowsvc.io/description": "the token of the user admin, made at the controller's first start; delete it once read" },
    ...(resourceVersion ? { resourceVersion } : {}),
  },
  type: "Opaque",
  stringData: { [INITIAL_ADMIN_TOKEN_KEY]: token },
});

/** Creates the Secret, or puts the token over the one there (update with the resourceVersion read). */
const writeSecret = async (o: InitialAdminOptions, token: string): Promise<"created" | "updated"> => {
  const { namespace } = o;
  const name = o.settings.secretName;
  try {
    await o.core.createNamespacedSecret({ namespace, body: secretBody(o, token) });
    return "created";
  } catch (err) {
    if (apiStatus(err) !== 409) throw err;
  }
  const existing = await o.core.readNamespacedSecret({ namespace, name });
  await o.core.replaceNamespacedSecret({ namespace, name, body: secretBody(o, token, existing.metadata?.resourceVersion) });
  return "updated";
};

/** The refusal: names the Secret and the RBAC it needs; the API server's words without the token in any form. */
const refusal = (o: InitialAdminOptions, token: string, err: unknown): FlowError => {
  let why = apiMessage(err);
  for (const form of [token, Buffer.from(token).toString("base64")]) why = why.split(form).join("<token>");
  const where = `Secret ${o.namespace}/${o.settings.secretName}`;
  return new FlowError(
    "internal",
    `cannot write the initial admin token to ${where} (${why}): the controller's service account needs, in namespace ${o.namespace}, ` +
      `create on secrets and get, update on secrets named ${o.settings.secretName} (the chart's Role <release>-flowsvc-controller-initial-admin); ` +
      `the user admin was not made`,
    { details: { namespace: o.namespace, secret: o.settings.secretName } },
  );
};

/** Makes sure `admin` exists; see the module's comment. Fails the start when the Secret cannot be written. */
export const ensureInitialAdmin = async (o: InitialAdminOptions): Promise<ClusterAdminResult> => {
  const where = { namespace: o.namespace, secret: o.settings.secretName };
  let wrote: "created" | "updated" | undefined;
  const result = await ensureClusterAdmin(o.pool, async (token) => {
    try {
      wrote = await writeSecret(o, token);
    } catch (err) {
      throw refusal(o, token, err);
    }
  });
  if (result.created)
    o.logger.info(
      { ...where, secretWas: wrote, projects: result.projects },
      `made the user admin; its token is in Secret ${o.namespace}/${o.settings.secretName} (key ${INITIAL_ADMIN_TOKEN_KEY})`,
    );
  else o.logger.debug(where, "the user admin exists: no initial admin token made");
  return result;
};
