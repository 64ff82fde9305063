/**
 * The console's one script and one stylesheet, hand-written and served by ingest
 * (/console/static/*): no build step, no CDN, no inline script (the CSP forbids it).
 *
 * The script does two things: live statuses on the runs list (polls `runs.json`), and the run log
 * viewer, which fetches the log in windows of lines (`log.json?from=<line>&limit=`, the API's
 * `log/lines`), holds at most a few windows around the view, renders only the lines in view (a
 * virtual list of fixed-height rows), and takes new lines and status changes from a Server-Sent
 * Events stream (`log.events`) while the run goes on: a 100k-line log is never 100k lines in memory
 * nor 100k DOM nodes. Text goes in with textContent, never as HTML.
 */
import { TERMINAL_STATUSES } from "@flowsvc/core";

export const CLIENT_JS = String.raw`"use strict";
(function () {
  // At most KEEP windows of WIN lines are held (2,000 lines); MAX_PX: the tallest spacer drawn.
  var ROW = 18, WIN = 500, KEEP = 4, MAX_PX = 15000000;
  var TERMINAL = ${JSON.stringify(Object.fromEntries(TERMINAL_STATUSES.map((s) => [s, 1])))};
  function getJson(url) {
    return fetch(url, { credentials: "same-origin", headers: { accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    });
  }
  function setStatus(id, status) {
    document.querySelectorAll("[data-run-status]").forEach(function (el) {
      if (el.getAttribute("data-run-status") !== id || el.textContent === status) return;
      el.textContent = status;
      el.className = "status status-" + status;
    });
    // A run that ended while its page was open can no longer be cancelled: its button goes too.
    var cancel = document.getElementById("cancel");
    if (TERMINAL[status] && cancel && cancel.form) cancel.form.remove();
  }
  function liveRuns(table) {
    var url = table.getAttribute("data-live-runs");
    function tick() {
      getJson(url).then(function (runs) {
        runs.forEach(function (r) { setStatus(r.id, r.status); });
      }).catch(function () {}).then(function () { setTimeout(tick, 2000); });
    }
    setTimeout(tick, 2000);
  }
  // The run log: a virtual list of fixed-height rows over the whole log (the spacer spans every
  // line), filled from windows of WIN lines fetched by line number; at most KEEP windows are held,
  // those farthest from the view go. New lines arrive by Server-Sent Events while the run goes on.
  function logViewer(box) {
    var spacer = box.querySelector(".log-spacer"), rows = box.querySelector(".log-rows");
    var count = document.getElementById("log-count"), follow = document.getElementById("log-follow");
    var url = box.getAttribute("data-log-url"), eventsUrl = box.getAttribute("data-events-url");
    var runId = box.closest("main").querySelector("[data-run-status]").getAttribute("data-run-status");
    var wins = new Map(), loading = {}, asked = {};
    var complete = 0, partial = null, done = false, painted = false, lastShown = false, scheduled = false;
    function total() { return complete + (partial === null ? 0 : 1); }
    function held() {
      var n = partial === null ? 0 : 1;
      wins.forEach(function (w) { n += w.length; });
      return n;
    }
    function lineAt(i) {
      if (i === complete && partial !== null) return partial;
      var w = wins.get(Math.floor(i / WIN)), j = i % WIN;
      return w && j < w.length ? w[j] : undefined;
    }
    function evict(center) {
      while (wins.size > KEEP) {
        var far = -1, dist = -1;
        wins.forEach(function (_w, k) { if (Math.abs(k - center) > dist) { dist = Math.abs(k - center); far = k; } });
        wins.delete(far);
      }
    }
    // An answer of the lines route: its aligned windows are kept; its counts when it reaches the end.
    function take(w) {
      var from = w.from - 1, n = w.partial ? w.lines.length - 1 : w.lines.length;
      if (from + w.lines.length >= w.total && from + n >= complete) {
        complete = from + n;
        partial = w.partial ? w.lines[n] : null;
      } else if (w.total - 1 > complete) complete = w.total - 1;
      for (var k = Math.ceil(from / WIN); k * WIN < from + n; k++) {
        var part = w.lines.slice(k * WIN - from, Math.min(n, k * WIN - from + WIN)), had = wins.get(k);
        if (!had || had.length <= part.length) wins.set(k, part);
      }
    }
    function fetchWindow(k) {
      if (loading[k] || asked[k] === complete) return;
      loading[k] = true;
      asked[k] = complete;
      getJson(url + "?from=" + (k * WIN + 1) + "&limit=" + WIN).then(function (w) {
        take(w);
      }).catch(function () {
        asked[k] = -1;
        return new Promise(function (resolve) { setTimeout(resolve, 3000); });
      }).then(function () { loading[k] = false; schedule(); });
    }
    function draw() {
      scheduled = false;
      var n = total(), height = Math.min(n * ROW, MAX_PX);
      spacer.style.height = height + "px";
      if (follow && follow.checked) box.scrollTop = box.scrollHeight;
      // Past MAX_PX (a browser caps an element's height) the scrollbar maps onto the lines in proportion.
      var scale = n * ROW > MAX_PX ? (n * ROW - box.clientHeight) / Math.max(1, MAX_PX - box.clientHeight) : 1;
      var top = box.scrollTop * scale, inView = Math.floor(top / ROW);
      var first = Math.max(0, inView - 20), last = Math.min(n, inView + Math.ceil(box.clientHeight / ROW) + 20);
      rows.style.transform = "translateY(" + (box.scrollTop - top + first * ROW) + "px)";
      var frag = document.createDocumentFragment(), missing = {};
      for (var i = first; i < last; i++) {
        var text = lineAt(i), div = document.createElement("div");
        div.className = text === undefined ? "log-row log-wait" : "log-row";
        div.setAttribute("data-line", String(i + 1));
        div.textContent = text === undefined ? "" : text;
        if (text === undefined) missing[Math.floor(i / WIN)] = 1;
        frag.appendChild(div);
      }
      rows.replaceChildren(frag);
      count.textContent = String(n);
      Object.keys(missing).forEach(function (k) { fetchWindow(Number(k)); });
      evict(Math.floor(inView / WIN));
      box.setAttribute("data-held", String(held()));
      if (!painted && n > 0) { painted = true; performance.mark("console-log-first-paint"); }
      if (done && !lastShown && last === n && lineAt(n - 1) !== undefined) { lastShown = true; performance.mark("console-log-last-line"); }
    }
    function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(draw); } }
    function finish(status) {
      done = true;
      box.setAttribute("data-complete", status);
      setStatus(runId, status);
      schedule();
    }
    // The live log: each line once (a line already held is skipped), the tail's window grows and a
    // new one starts after it; lines of windows not held only move the count on.
    function live() {
      var es = new EventSource(eventsUrl + "?after=" + complete);
      es.addEventListener("lines", function (ev) {
        var d = JSON.parse(ev.data), i = d.from - 1;
        for (var j = 0; j < d.lines.length; j++, i++) {
          var k = Math.floor(i / WIN), w = wins.get(k);
          if (w && w.length === i - k * WIN) w.push(d.lines[j]);
          else if (!w && i === k * WIN && (k === 0 || wins.has(k - 1))) wins.set(k, [d.lines[j]]);
        }
        if (i >= complete) { complete = i; partial = d.partial; }
        schedule();
      });
      es.addEventListener("status", function (ev) { setStatus(runId, JSON.parse(ev.data).status); });
      es.addEventListener("end", function (ev) {
        es.close();
        finish(JSON.parse(ev.data).status);
      });
    }
    function start() {
      var first = follow && follow.checked ? "?tail=" + WIN : "?from=1&limit=" + WIN;
      getJson(url + first).then(function (w) {
        take(w);
        if (w.done) finish(w.status);
        else { setStatus(runId, w.status); live(); }
        schedule();
      }).catch(function () { setTimeout(start, 3000); });
    }
    box.addEventListener("scroll", function () {
      if (follow && box.scrollTop + box.clientHeight < box.scrollHeight - ROW) follow.checked = false;
      schedule();
    });
    // Home and End are handled here, not left to the browser's smooth scroll: Home stops following
    // the tail, End follows it again.
    box.addEventListener("keydown", function (ev) {
      if (ev.key !== "Home" && ev.key !== "End") return;
      ev.preventDefault();
      if (follow) follow.checked = ev.key === "End";
      box.scrollTop = ev.key === "Home" ? 0 : box.scrollHeight;
      schedule();
    });
    if (follow) follow.addEventListener("change", schedule);
    start();
  }
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.querySelector("[data-live-runs]");
    if (table) liveRuns(table);
    var box = document.getElementById("log");
    if (box) logViewer(box);
  });
})();
`;

