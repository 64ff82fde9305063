// Inbound event hooks (spec "Event hook"): the queries behind `flow event-hook set|ls|show|rm|rotate`
// and the one lookup ingest makes per delivery. The shared secret is never stored, only its
// SHA-256 digest; a signing key (manifest or manual-HMAC mode) must be used, not just compared, so
// it is sealed with the org key under the name `hook:<name>` (kind "credential").
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { Pool, PoolClient } from "pg";
import type { HookMode, HookRecord, HookSpec } from "@flowsvc/core";
import { digestToken } from "./mint.js";

type Db = Pool | PoolClient;

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

/**
 * A hook's secret material as stored: the signing key sealed (or `keep` the existing one), and the
 * shared secret's digest, which replaces an existing hook's only when `replaceSecret`.
 */
export interface HookMaterial {
  keySealed: Uint8Array | null | "keep";
  secretDigest: Uint8Array;
  replaceSecret: boolean;
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
 * Creates a hook with the secret behind `material.secretDigest`, or replaces an existing hook's
 * configuration and keeps its secret (senders keep working; `rotate` changes the secret) unless
 * `material.replaceSecret` (a secret given from a Kubernetes Secret; rotated_at moves when it changed).
 * `created` tells which happened: only a created hook's secret is new.
 */
export const upsertHook = async (
  db: Db,
  ref: { readonly projectId: string; readonly name: string },
  spec: HookSpec,
  material: HookMaterial,
): Promise<{ hook: HookRecord; created: boolean }> => {
  const { projectId, name } = ref;
  const keep = material.keySealed === "keep";
  const { rows } = await db.query<HookRaw & { created: boolean }>(
    `insert into event_hooks (project_id, name, mode, event_type, manifest, secret_digest, key_sealed, hmac_header, hmac_prefix)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     on conflict (project_id, name) do update
       set mode = excluded.mode, event_type = excluded.event_type, manifest = excluded.manifest,
           key_sealed = case when $10 then event_hooks.key_sealed else excluded.key_sealed end,
           hmac_header = excluded.hmac_header, hmac_prefix = excluded.hmac_prefix,
           secret_digest = case when $11 then excluded.secret_digest else event_hooks.secret_digest end,
           rotated_at = case when $11 and event_hooks.secret_digest <> excluded.secret_digest then now() else event_hooks.rotated_at end
     returning ${COLUMNS}, (xmax = 0) as created`,
    [
      projectId,
      name,
      spec.mode,
      spec.eventType,
      spec.manifest,
      Buffer.from(material.secretDigest),
      material.keySealed === null || keep ? null : Buffer.from(material.keySealed as Uint8Array),
      spec.hmacHeader,
      spec.hmacPrefix,
      keep,
      material.replaceSecret,
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
    // The project by its names, then its hook by primary key (a lateral subquery fenced by `offset 0`):
    // as a join, the generic plan made while the tables are small (a new server's connections keep it)
    // read every project's hook of that name first, on each delivery (generic-plans.test.ts).
    `select o.id as org_id, p.id as project_id, h.mode, h.event_type, h.manifest, h.secret_digest, h.key_sealed, h.hmac_header, h.hmac_prefix, h.rev
       from orgs o join projects p on p.org_id = o.id
       cross join lateral (select h.mode, h.event_type, h.manifest, h.secret_digest, h.key_sealed, h.hmac_header, h.hmac_prefix, h.rev
                             from event_hooks h where h.project_id = p.id and h.name = $3 offset 0) h
      where o.name = $1 and p.name = $2`,
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
