import { test } from "node:test";
import assert from "node:assert/strict";
import { PORT_MESSAGE, portSetting } from "./port-schema.js";

test("a port setting is 0-65535 in decimal digits; absent, its default", () => {
  const port = portSetting(8080);
  assert.deepEqual(
    [undefined, "0", "9090", "65535", "00080"].map((v) => port.parse(v)),
    [8080, 0, 9090, 65535, 80],
  );
  // What Number() alone would take as a port, and what no port is.
  for (const bad of [
    "0x2382",
    " 9090 ",
    "9090\n",
    "1e3",
    "9090.5",
    "-1",
    "+80",
    "65536",
    "99999",
    "123456",
    "",
    "8080\u0000",
    "\ud800",
    "٨٠٨٠",
    "1e400",
  ]) {
    const r = port.safeParse(bad);
    assert.ok(!r.success, `${JSON.stringify(bad)} was taken as port ${r.success ? r.data : ""}`);
    assert.equal(r.error.issues[0]!.message, PORT_MESSAGE);
  }
});