export const CLIENT_CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fff; --muted: #57606a; --line: #d0d7de; --accent: #0550ae; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #8b949e; --line: #30363d; --accent: #58a6ff; } }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 0; }
header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header nav a { margin-right: .5rem; }
.brand { font-weight: 700; }
.logout { margin-left: auto; }
main { padding: 1rem; max-width: 1200px; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: .5rem; background: var(--bg); }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { text-align: left; border-bottom: 1px solid var(--line); padding: .25rem .5rem; vertical-align: top; }
caption { text-align: left; color: var(--muted); }
.status { font-weight: 600; } .status-failed { color: #cf222e; } .status-succeeded { color: #1a7f37; } .status-running { color: #9a6700; }
.status-parked { color: #8250df; } .status-cancelled { color: var(--muted); }
.error { color: #cf222e; }
.inline { display: inline; }
.filters label { margin: 0 .25rem 0 .75rem; }
.login { display: grid; gap: .5rem; max-width: 24rem; }
.log { position: relative; height: 60vh; overflow: auto; border: 1px solid var(--line); font: 12px/18px ui-monospace, monospace; }
.log-rows { position: absolute; top: 0; left: 0; right: 0; will-change: transform; }
.log-row { height: 18px; white-space: pre; padding: 0 .5rem; }
.log-wait::after { content: "…"; color: var(--muted); }
.log-meta { color: var(--muted); }
pre.json { max-height: 20rem; overflow: auto; background: rgba(127,127,127,.08); padding: .5rem; }
.annotation { border-left: 3px solid var(--line); padding-left: .75rem; margin-bottom: .75rem; }
.role { color: var(--muted); }
`;
