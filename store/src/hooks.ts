// Inbound event hooks (spec "Event hook"): the queries behind `flow event-hook set|ls|show|rm|rotate`
// and the one lookup ingest makes per delivery. The shared secret is never stored, only its
// SHA-256 digest; a signing key (manifest or manual-HMAC mode) must be used, not just compared, so
// it is sealed with the org key under the name `hook:<name>` (kind "credential").
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import { digestToken } from "./mint.js";

type Db = Pool | PoolClient;

export const HOOK_MODES = ["token", "manifest", "hmac"] as const;
export type HookMode = (typeof HOOK_MODES)[number];

/** The built-in manifests. Only GitHub's exists. */
export const HOOK_MANIFESTS = ["github"] as const;
export type HookManifest = (typeof HOOK_MANIFESTS)[number];

/** Name under which a hook's signing key is sealed (kind "credential"). */
export const hookSealName = (name: string): string => `hook:${name}`;

/** A new shared secret (`fhs_` + 32 random bytes) and its digest; only the digest is stored. */
export const mintHookSecret = (): { secret: string; digest: Buffer } => {
  const secret = `fhs_${randomBytes(32).toString("base64url")}`;
  return { secret, digest: digestToken(secret) };
};

/** Whether `presented` is the secret behind `digest`, compared in constant time. */
export const hookSecretMatches = (presented: string, digest: Uint8Array): boolean => {
  const got = digestToken(presented);
  return got.length === digest.length && timingSafeEqual(got, digest);
};

export interface HookConfig {
  mode: HookMode;
  /** The type a token or manual-HMAC hook emits; null for a manifest hook (it derives one per delivery). */
  eventType: string | null;
  manifest: HookManifest | null;
  /** The sealed signing key (manifest and manual-HMAC modes). */
  keySealed: Uint8Array | null;
  /** Lower-case header name (manual HMAC). */
  hmacHeader: string | null;
  hmacPrefix: string | null;
}

/** What management answers show: never the secret, never the key. */
export interface HookRecord {
  name: string;
  mode: HookMode;
  event_type: string | null;
  manifest: string | null;
  hmac_header: string | null;
  hmac_prefix: string | null;
  created_at: string;
  rotated_at: string | null;
}

/** The row as pg returns it: the same fields, with timestamps as Dates. */
type HookRaw = Omit<HookRecord, "created_at" | "rotated_at"> & { created_at: Date; rotated_at: Date | null };

const COLUMNS = `name, mode, event_type, manifest, hmac_header, hmac_prefix, created_at, rotated_at`;

const toRecord = (r: HookRaw): HookRecord => ({
  name: r.name,
  mode: r.mode,
  event_type: r.event_type,
  manifest: r.manifest,
  hmac_header: r.hmac_header,
  hmac_prefix: r.hmac_prefix,
  created_at: r.created_at.toISOString(),
  rotated_at: r.rotated_at ? r.rotated_at.toISOString() : null,
});

/**
 * Creates a hook with the secret behind `secretDigest`, or replaces an existing hook's
 * configuration and keeps its secret (senders keep working; `rotate` changes the secret).
 * `created` tells which happened: only a created hook's secret is new.
 */
export const upsertHook = async (
  db: Db,
  ref: { readonly projectId: string; readonly name: string },
  cfg: HookConfig,
  secretDigest: Uint8Array,
): Promise<{ hook: HookRecord; created: boolean }> => {
  const { projectId, name } = ref;
  const { rows } = await db.query<HookRaw & { created: boolean }>(
    `insert into event_hooks (project_id, name, mode, event_type, manifest, secret_digest, key_sealed, hmac_header, hmac_prefix)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     on conflict (project_id, name) do update
       set mode = excluded.mode, event_type = excluded.event_type, manifest = excluded.manifest, key_sealed = excluded.key_sealed,
           hmac_header = excluded.hmac_header, hmac_prefix = excluded.hmac_prefix
     returning ${COLUMNS}, (xmax = 0) as created`,
    [
      projectId,
      name,
      cfg.mode,
      cfg.eventType,
      cfg.manifest,
      Buffer.from(secretDigest),
      cfg.keySealed ? Buffer.from(cfg.keySealed) : null,
      cfg.hmacHeader,
      cfg.hmacPrefix,
    ],
  );
  const row = rows[0]!;
  return { hook: toRecord(row), created: row.created };
};

/** Replaces the hook's secret digest: the old secret stops working at commit. Undefined when there is no such hook. */
export const rotateHookSecret = async (
  db: Db,
  projectId: string,
  name: string,
  secretDigest: Uint8Array,
): Promise<HookRecord | undefined> => {
  const { rows } = await db.query<HookRaw>(
    `update event_hooks set secret_digest = $3, rotated_at = now() where project_id = $1 and name = $2 returning ${COLUMNS}`,
    [projectId, name, Buffer.from(secretDigest)],
  );
  return rows[0] ? toRecord(rows[0]) : undefined;
};

export const listHooks = async (db: Db, projectId: string): Promise<HookRecord[]> => {
  const { rows } = await db.query<HookRaw>(`select ${COLUMNS} from event_hooks where project_id = $1 order by name`, [projectId]);
  return rows.map(toRecord);
};

export const getHook = async (db: Db, projectId: string, name: string): Promise<HookRecord | undefined> => {
  const { rows } = await db.query<HookRaw>(`select ${COLUMNS} from event_hooks where project_id = $1 and name = $2`, [projectId, name]);
  return rows[0] ? toRecord(rows[0]) : undefined;
};

/** False when there was no such hook. Events it already recorded stay on the bus. */
export const deleteHook = async (db: Db, projectId: string, name: string): Promise<boolean> => {
  const { rowCount } = await db.query(`delete from event_hooks where project_id = $1 and name = $2`, [projectId, name]);
  return (rowCount ?? 0) > 0;
};

/** What ingest needs to verify and shape one delivery. */
export interface IngestHook {
  orgId: string;
  projectId: string;
  name: string;
  mode: HookMode;
  eventType: string | null;
  manifest: string | null;
  secretDigest: Buffer;
  keySealed: Buffer | null;
  hmacHeader: string | null;
  hmacPrefix: string | null;
  /** Changes with every write to the hook: an event is recorded only against the current one (emitEvents). */
  rev: string;
}

/** The hook behind `/api/v1/hooks/{org}/{project}/{name}`, in one query. */
export const findIngestHook = async (db: Db, org: string, project: string, name: string): Promise<IngestHook | undefined> => {
  const { rows } = await db.query<{
    org_id: string;
    project_id: string;
    mode: HookMode;
    event_type: string | null;
    manifest: string | null;
    secret_digest: Buffer;
    key_sealed: Buffer | null;
    hmac_header: string | null;
    hmac_prefix: string | null;
    rev: string;
  }>(
    `select o.id as org_id, p.id as project_id, h.mode, h.event_type, h.manifest, h.secret_digest, h.key_sealed, h.hmac_header, h.hmac_prefix, h.rev
       from event_hooks h join projects p on p.id = h.project_id join orgs o on o.id = p.org_id
      where o.name = $1 and p.name = $2 and h.name = $3`,
    [org, project, name],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    orgId: r.org_id,
    projectId: r.project_id,
    name,
    mode: r.mode,
    eventType: r.event_type,
    manifest: r.manifest,
    secretDigest: r.secret_digest,
    keySealed: r.key_sealed,
    hmacHeader: r.hmac_header,
    hmacPrefix: r.hmac_prefix,
    rev: r.rev,
  };
};
