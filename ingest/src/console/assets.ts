/**
 * The console's one script and one stylesheet, hand-written and served by ingest
 * (/console/static/*): no build step, no CDN, no inline script (the CSP forbids it).
 *
 * The script does three things: live run statuses (polls `runs.json` / `status.json`), and the
 * run log viewer, which fetches the log in windows of rows (`log.json?after=<row>&limit=`) and
 * renders only the lines in view (a virtual list of fixed-height rows), so a 100k-line log never
 * becomes 100k DOM nodes. Text goes in with textContent, never as HTML.
 */
export const CLIENT_JS = String.raw`"use strict";
(function () {
  var ROW = 18, WINDOW = 2000, POLL = 1000;
  var TERMINAL = { succeeded: 1, failed: 1, cancelled: 1 };
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
  function logViewer(box) {
    var spacer = box.querySelector(".log-spacer"), rows = box.querySelector(".log-rows");
    var count = document.getElementById("log-count"), follow = document.getElementById("log-follow");
    var lines = [], partial = "", after = 0, painted = false, scheduled = false;
    var url = box.getAttribute("data-log-url");
    function draw() {
      scheduled = false;
      var total = lines.length + (partial ? 1 : 0);
      spacer.style.height = total * ROW + "px";
      if (follow && follow.checked) box.scrollTop = box.scrollHeight;
      var first = Math.max(0, Math.floor(box.scrollTop / ROW) - 20);
      var last = Math.min(total, first + Math.ceil(box.clientHeight / ROW) + 40);
      rows.style.transform = "translateY(" + first * ROW + "px)";
      var frag = document.createDocumentFragment();
      for (var i = first; i < last; i++) {
        var div = document.createElement("div");
        div.className = "log-row";
        div.setAttribute("data-line", String(i + 1));
        div.textContent = i < lines.length ? lines[i] : partial;
        frag.appendChild(div);
      }
      rows.replaceChildren(frag);
      count.textContent = String(total);
      if (!painted && total > 0) { painted = true; performance.mark("console-log-first-paint"); }
    }
    function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(draw); } }
    function add(data) {
      var parts = (partial + data).split("\n");
      partial = parts.pop();
      for (var i = 0; i < parts.length; i++) lines.push(parts[i]);
    }
    function finish(status) {
      box.setAttribute("data-complete", status);
      schedule();
      requestAnimationFrame(function () { performance.mark("console-log-last-line"); });
    }
    function next() {
      // The first window is small so the page paints at once; then larger ones.
      var bytes = painted ? 1048576 : 32768;
      getJson(url + "?after=" + after + "&limit=" + WINDOW + "&bytes=" + bytes).then(function (w) {
        for (var i = 0; i < w.rows.length; i++) { after = w.rows[i][0]; add(w.rows[i][1]); }
        if (w.rows.length) schedule();
        setStatus(box.closest("main").querySelector("[data-run-status]").getAttribute("data-run-status"), w.status);
        if (w.more) return next();
        if (w.done) return finish(w.status);
        setTimeout(next, POLL);
      }).catch(function () { setTimeout(next, POLL * 3); });
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
    next();
  }
  function liveRun(el) {
    var url = document.getElementById("log") && document.getElementById("log").getAttribute("data-status-url");
    if (!url || TERMINAL[el.textContent]) return;
    function tick() {
      getJson(url).then(function (r) {
        setStatus(r.id, r.status);
        if (!TERMINAL[r.status]) setTimeout(tick, POLL * 2);
      }).catch(function () { setTimeout(tick, POLL * 5); });
    }
    setTimeout(tick, POLL * 2);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.querySelector("[data-live-runs]");
    if (table) liveRuns(table);
    var box = document.getElementById("log");
    if (box) {
      logViewer(box);
      var head = document.querySelector(".run-head [data-run-status]");
      if (head) liveRun(head);
    }
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
.log-meta { color: var(--muted); }
pre.json { max-height: 20rem; overflow: auto; background: rgba(127,127,127,.08); padding: .5rem; }
.annotation { border-left: 3px solid var(--line); padding-left: .75rem; margin-bottom: .75rem; }
.role { color: var(--muted); }
`;
