import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException } from "@kubernetes/client-node";
import { isNotFound } from "./reconcile-api.js";

const refused = (code: number, body: unknown) => new ApiException(code, "refused", body, {});

test("only the API server's own 404 (a Status with reason NotFound) says a Secret is gone", () => {
  const status = { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404, message: 'secrets "x" not found' };
  assert.equal(isNotFound(refused(404, JSON.stringify(status))), true, "as client-node hands it: the body's text");
  assert.equal(isNotFound(refused(404, status)), true, "or parsed");
  // A proxy's or a load balancer's 404, a 404 of another reason, and every other failure are not.
  assert.equal(isNotFound(refused(404, "404 page not found")), false);
  assert.equal(isNotFound(refused(404, "")), false);
  assert.equal(isNotFound(refused(404, undefined)), false);
  assert.equal(isNotFound(refused(404, null)), false);
  assert.equal(isNotFound(refused(404, JSON.stringify({ ...status, reason: "Gone" }))), false);
  assert.equal(isNotFound(refused(503, JSON.stringify({ ...status, code: 503, reason: "ServiceUnavailable" }))), false);
  assert.equal(isNotFound(refused(403, JSON.stringify({ ...status, code: 403, reason: "Forbidden" }))), false);
  assert.equal(isNotFound(new Error("socket hang up")), false);
  assert.equal(isNotFound(undefined), false);
});
