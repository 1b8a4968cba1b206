// The official TypeScript SDK's `Client` in its default mode (it speaks the handshake era), against
// the tools of `tests/python/fastmcp_server.py` behind the gateway. Needs NODE_PATH to hold the
// node_modules with @modelcontextprotocol/sdk.
//
//   node sdk_client.cjs URL                  # StreamableHTTPClientTransport
//   node sdk_client.cjs stdio COMMAND ARGS... # StdioClientTransport
//
// Sampling is answered with "fixed model answer"; elicitation is accepted with {"name": "Ada"}.
// Prints one JSON object: {"protocol", "tools": [names], "divide", "divide_by_zero", "count",
// "progress": [[progress, total]], "progress_wire": [[progress, total]], "ask_model", "ask_user",
// "read", "prompt"}; a step that threw holds {"error": message}.
//
// "progress" holds what reached the SDK's onprogress callback, "progress_wire" the progress
// notifications the transport received. They differ when a notification arrives in the same read
// as its call's response: SDK 1.x handles notifications a microtask later than responses and
// drops progress for a call that has already ended (it does so with the fastmcp server directly
// too, without the gateway).
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { CreateMessageRequestSchema, ElicitRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

function transport(argv) {
  if (argv[0] === "stdio") {
    return new StdioClientTransport({ command: argv[1], args: argv.slice(2), stderr: "ignore" });
  }
  return new StreamableHTTPClientTransport(new URL(argv[0]));
}

function texts(blocks) {
  return (blocks || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
}

async function step(run) {
  try {
    return await run();
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
}

async function main() {
  const out = { progress: [], progress_wire: [] };
  const client = new Client(
    { name: "toolforge-sdk-test", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: {} } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: "assistant",
    content: { type: "text", text: "fixed model answer" },
    model: "test",
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { name: "Ada" } }));
  const t = transport(process.argv.slice(2));
  await client.connect(t);
  const deliver = t.onmessage;
  t.onmessage = (message, extra) => {
    if (message.method === "notifications/progress") {
      out.progress_wire.push([message.params.progress, message.params.total]);
    }
    deliver(message, extra);
  };
  out.protocol = t.protocolVersion ?? null;
  out.tools = (await client.listTools()).tools.map((tool) => tool.name);

  const call = (name, args, options) =>
    step(async () => {
      const r = await client.callTool({ name, arguments: args }, undefined, options);
      return { is_error: Boolean(r.isError), text: texts(r.content), structured: r.structuredContent ?? null };
    });
  out.divide = await call("divide", { a: 7, b: 2 });
  out.divide_by_zero = await call("divide", { a: 1, b: 0 });
  out.count = await call("count", { steps: 3 }, { onprogress: (p) => out.progress.push([p.progress, p.total]) });
  out.ask_model = await call("ask_model", { question: "what is the answer?" });
  out.ask_user = await call("ask_user", { question: "who are you?" });
  out.read = await step(async () => {
    const r = await client.readResource({ uri: "fixture://greeting" });
    return { text: r.contents.map((c) => c.text ?? "").join("") };
  });
  out.prompt = await step(async () => {
    const r = await client.getPrompt({ name: "greet", arguments: { name: "Ada" } });
    return { texts: r.messages.map((m) => m.content.text ?? null) };
  });
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
