#!/usr/bin/env node
// A stand-in for the Anthropic Messages API, to run the model examples without a real model:
// the test suite's protocol-faithful peer (test/src/peers/llm.ts, built by `npm run build`), which
// checks x-api-key, anthropic-version and the request body as the real API does, answering with
// the examples' scripted replies (exampleReply: "auto" for a docs change, a sentence containing
// "auto" for a change marked "maybe", "human" otherwise; advice text for other prompts).
//
//   node examples/graphs/llm-peer.mjs            # listens on 127.0.0.1:8123, key sk-ant-example
//   LLM_PEER_PORT=9000 LLM_PEER_KEY=... node examples/graphs/llm-peer.mjs
import { LlmPeer, exampleReply } from "../../test/dist/peers/llm.js";

const port = Number(process.env.LLM_PEER_PORT ?? 8123);
const apiKey = process.env.LLM_PEER_KEY ?? "sk-ant-example";
const peer = await new LlmPeer({ apiKey, reply: exampleReply }).start(port);
console.log(`LLM peer on ${peer.url} (x-api-key ${apiKey}); start the server with`);
console.log(`  FLOWSVC_CONNECTOR_BASE_URLS='{"anthropic":"${peer.url}"}' npm start`);
process.on("SIGINT", () => void peer.stop().then(() => process.exit(0)));
process.on("SIGTERM", () => void peer.stop().then(() => process.exit(0)));
