import { test } from "node:test";
import assert from "node:assert/strict";
import { createLogMasker, createMasker, MASK } from "./mask.js";
import type { LogPiece, Masker } from "./mask.js";

const enc = new TextEncoder();
const dec = new TextDecoder();
const bytes = (s: string): Uint8Array => enc.encode(s);

/** Feeds the pieces in order, then ends the stream; returns the whole output as text. */
const run = (masker: Masker, pieces: readonly Uint8Array[]): string => {
  const out: Uint8Array[] = pieces.map((p) => masker.push(p));
  out.push(masker.end());
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
  out += decoder.decode(masker.end());
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

void test("half a value, a pause, then the rest: no prefix ever shows, only ***", () => {
  const secret = "Tr0ub4dor-horse-battery";
  const masker = createMasker([secret]);
  // A pause is nothing the masker sees: there is no idle flush, the half stays held however long.
  assert.equal(dec.decode(masker.push(bytes("token: Tr0ub4dor-ho"))), "token: ");
  assert.equal(masker.pending, bytes("Tr0ub4dor-ho").length);
  assert.equal(dec.decode(masker.push(bytes("rse-battery\n"))), `${MASK}\n`);
  assert.equal(masker.pending, 0);
  assert.equal(dec.decode(masker.end()), "");
});

void test("a held tail that turns out not to be a value goes out with the next byte", () => {
  const masker = createMasker(["hunter2"]);
  assert.equal(dec.decode(masker.push(bytes("prompt> hunte"))), "prompt> ");
  assert.equal(masker.pending, 5);
  assert.equal(dec.decode(masker.push(bytes("d\n"))), "hunted\n");
  assert.equal(masker.pending, 0);
  // A held tail that starts again inside itself: only the part that can no longer begin a value goes.
  const again = createMasker(["abab-x"]);
  assert.equal(dec.decode(again.push(bytes("abab"))), "");
  assert.equal(dec.decode(again.push(bytes("ab"))), "ab");
  assert.equal(again.pending, 4);
  assert.equal(dec.decode(again.push(bytes("-x."))), `${MASK}.`);
});

void test("at the end a held prefix of 4 characters or more is masked, a shorter one goes out", () => {
  const secret = "Tr0ub4dor-horse";
  assert.equal(maskAll([secret], "printed Tr0ub4dor"), `printed ${MASK}`);
  assert.equal(maskAll([secret], "printed Tr0u"), `printed ${MASK}`);
  assert.equal(maskAll([secret], "printed Tr0"), "printed Tr0");
  assert.equal(maskAll(["\nsecret-after-a-newline"], "last line\n"), "last line\n");
  // Characters, not bytes: "pä" is 3 bytes, 2 characters.
  assert.equal(maskAll(["pässwörd"], "x pä"), "x pä");
  assert.equal(maskAll(["pässwörd"], "x päss"), `x ${MASK}`);
  // A held prefix right after a masked value joins its ***.
  assert.equal(maskAll(["hunter2", "Tr0ub4dor-horse"], "hunter2Tr0ub4"), MASK);
  // A short held tail that holds a whole short value still masks the value.
  assert.equal(maskAll(["ab", "abcdef"], "x ab"), `x ${MASK}`);
});

void test("a value split inside a multi-byte character and paused there never shows a byte of it", () => {
  const secret = "€uro-secret-Ω";
  const data = bytes(`x ${secret} y`);
  for (let cut = 1; cut < data.length; cut++) {
    const masker = createMasker([secret]);
    const first = dec.decode(masker.push(data.subarray(0, cut)), { stream: true });
    assert.ok(first === "" || "x ".startsWith(first) || first.startsWith(`x ${MASK}`), `cut ${cut}: ${first}`);
    assert.ok(!first.includes("€"), `cut ${cut}: ${first}`);
    const rest = dec.decode(masker.push(data.subarray(cut))) + dec.decode(masker.end());
    assert.equal(first + rest, `x ${MASK} y`, `cut ${cut}`);
  }
});

void test("overlapping values held across a pause mask as one region", () => {
  const masker = createMasker(["abcdef", "cdefgh"]);
  assert.equal(dec.decode(masker.push(bytes("[abcd"))), "[");
  // "abcdef" is whole: its *** goes out, and "cdef" may still be the start of "cdefgh".
  assert.equal(dec.decode(masker.push(bytes("ef"))), MASK);
  assert.equal(masker.pending, 4);
  assert.equal(dec.decode(masker.push(bytes("gh]"))), "]");
});

/** The pieces of a log as `stream:text` runs, same-stream neighbours joined. */
const logText = (pieces: readonly LogPiece<"stdout" | "stderr">[]): string => {
  const runs: { stream: string; text: string }[] = [];
  for (const p of pieces) {
    const text = dec.decode(p.bytes);
    const last = runs.at(-1);
    if (last?.stream === p.stream) last.text += text;
    else if (text !== "") runs.push({ stream: p.stream, text });
  }
  return runs.map((r) => `${r.stream}:${r.text}`).join("|");
};

void test("one log: half a value on stdout and the rest on stderr is one ***", () => {
  const secret = "Tr0ub4dor-horse";
  const log = createLogMasker([secret], ["stdout", "stderr"] as const);
  const out: LogPiece<"stdout" | "stderr">[] = [];
  out.push(...log.push("stdout", bytes("a Tr0ub4")));
  assert.equal(logText(out), "stdout:a ");
  out.push(...log.push("stderr", bytes("dor-horse b\n")));
  out.push(...log.push("stdout", bytes("\n")));
  out.push(...log.end("stdout"), ...log.end("stderr"));
  const text = logText(out);
  assert.ok(!text.includes("Tr0u") && !text.includes("dor-h"), text);
  assert.ok(text.includes(MASK), text);
});

void test("one log: a value on one stream is masked whatever the other writes in between", () => {
  const log = createLogMasker(["hunter2-long"], ["stdout", "stderr"] as const);
  const out = [
    ...log.push("stdout", bytes("pw=hunt")),
    ...log.push("stderr", bytes("warning: slow\n")),
    ...log.push("stdout", bytes("er2-long\n")),
    ...log.end("stdout"),
    ...log.end("stderr"),
  ];
  assert.equal(logText(out), `stdout:pw=|stderr:warning: slow\n|stdout:${MASK}\n`);
});

void test("one log: bytes keep their stream, held ones too", () => {
  // stdout releases "ab" (it cannot begin the value where it stands) but the log holds it: stderr may
  // go on with "XY". When stderr writes something else, "ab" goes out as stdout's.
  const log = createLogMasker(["abXY-secret"], ["stdout", "stderr"] as const);
  const out = [
    ...log.push("stdout", bytes("abab")),
    ...log.push("stderr", bytes("plain\n")),
    ...log.push("stdout", bytes("!\n")),
    ...log.end("stdout"),
    ...log.end("stderr"),
  ];
  assert.equal(logText(out), "stdout:ab|stderr:plain\n|stdout:ab!\n");
  const spelled = createLogMasker(["abXY-secret"], ["stdout", "stderr"] as const);
  const leak = [
    ...spelled.push("stdout", bytes("abab")),
    ...spelled.push("stderr", bytes("XY-secret\n")),
    ...spelled.end("stdout"),
    ...spelled.end("stderr"),
  ];
  assert.ok(!logText(leak).includes("XY-secret"), logText(leak));
  assert.ok(logText(leak).includes(MASK), logText(leak));
});

void test("one log: random interleavings of two streams never spell a value out", () => {
  let seed = 11;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const secret = "Tr0ub4dor-horse";
  for (let round = 0; round < 300; round++) {
    const log = createLogMasker([secret], ["stdout", "stderr"] as const);
    const out: LogPiece<"stdout" | "stderr">[] = [];
    const cut = 1 + rand(secret.length - 1);
    const streams = ["stdout", "stderr"] as const;
    const first = streams[rand(2)] as "stdout" | "stderr";
    const second = streams[rand(2)] as "stdout" | "stderr";
    if (rand(2) === 0) out.push(...log.push(second, bytes("noise ")));
    out.push(...log.push(first, bytes(`x ${secret.slice(0, cut)}`)));
    out.push(...log.push(second, bytes(`${secret.slice(cut)} y`)));
    if (rand(2) === 0) out.push(...log.push(first, bytes("\n")));
    out.push(...log.end("stdout"), ...log.end("stderr"));
    assert.equal(log.pending, 0);
    const whole = out.map((p) => dec.decode(p.bytes)).join("");
    assert.ok(!whole.includes(secret), JSON.stringify({ cut, first, second, whole }));
    // No run of the log holds 4+ characters of the value's start.
    assert.ok(!whole.includes(secret.slice(0, 4)), JSON.stringify({ cut, first, second, whole }));
  }
});

/** The patterns the oracle hides: each value, trimmed, and each of its lines of 4+ characters, trimmed. */
const oraclePatterns = (values: readonly string[]): Set<string> => {
  const patterns = new Set<string>();
  for (const v of values) {
    if (v === "") continue;
    patterns.add(v);
    if (v.trim()) patterns.add(v.trim());
    for (const line of v.split(/\r\n|\n|\r/)) if ([...line.trim()].length >= 4) patterns.add(line.trim());
  }
  return patterns;
};

/** Marks in `covered` every byte of every occurrence of a pattern. */
const coverOccurrences = (patterns: ReadonlySet<string>, data: Uint8Array, covered: Uint8Array): void => {
  for (const p of patterns) {
    const pb = bytes(p);
    for (let i = 0; i + pb.length <= data.length; i++) {
      if (pb.every((b, j) => data[i + j] === b)) covered.fill(1, i, i + pb.length);
    }
  }
};

/** The end of the stream: marks the longest tail that is a proper prefix of a pattern, at 4+ characters. */
const coverHeldTail = (patterns: ReadonlySet<string>, data: Uint8Array, covered: Uint8Array): void => {
  const isPrefix = (rest: Uint8Array): boolean =>
    [...patterns].some((p) => {
      const pb = bytes(p);
      return pb.length > rest.length && rest.every((b, j) => pb[j] === b);
    });
  for (let from = 0; from < data.length; from++) {
    const rest = data.subarray(from);
    if (!isPrefix(rest)) continue;
    if ([...rest].filter((b) => (b & 0xc0) !== 0x80).length >= 4) covered.fill(1, from);
    break;
  }
};

/** The data with each run of covered bytes replaced by one mask. */
const maskCovered = (data: Uint8Array, covered: Uint8Array): Uint8Array => {
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
  return Uint8Array.from(out);
};

/** The expected output computed on the whole text at once: every occurrence's bytes, merged. */
const oracleBytes = (values: readonly string[], data: Uint8Array): Uint8Array => {
  const covered = new Uint8Array(data.length);
  const patterns = oraclePatterns(values);
  coverOccurrences(patterns, data, covered);
  coverHeldTail(patterns, data, covered);
  return maskCovered(data, covered);
};

const oracle = (values: readonly string[], text: string): string => dec.decode(oracleBytes(values, bytes(text)));

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
    for (let i = 0; i < data.length;) {
      const n = 1 + rand(5);
      pieces.push(data.subarray(i, i + n));
      i += n;
    }
    assert.equal(run(createMasker(values), pieces), oracle(values, text), JSON.stringify({ values, text }));
  }
});

