/**
 * The console's run page on a run with 100k log lines (issue 12): time to the log's first paint
 * and to its last line, in headless Chromium (Debian's /usr/bin/chromium through playwright-core),
 * against a real `flow server`, and the lines the page holds in memory. The page fetches the log in
 * windows of lines, holds a few around the view and renders only the lines in view; the times come
 * from the page's own performance marks, measured from the navigation's start. Target: first paint
 * under 300 ms. Runs the page `ROUNDS` times, cold browser cache each time (a new context), and
 * prints the median and the worst; then scrolls the log top to bottom in 50 jumps and prints the
 * most lines the page held (its `#log[data-held]`) and the time a jump took to show its lines.
 */
import { chromium, type Page } from "playwright-core";
import { fmt, median, startBenchServer, submitScript, waitForRun } from "./support.js";

const LINES = Number(process.argv[2] ?? 100_000);
const ROUNDS = 5;

/** Jumps through the log top to bottom as a dragged scrollbar does, each time until its first line shows. */
const scrollThrough = async (page: Page, held: number[], jumps: number[]): Promise<void> => {
  const log = page.locator("#log");
  for (let j = 0; j <= 50; j++) {
    const line = Math.max(1, Math.round(((LINES - 40) * j) / 50));
    const t0 = performance.now();
    await log.evaluate(
      (el: { scrollTop: number }, top: number) => {
        el.scrollTop = top;
      },
      (line - 1) * 18,
    );
    await log.locator(`.log-row[data-line="${line}"]`, { hasText: `log line number ${line}` }).waitFor();
    jumps.push(performance.now() - t0);
    held.push(Number(await log.getAttribute("data-held")));
  }
};

const main = async (): Promise<void> => {
  const server = await startBenchServer(1);
  const browser = await chromium.launch({ executablePath: process.env.FLOWSVC_CHROMIUM ?? "/usr/bin/chromium" });
  try {
    const id = await submitScript(server, "lines.sh", `seq 1 ${LINES} | sed 's/^/log line number /'\n`);
    const run = await waitForRun(server, id);
    const first: number[] = [];
    const last: number[] = [];
    const held: number[] = [];
    const jumps: number[] = [];
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
      held.push(Number(await page.locator("#log").getAttribute("data-held")));
      if (i === 0) await scrollThrough(page, held, jumps);
      await context.close();
    }
    console.log(`first paint: median ${fmt(median(first))}, worst ${fmt(Math.max(...first))} (target < 300 ms)`);
    console.log(`last line:   median ${fmt(median(last))}, worst ${fmt(Math.max(...last))}`);
    console.log(`lines held:  at most ${Math.max(...held)} of ${LINES} (loads and ${jumps.length} jumps top to bottom)`);
    console.log(`a jump to its lines: median ${fmt(median(jumps))}, worst ${fmt(Math.max(...jumps))}`);
  } finally {
    await browser.close();
    await server.stop();
  }
};

await main();
