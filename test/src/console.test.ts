/**
 * The web console in headless Chromium (Debian's chromium, driven by playwright-core; nothing is
 * downloaded), against one real `flow server`: log in with the API token, watch a run's log arrive
 * live (masked), cancel a run with the button, answer an approval gate with typed fields, connect an account against the OAuth provider peer
 * on the Connections page, and check that no page source and no response the
 * browser received carries the secret value or the API token.
 *
 * FLOWSVC_CONSOLE_SCREENSHOTS=<dir> also saves the run page's screenshot there (README's docs/images).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { startTestServer, type TestServer } from "./support/server.js";
import { scriptDir } from "./support/script-dir.js";
import { RUN_ID, ended } from "./support/runs.js";
import { waitFor } from "./support/wait.js";
import { OAuthProviderPeer } from "./peers/oauth-provider.js";

const SECRET = "c0nsole-s3cret-Välue-81d2";
const CHROMIUM = process.env.FLOWSVC_CHROMIUM ?? "/usr/bin/chromium";

let server: TestServer;
let dir: string;
let browser: Browser;
let page: Page;
let peer: OAuthProviderPeer;
/** The redirect URI the server is configured with before its port is known: the browser is sent on to the server (test below). */
const REDIRECT = "http://127.0.0.1:1/oauth/callback";
/** Every response body the browser received, with its URL. */
const seen: Array<{ url: string; body: string }> = [];

