import { test } from "node:test";
import assert from "node:assert/strict";
import { pathParamProblem, queryProblem, redactSecretQuery } from "./url-guard.js";

void test("query strings with NUL, broken percent-encoding or non-UTF-8 bytes are refused, naming the parameter", () => {
  assert.match(queryProblem("a=1&tag=x%00y") ?? "", /^query parameter "tag" holds a NUL/);
  assert.match(queryProblem("ta%00g=1") ?? "", /^the name of query parameter "ta%00g" holds a NUL/);
  assert.match(queryProblem("tag=%zz") ?? "", /^query parameter "tag" is not valid percent-encoding/);
  assert.match(queryProblem("tag=%ED%A0%80") ?? "", /^query parameter "tag" is not valid percent-encoding/);
  assert.match(queryProblem("%e=1") ?? "", /^the name of query parameter "%e" is not valid/);
  assert.equal(queryProblem("a=1&b=%C3%A9+x&&c&d="), undefined);
  assert.equal(queryProblem(""), undefined);
});

void test("decoded path parameters with NUL or a lone surrogate are refused, naming the parameter", () => {
  assert.match(pathParamProblem({ org: "default", id: "run-\0" }) ?? "", /^path parameter id holds a NUL/);
  assert.match(pathParamProblem({ name: "\udfff" }) ?? "", /^path parameter name holds a lone/);
  assert.equal(pathParamProblem({ org: "default", id: "run-1" }), undefined);
});

void test("every spelling of the secret parameter is redacted from a logged URL", () => {
  const s = "fhs_S3cretValue";
  for (const q of [
    `secret=${s}`,
    `SECRET=${s}`,
    `%73ecret=${s}`,
    `%53ecret=${s}`,
    `s%65cret=${s}`,
    `%2573ecret=${s}`,
    `%25%37%33ecret=${s}`,
    `a=1&secret=${s}&b=2`,
    `a=1;secret=${s}`,
    `secret=${s};b`,
    `secret=${s}#frag`,
    `a=1#secret=${s}`,
    `x=1#&secret=${s}`,
    `secret=${s}#a;b&c=1`,
    `+secret+=${s}`,
    `secret=${s}&secret=${s}`,
    `secret[]=${s}`,
    `secret%5B%5D=${s}`,
    `SECRET[0]=${s}`,
    `secret[a][b]=${s}`,
    `token=${s}`,
    `x=1&hook_secret=${s}`,
    `key=%66hs_S3cretValue`,
  ]) {
    const out = redactSecretQuery(`/api/v1/hooks/o/p/h?${q}`);
    assert.ok(!out.includes("S3cret"), `${q} -> ${out}`);
    assert.match(out, /=\[redacted\]/);
  }
  assert.equal(redactSecretQuery("/h?a=1&%73ecret=x&b=2"), "/h?a=1&%73ecret=[redacted]&b=2");
  assert.equal(redactSecretQuery("/h?secret=x#y&b=2"), "/h?secret=[redacted]&b=2");
  assert.equal(redactSecretQuery("/h?a=1&secrets=x"), "/h?a=1&secrets=x");
  assert.equal(redactSecretQuery("/h?a=1&secret[]=fhs_x&b=2"), "/h?a=1&secret[]=[redacted]&b=2");
  assert.equal(redactSecretQuery("/h?token=fhs_x&b=2"), "/h?token=[redacted]&b=2");
  assert.equal(redactSecretQuery("/h"), "/h");
});
