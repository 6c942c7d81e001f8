// An ACP agent written against the official TypeScript SDK 2.x API (`agent()` with
// `onRequest`/`onNotification`, `ndJsonStream` over stdio), written for acp-fast's interop
// tests: the SDK stopped shipping its example agent in 2.x, and 0.14's `AgentSideConnection`
// is gone. It behaves like agents/py_sdk_agent.py:
//
// - a plain prompt is echoed back as one agent_message_chunk;
// - "write hello.txt": a tool_call (kind `edit`), a permission request (allow / reject), the
//   file written in the session's cwd only when allowed, the call `completed` or `failed`;
// - "slow": "tick N. " chunks 0.3 s apart (at most 40), `cancelled` once session/cancel comes.
//
//     node ts_sdk_agent.mjs SDK_PACKAGE_DIR   (the installed @agentclientprotocol/sdk)

import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdkDir = process.argv[2];
if (!sdkDir) {
  process.stderr.write("usage: node ts_sdk_agent.mjs SDK_PACKAGE_DIR\n");
  process.exit(2);
}
const acp = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")).href);

const sessions = new Map(); // session id -> { cwd, turn: AbortController | null }

function say(client, sessionId, text) {
  return client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function write(client, sessionId, cwd) {
  const target = path.join(cwd, "hello.txt");
  const toolCallId = "call_" + randomUUID().slice(0, 8);
  await say(client, sessionId, "I'll write the file.");
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call",
      toolCallId,
      title: "Write hello.txt",
      kind: "edit",
      status: "pending",
      locations: [{ path: target }],
      rawInput: { path: target, content: "hi from the TypeScript SDK agent\n" },
    },
  });
  const answer = await client.request(acp.methods.client.session.requestPermission, {
    sessionId,
    toolCall: { toolCallId, title: "Write hello.txt", kind: "edit", status: "pending" },
    options: [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "reject", name: "Reject", kind: "reject_once" },
    ],
  });
  const allowed = answer.outcome.outcome === "selected" && answer.outcome.optionId === "allow";
  if (allowed) {
    await writeFile(target, "hi from the TypeScript SDK agent\n");
  }
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "tool_call_update", toolCallId, status: allowed ? "completed" : "failed" },
  });
  await say(client, sessionId, allowed ? " Written." : " Not written.");
  return { stopReason: "end_turn" };
}

async function prompt({ params, client }) {
  const session = sessions.get(params.sessionId);
  if (!session) {
    throw new acp.RequestError(-32602, `unknown session ${params.sessionId}`);
  }
  const text = params.prompt.map((block) => (block.type === "text" ? block.text : "")).join("");
  session.turn?.abort();
  const turn = (session.turn = new AbortController());
  if (text.includes("write hello.txt")) {
    return write(client, params.sessionId, session.cwd);
  }
  if (text.includes("slow")) {
    for (let tick = 0; tick < 40; tick++) {
      await say(client, params.sessionId, `tick ${tick}. `);
      await pause(300, turn.signal);
      if (turn.signal.aborted) {
        return { stopReason: "cancelled" };
      }
    }
    return { stopReason: "end_turn" };
  }
  await say(client, params.sessionId, text);
  return { stopReason: "end_turn" };
}

const app = acp
  .agent({ name: "acp-fast interop TypeScript SDK agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "ts-sdk-agent", title: "TypeScript SDK agent", version: "1" },
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = randomUUID().replaceAll("-", "");
    sessions.set(sessionId, { cwd: params.cwd, turn: null });
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, prompt)
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.turn?.abort();
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await connection.closed;
process.exit(0);
