// A throwaway serving certificate for 127.0.0.1: kubectl (client-go) sends a bearer token only over
// TLS, so the fake serves HTTPS, with this self-signed certificate as the kubeconfig's CA.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ServingCert {
  cert: string;
  key: string;
}

let cached: ServingCert | undefined;

/** Made once per process with the system's openssl (P-256, valid one day, SAN IP 127.0.0.1). */
export const servingCert = (): ServingCert => {
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), "fake-kube-tls-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
        "-days",
        "1",
        "-subj",
        "/CN=fake-kube-apiserver",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    cached = { cert: readFileSync(join(dir, "cert.pem"), "utf8"), key: readFileSync(join(dir, "key.pem"), "utf8") };
    return cached;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};