void test("a pause at any point releases nothing that a continuation could make part of a value", () => {
  let seed = 7;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const alphabet = ["a", "b", "c", " ", "é"];
  const word = (len: number): string => Array.from({ length: len }, () => alphabet[rand(alphabet.length)]).join("");
  for (let round = 0; round < 300; round++) {
    const values = Array.from({ length: 1 + rand(3) }, () => word(2 + rand(5)).trim()).filter((v) => v !== "");
    const text = word(rand(40));
    const data = bytes(text);
    const masker = createMasker(values);
    const longest = Math.max(1, ...values.map((v) => bytes(v).length));
    let shown = new Uint8Array(0);
    for (let i = 0; i < data.length;) {
      const n = 1 + rand(4);
      shown = Buffer.concat([shown, masker.push(data.subarray(i, i + n))]);
      i += n;
      assert.ok(masker.pending <= longest - 1, `held ${masker.pending} of at most ${longest - 1}`);
      // The pause here: whatever comes next, what already showed is the start of the final log.
      const sofar = data.subarray(0, Math.min(i, data.length));
      for (const v of values) {
        for (let j = 0; j < bytes(v).length; j++) {
          const next = bytes(v).subarray(j);
          const final = oracleBytes(values, Buffer.concat([sofar, next]));
          const prefix = Buffer.from(final.subarray(0, shown.length));
          assert.ok(
            prefix.equals(shown),
            JSON.stringify({ values, sofar: dec.decode(sofar), next: dec.decode(next), shown: dec.decode(shown) }),
          );
        }
      }
    }
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
  outBytes += masker.end().length;
  const ms = performance.now() - started;
  const mib = (Math.ceil(total / data.length) * data.length) / (1024 * 1024);
  t.diagnostic(`masked ${mib.toFixed(0)} MiB (64 KiB writes, 20 secrets) in ${ms.toFixed(0)} ms: ${((mib * 1000) / ms).toFixed(0)} MiB/s`);
  assert.ok(outBytes > 0);
  const sample = run(createMasker(secrets), [data]);
  assert.ok(secrets.every((s) => !sample.includes(s)));
});
