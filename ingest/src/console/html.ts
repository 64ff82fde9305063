/**
 * The console's HTML: one escaper, one page frame, and a tiny markdown renderer that escapes first.
 * Every value that reaches a page goes through `esc` (or `md`); no page carries inline script or
 * style, so the Content-Security-Policy can forbid both.
 */
const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export const text = (v: unknown): string =>
  typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : v == null ? "" : JSON.stringify(v);

export const esc = (v: unknown): string => text(v).replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/** A raw HTML fragment built only by this module's helpers. */
export interface Html {
  readonly html: string;
}

const raw = (html: string): Html => ({ html });

/** A template tag: interpolated strings are escaped, Html fragments and arrays of them are kept. */
export const h = (parts: TemplateStringsArray, ...values: unknown[]): Html => {
  let out = parts[0]!;
  values.forEach((v, i) => {
    out += render(v) + parts[i + 1]!;
  });
  return raw(out);
};

const render = (v: unknown): string => {
  if (Array.isArray(v)) return v.map(render).join("");
  if (v && typeof v === "object" && "html" in v) return (v as Html).html;
  return esc(v);
};

export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export interface PageFrame {
  title: string;
  /** The project pages' navigation: org/project, or none on the login and project-list pages. */
  scope?: { org: string; project: string };
  /** The session's CSRF token, for the logout form; absent when logged out. */
  csrf?: string;
  body: Html;
}

const nav = (scope: { org: string; project: string }): Html => {
  const base = `/p/${encodeURIComponent(scope.org)}/${encodeURIComponent(scope.project)}`;
  const links: Array<[string, string]> = [
    ["runs", "Runs"],
    ["events", "Events"],
    ["catalog", "Catalog"],
    ["handlers", "Handlers"],
    ["hooks", "Hooks"],
    ["secrets", "Secrets and credentials"],
    ["connections", "Connections"],
  ];
  return h`<nav aria-label="project"><a href="/">Projects</a> › <strong>${scope.org}/${scope.project}</strong> ${links.map(
    ([p, label]) => h`<a href="${base}/${p}">${label}</a> `,
  )}</nav>`;
};

export const csrfField = (csrf: string): Html => h`<input type="hidden" name="csrf" value="${csrf}">`;

export const page = (f: PageFrame): string =>
  h`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${f.title} · flowsvc</title><link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><span class="brand">flowsvc</span> ${f.scope ? nav(f.scope) : ""} ${
    f.csrf ? h`<form method="post" action="/logout" class="logout">${csrfField(f.csrf)}<button type="submit">Log out</button></form>` : ""
  }</header>
<main id="main"><h1>${f.title}</h1>${f.body}</main></body></html>`.html;

/** Inline markdown on an escaped line: code, bold, italic, and http(s) links. */
const inline = (line: string): string =>
  esc(line)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/\*([^*]+)\*/g, "<em>$1</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s()]+)\)/g, '<a href="$2" rel="noopener noreferrer nofollow">$1</a>');

const block = (lines: string[]): string => {
  const first = lines[0]!;
  const heading = /^(#{1,4})\s+(.*)$/.exec(first);
  if (heading && lines.length === 1) return `<h${heading[1]!.length + 2}>${inline(heading[2]!)}</h${heading[1]!.length + 2}>`;
  if (lines.every((l) => /^[-*]\s+/.test(l)))
    return `<ul>${lines.map((l) => `<li>${inline(l.replace(/^[-*]\s+/, ""))}</li>`).join("")}</ul>`;
  return `<p>${lines.map(inline).join("<br>")}</p>`;
};

/**
 * Markdown as annotations use it (headings, paragraphs, lists, code spans and fences, emphasis,
 * links), rendered safely: the text is escaped before any markup is added, and a link must be
 * http(s), so no annotation can carry a tag, an attribute or a `javascript:` URL.
 */
export const md = (text: string): Html => {
  const out: string[] = [];
  const parts = text.replace(/\r\n?/g, "\n").split(/^```[^\n]*\n?/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      out.push(`<pre><code>${esc(part.replace(/\n$/, ""))}</code></pre>`);
      return;
    }
    for (const para of part.split(/\n\s*\n/)) {
      const lines = para.split("\n").filter((l) => l.trim() !== "");
      if (lines.length === 0) continue;
      // A heading line starts its own block.
      let acc: string[] = [];
      for (const l of lines) {
        if (/^#{1,4}\s/.test(l)) {
          if (acc.length) out.push(block(acc));
          out.push(block([l]));
          acc = [];
        } else acc.push(l);
      }
      if (acc.length) out.push(block(acc));
    }
  });
  return raw(`<div class="md">${out.join("")}</div>`);
};
