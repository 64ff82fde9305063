import { test } from "node:test";
import assert from "node:assert/strict";
import { createMasker, MASK } from "./mask.js";
import type { Masker } from "./mask.js";

const enc = new TextEncoder();
const dec = new TextDecoder();
const bytes = (s: string): Uint8Array => enc.encode(s);

/** Feeds the pieces in order, then flushes (end of stream); returns the whole output as text. */
const run = (masker: Masker, pieces: readonly Uint8Array[]): string => {
  const out: Uint8Array[] = pieces.map((p) => masker.push(p));
  out.push(masker.flush());
  const total = new Uint8Array(out.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of out) {
    total.set(p, at);
    at += p.length;
  }
  return dec.decode(total);
};

const maskAll = (values: readonly string[], text: string): string => run(createMasker(values), [bytes(text)]);

/** Splits `data` into pieces of `size` bytes. */
const chunks = (data: Uint8Array, size: number): Uint8Array[] => {
  const out: Uint8Array[] = [];
  for (let i = 0; i < data.length; i += size) out.push(data.subarray(i, i + size));
  return out;
};

void test("a secret value in the output is replaced by ***", () => {
  assert.equal(maskAll(["hunter2"], "password is hunter2, again hunter2\n"), `password is ${MASK}, again ${MASK}\n`);
});

void test("output without secrets passes through unchanged", () => {
  assert.equal(maskAll(["hunter2"], "nothing to see here\nhunter\n"), "nothing to see here\nhunter\n");
  assert.equal(maskAll([], "no secrets at all"), "no secrets at all");
});

void test("empty values are ignored and the others still masked", () => {
  assert.equal(maskAll(["", "tok-123"], "a tok-123 b"), `a ${MASK} b`);
  assert.equal(maskAll([""], "every byte stays"), "every byte stays");
});

void test("a value split across two writes at every possible byte offset is still masked", () => {
  const text = "before s3cr3t-v4lue after";
  const data = bytes(text);
  for (let cut = 0; cut <= data.length; cut++) {
    const out = run(createMasker(["s3cr3t-v4lue"]), [data.subarray(0, cut), data.subarray(cut)]);
    assert.equal(out, `before ${MASK} after`, `split at byte ${cut}`);
  }
});

void test("values straddling 4 KiB chunk boundaries are masked", () => {
  const secret = "AKIA-0123456789-SECRET";
  let text = "";
  while (text.length < 64 * 1024) text += `line ${text.length} ${secret} `;
  const data = bytes(text);
  const out = run(createMasker([secret]), chunks(data, 4096));
  assert.equal(out, text.split(secret).join(MASK));
  assert.ok(!out.includes("SECRET"));
});

void test("a UTF-8 value split inside a multi-byte character is masked", () => {
  const secret = "pässwörd-ü€";
  const data = bytes(`x ${secret} y`);
  for (let cut = 0; cut <= data.length; cut++) {
    const out = run(createMasker([secret]), [data.subarray(0, cut), data.subarray(cut)]);
    assert.equal(out, `x ${MASK} y`, `split at byte ${cut}`);
  }
});

void test("overlapping values mask as one region so no tail of the longer value shows", () => {
  assert.equal(maskAll(["abcdef", "cdefgh"], "[abcdefgh]"), `[${MASK}]`);
  assert.equal(maskAll(["cdefgh", "abcdef"], "[abcdef] [cdefgh]"), `[${MASK}] [${MASK}]`);
  assert.equal(maskAll(["secret", "secret-long"], "a secret-long b secret c"), `a ${MASK} b ${MASK} c`);
  assert.equal(maskAll(["secret-long", "secret"], "secret-longsecret"), MASK);
});

void test("overlapping values are masked the same whatever the split", () => {
  const data = bytes("x secret-long y abcdefgh z");
  for (let cut = 0; cut <= data.length; cut++) {
    const out = run(createMasker(["secret", "secret-long", "abcdef", "cdefgh"]), [data.subarray(0, cut), data.subarray(cut)]);
    assert.equal(out, `x ${MASK} y ${MASK} z`, `split at byte ${cut}`);
  }
});

