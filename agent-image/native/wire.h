/*
 * wire.h: the bytes of socket protocol v2 for the native `flow` client (docs/internals.md,
 * "In-script socket protocol"). Included once, by flow.c.
 *
 * - buf: a growable byte buffer that starts on the caller's stack and moves to the heap only
 *   when a request or response outgrows it (a replayed 2 MiB step output does; a name does not).
 * - JSON out: strings are written the way JSON.stringify writes them, after decoding the input
 *   bytes as UTF-8 the way Node does (WHATWG: each maximal invalid subpart becomes U+FFFD), so
 *   the native and the Node client put the same bytes on the wire. Raw bytes travel as base64.
 * - JSON in: a reader for exactly one flat response object. Strings are decoded in place
 *   (escapes, \uXXXX, surrogate pairs; a lone surrogate becomes U+FFFD, as Node prints it),
 *   numbers are kept as their source text, anything else is validated and skipped.
 * - JSON text passed through (`flow emit --payload`): validated as JSON.parse would and copied
 *   without the whitespace between tokens.
 */
#ifndef FLOW_WIRE_H
#define FLOW_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *p;
  size_t len, cap;
  int heap;
} buf;

static void die_oom(void);

static void buf_init(buf *b, char *stack, size_t cap) {
  b->p = stack;
  b->len = 0;
  b->cap = cap;
  b->heap = 0;
}

static void buf_reserve(buf *b, size_t extra) {
  if (b->len + extra <= b->cap) return;
  size_t cap = b->cap ? b->cap * 2 : 4096;
  while (cap < b->len + extra) cap *= 2;
  char *np = b->heap ? realloc(b->p, cap) : malloc(cap);
  if (!np) die_oom();
  if (!b->heap && b->len) memcpy(np, b->p, b->len);
  b->p = np;
  b->cap = cap;
  b->heap = 1;
}

static void buf_put(buf *b, const void *s, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void buf_puts(buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_put_u64(buf *b, unsigned long long v) {
  char tmp[24];
  size_t i = sizeof tmp;
  do { tmp[--i] = (char)('0' + v % 10); v /= 10; } while (v);
  buf_put(b, tmp + i, sizeof tmp - i);
}

static void buf_put_int(buf *b, long long v) {
  if (v < 0) { buf_put(b, "-", 1); buf_put_u64(b, 0ULL - (unsigned long long)v); }
  else buf_put_u64(b, (unsigned long long)v);
}

/* ---- JSON out ------------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";

static void put_escaped_ascii(buf *b, unsigned char c) {
  char e[6] = {'\\', 'u', '0', '0', HEX[c >> 4], HEX[c & 15]};
  switch (c) {
    case '"': buf_put(b, "\\\"", 2); return;
    case '\\': buf_put(b, "\\\\", 2); return;
    case '\b': buf_put(b, "\\b", 2); return;
    case '\f': buf_put(b, "\\f", 2); return;
    case '\n': buf_put(b, "\\n", 2); return;
    case '\r': buf_put(b, "\\r", 2); return;
    case '\t': buf_put(b, "\\t", 2); return;
    default:
      if (c < 0x20) buf_put(b, e, 6);
      else buf_put(b, &c, 1);
  }
}

/* Length of the valid UTF-8 sequence at s[0] (1-4), or -(bytes to replace by one U+FFFD). */
static int utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0], lo = 0x80, hi = 0xBF;
  int need;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
  else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
  else return -1;
  int k = 0;
  while (k < need) {
    if ((size_t)(k + 1) >= n || s[k + 1] < lo || s[k + 1] > hi) return -(k + 1);
    lo = 0x80; hi = 0xBF;
    k++;
  }
  return need + 1;
}

/* Writes s[0..n) as a JSON string, exactly as JSON.stringify(Buffer.toString("utf8")) would. */
static void buf_put_json(buf *b, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  buf_reserve(b, n + 2);
  buf_put(b, "\"", 1);
  size_t i = 0;
  while (i < n) {
    int k = utf8_seq(s + i, n - i);
    if (k == 1) put_escaped_ascii(b, s[i]);
    else if (k > 1) buf_put(b, s + i, (size_t)k);
    else buf_put(b, "\xEF\xBF\xBD", 3);
    i += (size_t)(k > 0 ? k : -k);
  }
  buf_put(b, "\"", 1);
}

static void buf_put_json_cstr(buf *b, const char *s) { buf_put_json(b, s, strlen(s)); }