before(async () => {
  peer = await new OAuthProviderPeer({ rotatesRefreshToken: true, reuseRevokesFamily: true, expiresIn: 3600 }).start();
  server = await startTestServer({
    env: {
      // The consent page on `localhost`, another site than the server's 127.0.0.1 (see the connect test).
      FLOWSVC_CONNECTED_ACCOUNT_PROVIDERS: JSON.stringify([
        peer.providerConfig("github", { authorize_url: `${peer.url.replace("127.0.0.1", "localhost")}/authorize` }),
      ]),
      FLOWSVC_CONNECTED_ACCOUNTS_REDIRECT_URI: REDIRECT,
    },
  });
  dir = await scriptDir("flowsvc-console-");
  assert.equal((await server.cli(["secret", "set", "API_TOKEN", SECRET])).code, 0);
  browser = await chromium.launch({ executablePath: CHROMIUM });
  page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.on("response", (res) => {
    void res
      .text()
      .then((body) => seen.push({ url: res.url(), body }))
      .catch(() => undefined);
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await peer?.close();
  await rm(dir, { recursive: true, force: true });
});

const submit = async (name: string, source: string): Promise<string> => {
  const file = join(dir, name);
  await writeFile(file, source);
  const r = await server.cli(["submit", file, "--tag", "console"]);
  assert.equal(r.code, 0, r.stderr);
  return RUN_ID.exec(r.stdout)![0];
};

const runUrl = (id: string): string => `${server.url}/p/${server.project}/runs/${id}`;

void test("log in with the API token; the session cookie is httpOnly and the token is in no page", async () => {
  await page.goto(`${server.url}/`);
  assert.match(page.url(), /\/login$/);
  await page.getByLabel("API token").fill(server.token);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByText("Logged in as").waitFor();
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "flowsvc_session");
  assert.ok(session?.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  assert.ok(!(await page.content()).includes(server.token));
});

void test("a run's log streams into the page live, masked, and the status turns succeeded", async () => {
  const go = join(dir, "go");
  const id = await submit(
    "live.sh",
    `echo "start $API_TOKEN"\nfor i in $(seq 1 50); do echo "line $i"; done\nwhile [ ! -f '${go}' ]; do sleep 0.05; done\necho "after-go $API_TOKEN"\n`,
  );
  const logRequests: string[] = [];
  const onRequest = (r: { url: () => string }): void => {
    if (/\/log\.(json|events)/.test(r.url())) logRequests.push(r.url());
  };
  page.on("request", onRequest);
  await page.goto(runUrl(id));
  // The viewer follows the tail; Home (keyboard) goes to the first line and stops following.
  await page.locator("#log .log-row", { hasText: "line 50" }).waitFor();
  await page.locator("#log").focus();
  await page.keyboard.press("Home");
  await page.locator("#log .log-row", { hasText: "start ***" }).waitFor();
  await page.getByLabel("follow").check();
  assert.equal(await page.locator("#log .log-row", { hasText: "after-go" }).count(), 0, "the run waits for the file");
  await writeFile(go, "");
  await page.locator("#log .log-row", { hasText: "after-go ***" }).waitFor({ timeout: 15_000 });
  await page.locator(`.run-head [data-run-status="${id}"]`, { hasText: "succeeded" }).waitFor({ timeout: 15_000 });
  assert.equal((await page.locator("#log .log-row").count()) < 200, true, "only rows in view are in the DOM");
  await page.locator("#cancel").waitFor({ state: "detached", timeout: 15_000 }); // a run that ended offers no Cancel
  // The live lines came by one event stream, not by polling for windows.
  page.off("request", onRequest);
  assert.equal(logRequests.filter((u) => u.includes("/log.events")).length, 1, logRequests.join("\n"));
  assert.ok(logRequests.filter((u) => u.includes("/log.json")).length <= 2, logRequests.join("\n"));
  // Every frame of the stream, read again from the page now that the run has ended (the browser
  // does not keep an event stream's body): the masked lines, never the secret.
  const frames = await page.evaluate((url: string) => fetch(url).then((r) => r.text()), `${runUrl(id)}/log.events?after=0`);
  assert.match(frames, /^data: \{"from":1,"lines":\["start \*\*\*","line 1",/m);
  assert.match(frames, /"after-go \*\*\*"/);
  assert.match(frames, /^event: end\ndata: \{"status":"succeeded"\}$/m);
  assert.ok(!frames.includes(SECRET), "a secret in an event stream's frame");
  if (process.env.FLOWSVC_CONSOLE_SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.FLOWSVC_CONSOLE_SCREENSHOTS, "console-run.png") });
  }
});

void test("a 12,000-line log: scrolling top to bottom shows the right lines and holds at most 2,000; End reaches the last", async () => {
  const n = 12_000;
  const id = await submit("big.sh", `seq 1 ${n} | sed 's/^/big line /'\n`);
  assert.equal(await ended(server, id), "succeeded");
  await page.goto(runUrl(id));
  const log = page.locator("#log");
  await log.locator(".log-row", { hasText: `big line ${n}` }).waitFor();
  assert.equal(await page.locator("#log-count").textContent(), String(n));
  await log.focus();
  await page.keyboard.press("Home");
  await log.locator('.log-row[data-line="1"]', { hasText: /^big line 1$/ }).waitFor();
  let most = 0;
  // Jump through the log as a dragged scrollbar does; each place shows its own lines.
  for (let line = 1; line <= n; line += 1_100) {
    await log.evaluate(
      (el: { scrollTop: number }, top: number) => {
        el.scrollTop = top;
      },
      (line - 1) * 18,
    );
    await log.locator(`.log-row[data-line="${line}"]`, { hasText: new RegExp(`^big line ${line}$`) }).waitFor();
    most = Math.max(most, Number(await log.getAttribute("data-held")));
  }
  assert.ok(most > 0 && most <= 2_000, `the page held ${most} lines`);
  await page.keyboard.press("End");
  await log.locator(`.log-row[data-line="${n}"]`, { hasText: `big line ${n}` }).waitFor();
  assert.equal(await page.getByLabel("follow").isChecked(), true, "End follows the tail again");
  assert.ok(Number(await log.getAttribute("data-held")) <= 2_000);
});

void test("the Cancel button cancels a running run", async () => {
  const id = await submit("long.sh", `echo started\nsleep 60\n`);
  await page.goto(runUrl(id));
  await page.locator("#log .log-row", { hasText: "started" }).waitFor();
  await page.getByRole("button", { name: "Cancel run" }).click();
  await page.locator(`.run-head [data-run-status="${id}"]`, { hasText: "cancelled" }).waitFor({ timeout: 15_000 });
});

void test("a parked approval gate answered in the browser: a missing required field inline (still parked), then typed fields release it", async () => {
  const doc = {
    version: "flowsvc-graph/v1",
    nodes: [
      {
        id: "gate",
        type: "approval",
        config: {
          prompt: "Ship it?",
          fields: [
            { name: "env", type: "select", required: true, options: ["staging", "production"] },
            { name: "ticket", type: "text", required: true, label: "Ticket" },
            { name: "notes", type: "textarea" },
          ],
        },
      },
    ],
    edges: [],
  };
  const id = await submit("gate.json", JSON.stringify(doc));
  const scoped = `${server.url}/api/v1/orgs/default/projects/default/runs/${id}`;
  const view = async (): Promise<{ status: string; nodes: Array<{ node_id: string; status: string; output: unknown }> }> =>
    (await fetch(scoped, { headers: { authorization: `Bearer ${server.token}` } })).json() as never;
  await waitFor("the gate to park", async () => (await view()).nodes[0]?.status === "parked", 15_000);
  await page.goto(runUrl(id));
  const form = page.getByRole("form", { name: "gate gate" });
  await form.getByLabel("env (required)").selectOption("production");
  await form.getByLabel("notes").fill("from the browser");
  await form.getByRole("button", { name: "Approve" }).click();
  await page.locator("#g-gate-ticket-err", { hasText: 'approval field "ticket" is required' }).waitFor();
  assert.equal(await page.getByLabel("Ticket (required)").getAttribute("aria-invalid"), "true");
  assert.equal(await page.getByLabel("notes").inputValue(), "from the browser", "what was typed is kept");
  assert.deepEqual([(await view()).status, (await view()).nodes[0]?.status], ["parked", "parked"], "the run is not released");
  await page.getByLabel("Ticket (required)").fill("CHG-42");
  await page.getByRole("button", { name: "Approve" }).click();
  await page.locator(`.run-head [data-run-status="${id}"]`, { hasText: "succeeded" }).waitFor({ timeout: 15_000 });
  await page.reload();
  const gateRow = page.locator('tr[data-node="gate"]');
  const approver = (await gateRow.locator(".approver").textContent()) ?? "";
  assert.match(approver, /^approved by \S+$/);
  const output = (await view()).nodes[0]?.output;
  assert.deepEqual(output, {
    decision: "approve",
    env: "production",
    ticket: "CHG-42",
    notes: "from the browser",
    approved_by: approver.slice(12),
  });
  assert.match((await gateRow.locator("pre").textContent()) ?? "", /"ticket": "CHG-42"/);
});

void test("connect an account on the Connections page through the provider, see it active, remove it", async () => {
  // The provider sends the browser to the configured redirect URI; it stands for this server.
  await page.route(`${REDIRECT}**`, (route) =>
    route.fulfill({ status: 302, headers: { location: `${server.url}/oauth/callback${new URL(route.request().url()).search}` } }),
  );
  // The provider's consent page, on another site (localhost): the person clicks there, so the way
  // back is a cross-site navigation, as from a real provider, and the Strict session cookie is
  // withheld on it (the console then loads the page again from its own origin).
  const consent = peer.url.replace("127.0.0.1", "localhost");
  await page.route(`${consent}/authorize**`, (route) => {
    const to = `${peer.url}/authorize${new URL(route.request().url()).search}`.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
    return route.fulfill({ status: 200, contentType: "text/html", body: `<!doctype html><a href="${to}">Authorize</a>` });
  });
  peer.user = { id: 77, login: "octo-web" };
  await page.goto(`${server.url}/p/${server.project}/connections`);
  await page.getByLabel("Name").fill("GH_WEB");
  await page.getByLabel("Provider").fill("github");
  await page.getByRole("button", { name: "Connect" }).click();
  await page.getByRole("link", { name: "Continue to the provider" }).click();
  await page.getByRole("link", { name: "Authorize" }).click();
  // The callback sends the browser back to the Connections page (303) with the outcome, shown once.
  await page.waitForURL(`${server.url}/p/${server.project}/connections`);
  await page.locator("#flash", { hasText: "connected GH_WEB: github account octo-web (active)" }).waitFor();
  await page.reload();
  assert.equal(await page.locator("#flash").count(), 0, "the flash is shown once");
  const row = page.getByRole("row", { name: /GH_WEB/ });
  await row.getByText("active").waitFor();
  await row.getByText("octo-web").waitFor();
  if (process.env.FLOWSVC_CONSOLE_SCREENSHOTS) {
    await page.screenshot({ path: join(process.env.FLOWSVC_CONSOLE_SCREENSHOTS, "console-connections.png") });
  }
  assert.ok(peer.issuedAccess.length > 0);
  for (const token of peer.issuedAccess) assert.ok(!(await page.content()).includes(token), "a token on the Connections page");
  await row.getByRole("button", { name: "Remove" }).click();
  await page.getByText("Connected accounts: none").waitFor();
});

void test("the runs list, events, catalog, handlers, hooks and secrets pages: no secret value or token in any source or response", async () => {
  const base = `${server.url}/p/${server.project}`;
  for (const path of ["runs?tag=console", "events", "catalog", "handlers", "hooks", "connections", "secrets"]) {
    const res = await page.goto(`${base}/${path}`);
    assert.equal(res?.status(), 200, path);
    const html = await page.content();
    assert.ok(!html.includes(SECRET) && !html.includes(server.token), `${path} leaks`);
  }
  await page.getByRole("cell", { name: "API_TOKEN" }).waitFor();
  assert.ok(seen.length > 10);
  for (const r of seen) {
    assert.ok(!r.body.includes(SECRET), `${r.url} carries the secret`);
    assert.ok(!r.body.includes(server.token), `${r.url} carries the token`);
    for (const token of peer.issuedAccess) assert.ok(!r.body.includes(token), `${r.url} carries an account token`);
  }
});