void test("a multi-line value is masked whole and line by line", () => {
  const key = "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\nhkiG9w0BAQEFAASC\n-----END KEY-----";
  assert.equal(maskAll([key], `key:\n${key}\ndone`), `key:\n${MASK}\ndone`);
  assert.equal(maskAll([key], "line two alone: MIIEvQIBADANBgkq\n"), `line two alone: ${MASK}\n`);
  assert.equal(maskAll([key], "CRLF copy: hkiG9w0BAQEFAASC\r\n"), `CRLF copy: ${MASK}\r\n`);
  assert.equal(maskAll(["one-line\r\ntwo-line"], "two-line"), MASK);
});

void test("lines shorter than 4 characters are not masked on their own", () => {
  const json = '{\n  "token": "abcd1234"\n}';
  const out = maskAll([json], 'config { a } [x]\n  "token": "abcd1234"\nok }\n');
  assert.equal(out, `config { a } [x]\n  ${MASK}\nok }\n`);
  assert.equal(maskAll(["ab\ncd\nsecretline"], "ab cd ef"), "ab cd ef");
  assert.equal(maskAll(["ab\ncd\nsecretline"], "x secretline"), `x ${MASK}`);
});

void test("a value with a trailing newline is masked when printed without it", () => {
  assert.equal(maskAll(["abc\n"], "the value abc."), `the value ${MASK}.`);
});

void test("no value leaks when output arrives one byte at a time", () => {
  const values = ["hunter2", "pässwörd-ü€", "secret", "secret-long", "multi\nline-value"];
  const text = "a hunter2 b pässwörd-ü€ c secret-long d secret e multi\nline-value f line-value\n";
  const masker = createMasker(values);
  let out = "";
  const decoder = new TextDecoder();
  for (const b of bytes(text)) {
    out += decoder.decode(masker.push(Uint8Array.of(b)), { stream: true });
    for (const v of ["hunter2", "pässwörd", "secret", "line-value", "-long"]) {
      assert.ok(!out.includes(v), `"${v}" leaked: ${out}`);
    }
  }
  out += decoder.decode(masker.flush());
  assert.equal(out, `a ${MASK} b ${MASK} c ${MASK} d ${MASK} e ${MASK} f ${MASK}\n`);
});

void test("at most the longest value minus one byte is held back", () => {
  const masker = createMasker(["abcdefgh", "xyz"]);
  assert.equal(dec.decode(masker.push(bytes("log abcdefg"))), "log ");
  assert.equal(masker.pending, 7);
  assert.equal(dec.decode(masker.push(bytes("X"))), "abcdefgX");
  assert.equal(masker.pending, 0);
  assert.equal(dec.decode(masker.push(bytes("xy"))), "");
  assert.equal(masker.pending, 2);
});

void test("a line with no possible value start is emitted at once, newline included", () => {
  const masker = createMasker(["hunter2"]);
  assert.equal(dec.decode(masker.push(bytes("step 1 done\nstep 2 done\n"))), "step 1 done\nstep 2 done\n");
  assert.equal(masker.pending, 0);
  assert.equal(dec.decode(masker.push(bytes("progress: hu"))), "progress: ");
  assert.equal(masker.pending, 2);
});

void test("a flush on idle emits held bytes, and data after it is still masked", () => {
  const masker = createMasker(["hunter2"]);
  assert.equal(dec.decode(masker.push(bytes("prompt> hun"))), "prompt> ");
  assert.equal(dec.decode(masker.flush()), "hun");
  assert.equal(masker.pending, 0);
  assert.equal(dec.decode(masker.flush()), "");
  // The rest of a value completed after the flush is still hidden: only the flushed prefix showed.
  assert.equal(dec.decode(masker.push(bytes("ter2 then hunter2\n"))), `${MASK} then ${MASK}\n`);
  assert.equal(dec.decode(masker.push(bytes("plain\n"))), "plain\n");
  assert.equal(dec.decode(masker.flush()), "");
});