/* ---- base64 --------------------------------------------------------------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void buf_put_b64(buf *b, const unsigned char *s, size_t n) {
  buf_reserve(b, (n + 2) / 3 * 4);
  char *o = b->p + b->len;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
    *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = B64[v >> 6 & 63]; *o++ = B64[v & 63];
  }
  if (n - i == 1) {
    unsigned v = (unsigned)s[i] << 16;
    *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = '='; *o++ = '=';
  } else if (n - i == 2) {
    unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8;
    *o++ = B64[v >> 18]; *o++ = B64[v >> 12 & 63]; *o++ = B64[v >> 6 & 63]; *o++ = '=';
  }
  b->len = (size_t)(o - b->p);
}

static int b64_val(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Strict padded base64, decoded in place. Returns the decoded length or -1. */
static long b64_decode(char *s, size_t n) {
  if (n % 4) return -1;
  unsigned char *o = (unsigned char *)s;
  for (size_t i = 0; i < n; i += 4) {
    int a = b64_val((unsigned char)s[i]), b = b64_val((unsigned char)s[i + 1]);
    int last = i + 4 == n;
    int c = last && s[i + 2] == '=' && s[i + 3] == '=' ? -2 : b64_val((unsigned char)s[i + 2]);
    int d = last && s[i + 3] == '=' ? -2 : b64_val((unsigned char)s[i + 3]);
    if (a < 0 || b < 0 || c == -1 || d == -1) return -1;
    *o++ = (unsigned char)(a << 2 | b >> 4);
    if (c >= 0) *o++ = (unsigned char)((b & 15) << 4 | c >> 2);
    if (d >= 0) *o++ = (unsigned char)((c & 3) << 6 | d);
  }
  return (long)(o - (unsigned char *)s);
}

/* ---- JSON in -------------------------------------------------------------------------- */

typedef struct {
  char *p, *end;
} jr;

typedef struct {
  char *s;      /* decoded, NUL-terminated, in the input buffer */
  size_t n;
} jstr;

static void jr_ws(jr *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

static char *put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) *o++ = (char)cp;
  else if (cp < 0x800) { *o++ = (char)(0xC0 | cp >> 6); *o++ = (char)(0x80 | (cp & 63)); }
  else if (cp < 0x10000) {
    *o++ = (char)(0xE0 | cp >> 12); *o++ = (char)(0x80 | (cp >> 6 & 63)); *o++ = (char)(0x80 | (cp & 63));
  } else {
    *o++ = (char)(0xF0 | cp >> 18); *o++ = (char)(0x80 | (cp >> 12 & 63));
    *o++ = (char)(0x80 | (cp >> 6 & 63)); *o++ = (char)(0x80 | (cp & 63));
  }
  return o;
}

/* r->p at the opening quote. Decodes in place (the output never outgrows the escapes). */
static int jr_string(jr *r, jstr *out) {
  char *o = ++r->p, *start = o;
  for (;;) {
    if (r->p >= r->end) return 0;
    unsigned char c = (unsigned char)*r->p++;
    if (c == '"') break;
    if (c < 0x20) return 0;
    if (c != '\\') { *o++ = (char)c; continue; }
    if (r->p >= r->end) return 0;
    char e = *r->p++;
    unsigned cp;
    switch (e) {
      case '"': case '\\': case '/': *o++ = e; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'n': *o++ = '\n'; break;
      case 'r': *o++ = '\r'; break;
      case 't': *o++ = '\t'; break;
      case 'u':
        if (r->end - r->p < 4 || !hex4(r->p, &cp)) return 0;
        r->p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          unsigned lo;
          if (r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u' && hex4(r->p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
            r->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else cp = 0xFFFD;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) cp = 0xFFFD;
        o = put_utf8(o, cp);
        break;
      default: return 0;
    }
  }
  out->s = start;
  out->n = (size_t)(o - start);
  *o = 0; /* o < r->p: the closing quote (or more) lies between */
  return 1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A JSON number; returns its source text in out (not terminated). */
static int jr_number(jr *r, jstr *out) {
  char *s = r->p;
  if (r->p < r->end && *r->p == '-') r->p++;
  if (r->p >= r->end || !is_digit(*r->p)) return 0;
  if (*r->p == '0') r->p++;
  else while (r->p < r->end && is_digit(*r->p)) r->p++;
  if (r->p < r->end && *r->p == '.') {
    r->p++;
    if (r->p >= r->end || !is_digit(*r->p)) return 0;
    while (r->p < r->end && is_digit(*r->p)) r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
    if (r->p >= r->end || !is_digit(*r->p)) return 0;
    while (r->p < r->end && is_digit(*r->p)) r->p++;
  }
  out->s = s;
  out->n = (size_t)(r->p - s);
  return 1;
}

static int jr_lit(jr *r, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0) return 0;
  r->p += n;
  return 1;
}

