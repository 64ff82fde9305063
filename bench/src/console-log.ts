/**
 * The console's run page on a run with 100k log lines (issue 12): time to the log's first paint
 * and to its last line, in headless Chromium (Debian's /usr/bin/chromium through playwright-core),
 * against a real `flow server`. The page fetches the log in windows of rows and renders only the
 * lines in view; the figures come from the page's own performance marks, measured from the
 * navigation's start. Target: first paint under 300 ms. Runs the page `ROUNDS` times, cold browser
 * cache each time (a new context), and prints the median and the worst.
 */
import { chromium } from "playwright-core";
import { fmt, median, startBenchServer, submitScript, waitForRun } from "./support.js";

const LINES = Number(process.argv[2] ?? 100_000);
const ROUNDS = 5;

const main = async (): Promise<void> => {
  const server = await startBenchServer(1);
  const browser = await chromium.launch({ executablePath: process.env.FLOWSVC_CHROMIUM ?? "/usr/bin/chromium" });
  try {
    const id = await submitScript(server, "lines.sh", `seq 1 ${LINES} | sed 's/^/log line number /'\n`);
    const run = await waitForRun(server, id);
    const first: number[] = [];
    const last: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      const page = await context.newPage();
      await page.goto(`${server.url}/login`);
      await page.getByLabel("API token").fill(server.token);
      await page.getByRole("button", { name: "Log in" }).click();
      await page.getByText("Logged in as").waitFor();
      await page.goto(`${server.url}/p/${server.project}/runs/${id}`);
      await page.locator("#log[data-complete]").waitFor({ timeout: 120_000 });
      await page.locator("#log .log-row", { hasText: `log line number ${LINES}` }).waitFor();
      const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType("mark").map((m) => [m.name, m.startTime])));
      const count = await page.locator("#log-count").textContent();
      const domRows = await page.locator("#log .log-row").count();
      if (Number(count) !== LINES) throw new Error(`the page counted ${count} lines, not ${LINES}`);
      first.push(marks["console-log-first-paint"]!);
      last.push(marks["console-log-last-line"]!);
      if (i === 0) console.log(`run ${id} ${run.status}: ${count} lines, ${domRows} rows in the DOM`);
      await context.close();
    }
    console.log(`first paint: median ${fmt(median(first))}, worst ${fmt(Math.max(...first))} (target < 300 ms)`);
    console.log(`last line:   median ${fmt(median(last))}, worst ${fmt(Math.max(...last))}`);
  } finally {
    await browser.close();
    await server.stop();
  }
};

await main();
