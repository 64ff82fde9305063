import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Pool } from "pg";
import { FlowError, parseMasterKey } from "@flowsvc/core";
import { bootstrapTenancy, findProject, mintId, mintToken, withTransaction, type Keyring } from "@flowsvc/store";

/**
 * The master key in local mode: FLOWSVC_MASTER_KEY when set, else `<data-dir>/master.key`,
 * generated on first start. Returns whether it was generated, so the server can warn.
 */
export const localMasterKey = async (
  dataDir: string,
  fromEnv: Uint8Array | undefined,
): Promise<{ key: Uint8Array; generated: boolean; path?: string }> => {
  if (fromEnv) return { key: fromEnv, generated: false };
  const path = join(dataDir, "master.key");
  try {
    return { key: parseMasterKey((await readFile(path, "utf8")).trim()), generated: false, path };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  await writeFile(path, key.toString("base64") + "\n", { mode: 0o600, flag: "wx" });
  return { key, generated: true, path };
};

export interface BootstrapResult {
  /** The admin token, only on the start that created it. */
  token: string | undefined;
  orgId: string;
}

/** First start: org `default`, project `default`, user `admin` and a token. Later starts: nothing. */
export const bootstrap = async (pool: Pool, keyring: Keyring, dataDir: string): Promise<BootstrapResult> => {
  const existing = await findProject(pool, "default", "default");
  if (existing) return { token: undefined, orgId: existing.orgId };
  const { token, digest } = mintToken("flw");
  const ids = { orgId: mintId("org"), projectId: mintId("prj"), userId: mintId("usr"), tokenId: mintId("tok") };
  const wrapped = await keyring.newWrappedOrgKey(ids.orgId);
  const created = await withTransaction(pool, (tx) => bootstrapTenancy(tx, ids, digest, wrapped));
  if (!created) {
    const again = await findProject(pool, "default", "default");
    if (!again) throw new FlowError("internal", "org default exists without project default");
    return { token: undefined, orgId: again.orgId };
  }
  const tokenPath = join(dataDir, "admin.token");
  await writeFile(tokenPath, token + "\n", { mode: 0o600 });
  await chmod(tokenPath, 0o600);
  return { token, orgId: ids.orgId };
};