/* Kinds of value the reader reports. */
enum { J_BAD, J_STRING, J_NUMBER, J_TRUE, J_FALSE, J_NULL, J_OBJECT, J_ARRAY };

static int jr_skip(jr *r, int depth);

static int jr_skip_container(jr *r, int depth, char close) {
  r->p++;
  jr_ws(r);
  if (r->p < r->end && *r->p == close) { r->p++; return 1; }
  for (;;) {
    jr_ws(r);
    if (close == '}') {
      jstr k;
      if (r->p >= r->end || *r->p != '"' || !jr_string(r, &k)) return 0;
      jr_ws(r);
      if (r->p >= r->end || *r->p++ != ':') return 0;
      jr_ws(r);
    }
    if (!jr_skip(r, depth + 1)) return 0;
    jr_ws(r);
    if (r->p >= r->end) return 0;
    char c = *r->p++;
    if (c == close) return 1;
    if (c != ',') return 0;
  }
}

static int jr_skip(jr *r, int depth) {
  jstr s;
  if (depth > 64 || r->p >= r->end) return 0;
  switch (*r->p) {
    case '"': return jr_string(r, &s);
    case '{': return jr_skip_container(r, depth, '}');
    case '[': return jr_skip_container(r, depth, ']');
    case 't': return jr_lit(r, "true");
    case 'f': return jr_lit(r, "false");
    case 'n': return jr_lit(r, "null");
    default: return jr_number(r, &s);
  }
}

/* Reads one value at r->p. Strings and numbers land in out; containers are skipped, except
 * that an object is only reported (r->p left at '{') when want_object is set. */
static int jr_value(jr *r, jstr *out, int want_object) {
  if (r->p >= r->end) return J_BAD;
  switch (*r->p) {
    case '"': return jr_string(r, out) ? J_STRING : J_BAD;
    case '{':
      if (want_object) return J_OBJECT;
      return jr_skip(r, 1) ? J_OBJECT : J_BAD;
    case '[': return jr_skip(r, 1) ? J_ARRAY : J_BAD;
    case 't': return jr_lit(r, "true") ? J_TRUE : J_BAD;
    case 'f': return jr_lit(r, "false") ? J_FALSE : J_BAD;
    case 'n': return jr_lit(r, "null") ? J_NULL : J_BAD;
    default: return jr_number(r, out) ? J_NUMBER : J_BAD;
  }
}

/* Iterates the members of the object at r->p ('{'). Call with *first = 1; returns 1 with the
 * key in k and r->p at the value, 0 at the end ('}' consumed), -1 on malformed input. */
static int jr_member(jr *r, int *first, jstr *k) {
  jr_ws(r);
  if (*first) {
    if (r->p >= r->end || *r->p++ != '{') return -1;
    jr_ws(r);
    if (r->p < r->end && *r->p == '}') { r->p++; return 0; }
    *first = 0;
  } else {
    if (r->p >= r->end) return -1;
    char c = *r->p++;
    if (c == '}') return 0;
    if (c != ',') return -1;
    jr_ws(r);
  }
  if (r->p >= r->end || *r->p != '"' || !jr_string(r, k)) return -1;
  jr_ws(r);
  if (r->p >= r->end || *r->p++ != ':') return -1;
  jr_ws(r);
  return 1;
}

/* An integral JSON number (1, -3, 1e2, 2.0) in [lo, hi]; as JSON.parse + Number.isInteger. */
static int jnum_int(const jstr *n, long long lo, long long hi, long long *out) {
  char tmp[64];
  if (n->n == 0 || n->n >= sizeof tmp) return 0;
  memcpy(tmp, n->s, n->n);
  tmp[n->n] = 0;
  if (!strpbrk(tmp, ".eE")) {
    errno = 0;
    char *end;
    long long v = strtoll(tmp, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
  }
  double d = strtod(tmp, NULL);
  if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long long)d) return 0;
  *out = (long long)d;
  return 1;
}