/** The expected output computed on the whole text at once: every occurrence's bytes, merged. */
const oracle = (values: readonly string[], text: string): string => {
  const data = bytes(text);
  const covered = new Uint8Array(data.length);
  const patterns = new Set<string>();
  for (const v of values) {
    if (v === "") continue;
    patterns.add(v);
    if (v.trim()) patterns.add(v.trim());
    for (const line of v.split(/\r\n|\n|\r/)) if ([...line.trim()].length >= 4) patterns.add(line.trim());
  }
  for (const p of patterns) {
    const pb = bytes(p);
    for (let i = 0; i + pb.length <= data.length; i++) {
      if (pb.every((b, j) => data[i + j] === b)) covered.fill(1, i, i + pb.length);
    }
  }
  const out: number[] = [];
  let i = 0;
  while (i < data.length) {
    if (covered[i]) {
      out.push(...bytes(MASK));
      while (i < data.length && covered[i]) i++;
      continue;
    }
    out.push(data[i] as number);
    i++;
  }
  return dec.decode(Uint8Array.from(out));
};

void test("random texts in random splits mask exactly like the whole text at once", () => {
  let seed = 42;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const alphabet = ["a", "b", "c", "\n", "é", "€"];
  const word = (len: number): string => Array.from({ length: len }, () => alphabet[rand(alphabet.length)]).join("");
  for (let round = 0; round < 400; round++) {
    const values = Array.from({ length: 1 + rand(4) }, () => word(1 + rand(6)));
    const text = word(rand(60));
    const data = bytes(text);
    const pieces: Uint8Array[] = [];
    for (let i = 0; i < data.length; ) {
      const n = 1 + rand(5);
      pieces.push(data.subarray(i, i + n));
      i += n;
    }
    assert.equal(run(createMasker(values), pieces), oracle(values, text), JSON.stringify({ values, text }));
  }
});

void test("idle flushes at random points never let a whole value through", () => {
  let seed = 7;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const alphabet = ["a", "b", "c", " ", "é"];
  const word = (len: number): string => Array.from({ length: len }, () => alphabet[rand(alphabet.length)]).join("");
  for (let round = 0; round < 400; round++) {
    const values = Array.from({ length: 1 + rand(3) }, () => word(2 + rand(5)).trim()).filter((v) => v !== "");
    const data = bytes(word(rand(80)));
    const masker = createMasker(values);
    const out: Uint8Array[] = [];
    for (let i = 0; i < data.length; ) {
      const n = 1 + rand(4);
      out.push(masker.push(data.subarray(i, i + n)));
      if (rand(3) === 0) out.push(masker.flush());
      assert.ok(masker.pending < Math.max(1, ...values.map((v) => bytes(v).length)));
      i += n;
    }
    out.push(masker.flush());
    const text = dec.decode(Buffer.concat(out));
    for (const v of values) assert.ok(!text.includes(v), JSON.stringify({ values, text }));
  }
});

void test("masking throughput on 64 MiB of output with 20 secrets", (t) => {
  const secrets = Array.from({ length: 20 }, (_, i) => `ghp_${i.toString(36)}${"Xy7Qa9Lm2Pz".repeat(3)}${i}`);
  let block = "";
  for (let line = 0; block.length < 1 << 20; line++) {
    block += `2025-01-01T12:00:${String(line % 60).padStart(2, "0")}Z INFO worker-3 processed item ${line} in 12ms status=ok path=/api/v1/items/${line}\n`;
    if (line % 97 === 0) block += `export TOKEN=${secrets[line % 20]}\n`;
  }
  const data = bytes(block);
  const total = 64 * 1024 * 1024;
  const masker = createMasker(secrets);
  let outBytes = 0;
  const started = performance.now();
  for (let done = 0; done < total; done += data.length) {
    for (const piece of chunks(data, 64 * 1024)) outBytes += masker.push(piece).length;
  }
  outBytes += masker.flush().length;
  const ms = performance.now() - started;
  const mib = (Math.ceil(total / data.length) * data.length) / (1024 * 1024);
  t.diagnostic(`masked ${mib.toFixed(0)} MiB (64 KiB writes, 20 secrets) in ${ms.toFixed(0)} ms: ${((mib * 1000) / ms).toFixed(0)} MiB/s`);
  assert.ok(outBytes > 0);
  const sample = run(createMasker(secrets), [data]);
  assert.ok(secrets.every((s) => !sample.includes(s)));
});
