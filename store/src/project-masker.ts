/**
 * A project's masker (SECURITY.md "Secrets and masking"): what a run hands the server is masked with
 * every secret and credential value of its project before it is stored, and what the API shows is
 * masked again with the current ones. One rule for the server's routes (ingest/src/run-masker.ts)
 * and the graph engine (controller/src/graph/context.ts).
 */
import type { Pool, PoolClient } from "pg";
import { createValueMasker, credentialMaskValues, type ValueMasker } from "@flowsvc/core";
import { openProjectCredentials } from "./credentials.js";
import type { Keyring } from "./keyring.js";
import { openProjectSecrets } from "./secrets.js";

type Db = Pool | PoolClient;

/**
 * The masker of every secret and credential value of the project, opened now (through `db`: the
 * pool, or the caller's transaction). A value that does not open was never injected (the claim
 * leaves it out and says so in the run's log), so no run can have written it: it is left out here
 * too. Credentials are masked as secrets are (their raw values, a Basic header's base64).
 */
export const openProjectMasker = async (db: Db, keyring: Keyring, scope: { projectId: string; orgId: string }): Promise<ValueMasker> => {
  const [secrets, credentials] = await Promise.all([
    openProjectSecrets(db, keyring, scope.projectId, scope.orgId),
    openProjectCredentials(db, keyring, scope),
  ]);
  return createValueMasker([
    ...secrets.flatMap((s) => (s.value === undefined ? [] : [s.value])),
    ...credentials.flatMap(credentialMaskValues),
  ]);
};

/** A project as the cache keys it: its ids and its stamp (store's projectSecretScope or runSecretScope). */
export interface StampedProject {
  projectId: string;
  orgId: string;
  /** A digest of every secret's and credential's (name, set_at): one indexed query, nothing opened. */
  stamp: string;
}

/**
 * Project maskers kept per process, reopened only when the project's stamp changed: a value set or
 * deleted through any replica is masked from the next use on, with no TTL to wait out and no
 * decryption on the hot path (each in-script emit, each node result of a fan-out).
 */
export const createProjectMaskerCache = (keyring: Keyring): ((db: Db, project: StampedProject) => Promise<ValueMasker>) => {
  const cache = new Map<string, { stamp: string; masker: Promise<ValueMasker> }>();
  return (db, project) => {
    const hit = cache.get(project.projectId);
    if (hit?.stamp === project.stamp) return hit.masker;
    const masker = openProjectMasker(db, keyring, project);
    masker.catch(() => cache.delete(project.projectId));
    cache.set(project.projectId, { stamp: project.stamp, masker });
    return masker;
  };
};