/* A non-negative integral JSON number that fits 64 bits (an inode number); -0 counts as 0. */
static int jnum_u64(const jstr *n, unsigned long long *out) {
  char tmp[32];
  if (n->n == 0 || n->n >= sizeof tmp) return 0;
  memcpy(tmp, n->s, n->n);
  tmp[n->n] = 0;
  if (tmp[0] == '-' || strpbrk(tmp, ".eE")) {
    long long v;
    if (!jnum_int(n, 0, 9007199254740991LL, &v)) return 0;
    *out = (unsigned long long)v;
    return 1;
  }
  errno = 0;
  char *end;
  unsigned long long v = strtoull(tmp, &end, 10);
  if (errno || *end) return 0;
  *out = v;
  return 1;
}

/* ---- JSON text in, compact out ------------------------------------------------------- */

/* JSON text s[0..n) as one value (RFC 8259, any value at the top, as JSON.parse takes it) is
 * appended to b without the whitespace between its tokens; the tokens are copied as written (a
 * number keeps its digits, a string its escapes), except that invalid UTF-8 in a string becomes
 * U+FFFD as in buf_put_json. Returns 0, or -1 when the text is not valid JSON (b is then partly
 * written). Iterative: any nesting depth. */
static int buf_put_json_compact(buf *b, const char *str, size_t n) {
  enum { VALUE, VALUE_OR_CLOSE, KEY, KEY_OR_CLOSE, AFTER };
  const unsigned char *s = (const unsigned char *)str;
  char open_stack[256];
  buf open; /* the closing bracket of every container still open */
  size_t i = 0;
  int state = VALUE, fine = -1;
  buf_init(&open, open_stack, sizeof open_stack);
  for (;;) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    if (state == AFTER) {
      if (!open.len) {
        if (i == n) fine = 0;
        break;
      }
      char close = open.p[open.len - 1];
      if (i < n && s[i] == ',') state = close == '}' ? KEY : VALUE;
      else if (i < n && (char)s[i] == close) open.len--;
      else break;
      buf_put(b, s + i++, 1);
      continue;
    }
    if (i == n) break;
    if ((state == VALUE_OR_CLOSE || state == KEY_OR_CLOSE) && (char)s[i] == open.p[open.len - 1]) {
      open.len--;
      buf_put(b, s + i++, 1);
      state = AFTER;
      continue;
    }
    if (state == KEY || state == KEY_OR_CLOSE) {
      if (s[i] != '"') break;
    } else if (s[i] == '{' || s[i] == '[') {
      buf_put(&open, s[i] == '{' ? "}" : "]", 1);
      state = s[i] == '{' ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
      buf_put(b, s + i++, 1);
      continue;
    }
    if (s[i] == '"') {
      buf_put(b, s + i++, 1);
      for (;;) {
        if (i == n || s[i] < 0x20) goto done;
        if (s[i] == '"') break;
        if (s[i] == '\\') {
          unsigned cp;
          if (i + 1 == n) goto done;
          if (s[i + 1] == 'u') {
            if (n - i < 6 || !hex4((const char *)s + i + 2, &cp)) goto done;
            buf_put(b, s + i, 6);
            i += 6;
          } else if (strchr("\"\\/bfnrt", s[i + 1]) && s[i + 1]) {
            buf_put(b, s + i, 2);
            i += 2;
          } else goto done;
          continue;
        }
        int k = utf8_seq(s + i, n - i);
        if (k > 0) buf_put(b, s + i, (size_t)k);
        else buf_put(b, "\xEF\xBF\xBD", 3);
        i += (size_t)(k > 0 ? k : -k);
      }
      buf_put(b, s + i++, 1);
      if (state == KEY || state == KEY_OR_CLOSE) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        if (i == n || s[i] != ':') break;
        buf_put(b, s + i++, 1);
        state = VALUE;
      } else state = AFTER;
      continue;
    }
    size_t start = i;
    if (n - i >= 4 && !memcmp(s + i, "true", 4)) i += 4;
    else if (n - i >= 5 && !memcmp(s + i, "false", 5)) i += 5;
    else if (n - i >= 4 && !memcmp(s + i, "null", 4)) i += 4;
    else {
      if (s[i] == '-') i++;
      if (i == n || s[i] < '0' || s[i] > '9') break;
      if (s[i] == '0') i++;
      else while (i < n && s[i] >= '0' && s[i] <= '9') i++;
      if (i < n && s[i] == '.') {
        if (++i == n || s[i] < '0' || s[i] > '9') break;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
      }
      if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i == n || s[i] < '0' || s[i] > '9') break;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
      }
    }
    buf_put(b, s + start, i - start);
    state = AFTER;
  }
done:
  if (open.heap) free(open.p);
  return fine;
}

#endif
