// One namespace is one project (contract): the project's name is the namespace's, its org the
// namespace's `flowsvc.io/org` label (default `default`). The index answers both ways, from the
// Namespace informer; the org and project rows are made on first need (store's ensureProject),
// once per namespace per process.
import type { Pool } from "pg";
import type { V1Namespace } from "@kubernetes/client-node";
import { ensureProject, type Keyring, type ProjectRef } from "@flowsvc/store";
import type { WatchedObjects } from "./informers.js";
import { DEFAULT_ORG, ORG_LABEL } from "./reconcile-kinds.js";

export class NamespaceIndex {
  readonly #projects = new Map<string, Promise<ProjectRef>>();

  constructor(
    private readonly namespaces: WatchedObjects<V1Namespace> | undefined,
    private readonly deps: { pool: Pool; keyring: Keyring; watchNamespaces: readonly string[] },
  ) {}

  /** Resolves once the Namespace informer has listed (a namespace's org is known only then). */
  ready(): Promise<void> {
    return this.namespaces?.synced ?? Promise.resolve();
  }

  /** The org of a namespace: its label, else `default`. */
  orgOf(namespace: string): string {
    return this.namespaces?.get("", namespace)?.metadata?.labels?.[ORG_LABEL] || DEFAULT_ORG;
  }

  /** Whether the controller watches this namespace (all do when watchNamespaces is empty). */
  watches(namespace: string): boolean {
    const list = this.deps.watchNamespaces;
    return list.length === 0 ? this.namespaces?.get("", namespace) !== undefined : list.includes(namespace);
  }

  /** The namespace of a project, or undefined when the project is no watched namespace's. */
  namespaceOf(org: string, project: string): string | undefined {
    return this.watches(project) && this.orgOf(project) === org ? project : undefined;
  }

  /** The project rows of a namespace, created with its org when missing. */
  project(namespace: string): Promise<ProjectRef> {
    const org = this.orgOf(namespace);
    const key = `${org}/${namespace}`;
    let p = this.#projects.get(key);
    if (!p) {
      p = ensureProject(this.deps.pool, { org, project: namespace }, (orgId) => this.deps.keyring.newWrappedOrgKey(orgId));
      p.catch(() => this.#projects.delete(key));
      this.#projects.set(key, p);
    }
    return p;
  }
}
