// How the kubelet simulator turns a Pod's first container into a local process: the command (or the
// entrypoint its image maps to), the Pod's env (values, secretKeyRef, configMapKeyRef, fieldRef,
// envFrom), and its secret / emptyDir / configMap volumes written under a directory per Pod.
//
// Path rule: a container cannot mount at /var/run/... on this host, so each volume lives in
// <podDir>/volumes/<volume name>, and every env value, command word and workingDir of the Pod spec
// that starts with a volumeMount's mountPath gets that prefix replaced by the volume's directory (an
// image's mapped entrypoint is the image's own files, left as it is). The process also gets
// FAKE_KUBELET_POD_DIR.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CoreV1Api, V1Container, V1EnvVar, V1Pod, V1SecretKeySelector, V1Volume } from "@kubernetes/client-node";

export class ContainerConfigError extends Error {}

const none: Record<string, string> = {};

export interface Launch {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
}

type Mounts = [mountPath: string, dir: string][];

const remap = (value: string, mounts: Mounts): string => {
  for (const [path, dir] of mounts) if (value === path || value.startsWith(`${path}/`)) return dir + value.slice(path.length);
  return value;
};

const remapAll = (values: readonly string[], mounts: Mounts): string[] => values.map((v) => remap(v, mounts));

/** The container's command (remapped), else its image's mapped entrypoint (the image's own files, as they are). */
const entryOf = (c: V1Container, images: Record<string, string[]>, mounts: Mounts): string[] | undefined =>
  c.command ? remapAll(c.command, mounts) : images[c.image ?? ""];

const secretData = async (core: CoreV1Api, namespace: string, name: string): Promise<Record<string, string>> => {
  try {
    return (await core.readNamespacedSecret({ name, namespace })).data ?? {};
  } catch {
    throw new ContainerConfigError(`secret "${name}" not found`);
  }
};

const configMapData = async (core: CoreV1Api, namespace: string, name: string): Promise<Record<string, string>> => {
  try {
    return (await core.readNamespacedConfigMap({ name, namespace })).data ?? {};
  } catch {
    throw new ContainerConfigError(`configmap "${name}" not found`);
  }
};

const FIELDS: Record<string, (pod: V1Pod) => string | undefined> = {
  "metadata.name": (p) => p.metadata?.name,
  "metadata.namespace": (p) => p.metadata?.namespace,
  "metadata.uid": (p) => p.metadata?.uid,
  "spec.nodeName": (p) => p.spec?.nodeName,
  "spec.serviceAccountName": (p) => p.spec?.serviceAccountName,
  "status.podIP": () => "127.0.0.1",
  "status.hostIP": () => "127.0.0.1",
};

const secretKeyValue = async (core: CoreV1Api, namespace: string, ref: V1SecretKeySelector): Promise<string | undefined> => {
  const data = await secretData(core, namespace, ref.name!).catch((err: Error) => (ref.optional ? none : Promise.reject(err)));
  const v = data[ref.key];
  if (v === undefined && !ref.optional) throw new ContainerConfigError(`couldn't find key ${ref.key} in Secret ${namespace}/${ref.name}`);
  return v === undefined ? undefined : Buffer.from(v, "base64").toString("utf8");
};

const fieldValue = (pod: V1Pod, path: string): string | undefined => {
  const label = /^metadata\.labels\['(.*)'\]$/.exec(path);
  return label ? (pod.metadata?.labels ?? {})[label[1]!] : FIELDS[path]?.(pod);
};

const envValue = async (core: CoreV1Api, pod: V1Pod, e: V1EnvVar): Promise<string | undefined> => {
  if (e.value !== undefined) return e.value;
  const ns = pod.metadata!.namespace!;
  const from = e.valueFrom;
  if (from?.secretKeyRef) return secretKeyValue(core, ns, from.secretKeyRef);
  if (from?.configMapKeyRef) return (await configMapData(core, ns, from.configMapKeyRef.name!))[from.configMapKeyRef.key];
  if (from?.fieldRef) return fieldValue(pod, from.fieldRef.fieldPath);
  return "";
};

const buildEnv = async (core: CoreV1Api, pod: V1Pod, c: V1Container): Promise<Record<string, string>> => {
  const env: Record<string, string> = {};
  for (const src of c.envFrom ?? []) {
    const ns = pod.metadata!.namespace!;
    const data = src.secretRef
      ? await secretData(core, ns, src.secretRef.name!)
      : src.configMapRef
        ? await configMapData(core, ns, src.configMapRef.name!)
        : {};
    for (const [k, v] of Object.entries(data))
      env[`${src.prefix ?? ""}${k}`] = src.secretRef ? Buffer.from(v, "base64").toString("utf8") : v;
  }
  for (const e of c.env ?? []) {
    const v = await envValue(core, pod, e);
    if (v !== undefined) env[e.name] = v;
  }
  return env;
};

const writeVolume = async (core: CoreV1Api, pod: V1Pod, v: V1Volume, dir: string): Promise<void> => {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ns = pod.metadata!.namespace!;
  if (v.secret) {
    const data = await secretData(core, ns, v.secret.secretName!).catch((err: Error) => (v.secret!.optional ? none : Promise.reject(err)));
    const items = v.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    for (const item of items)
      if (data[item.key] !== undefined) writeFileSync(join(dir, item.path), Buffer.from(data[item.key]!, "base64"), { mode: 0o400 });
  } else if (v.configMap) {
    const data = await configMapData(core, ns, v.configMap.name!);
    for (const [k, val] of Object.entries(data)) writeFileSync(join(dir, k), val);
  }
};

/** Writes the Pod's volumes under `podDir` and resolves what to run; ContainerConfigError when a reference is missing. */
export const prepareLaunch = async (
  core: CoreV1Api,
  pod: V1Pod,
  opts: { podDir: string; images: Record<string, string[]> },
): Promise<Launch> => {
  const c = pod.spec!.containers[0]!;
  const mounts: Mounts = [];
  for (const vm of c.volumeMounts ?? []) {
    const vol = (pod.spec!.volumes ?? []).find((v) => v.name === vm.name);
    if (!vol) throw new ContainerConfigError(`volume "${vm.name}" not found`);
    const dir = join(opts.podDir, "volumes", vol.name);
    await writeVolume(core, pod, vol, dir);
    mounts.push([vm.mountPath.replace(/\/$/, ""), vm.subPath ? join(dir, vm.subPath) : dir]);
  }
  mounts.sort((a, b) => b[0].length - a[0].length);
  const entry = entryOf(c, opts.images, mounts);
  if (!entry?.length)
    throw new ContainerConfigError(
      `no command for image "${c.image}": give the container a command or map the image in the kubelet's images option`,
    );
  const env = Object.fromEntries(Object.entries(await buildEnv(core, pod, c)).map(([k, v]) => [k, remap(v, mounts)]));
  const cwd = c.workingDir ? remap(c.workingDir, mounts) : opts.podDir;
  mkdirSync(cwd, { recursive: true });
  // An image's mapped entrypoint names the image's own files (host paths here), never a mount: only
  // the Pod spec's command and args are remapped (a checkout under /tmp is not the Pod's /tmp emptyDir).
  const argv = [...entry, ...remapAll(c.args ?? [], mounts)];
  return { argv, env: { ...env, FAKE_KUBELET_POD_DIR: opts.podDir }, cwd };
};
