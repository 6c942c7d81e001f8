// An ACP v2 (preview) agent written against the official TypeScript SDK 2.4.0's experimental v2
// API (`@agentclientprotocol/sdk/experimental/v2`: `agent()` with `onRequest`/`onNotification`,
// `ndJsonStream` over stdio), for acp-fast's v2 tests. It behaves like ts_sdk_agent.mjs, in v2's
// shape: `session/prompt` is answered at once with the user message's id (an acknowledgement);
// the turn runs after it and ends with a `state_update` to `idle` carrying the stop reason.
//
// - a plain prompt: `running`, the `user_message` upsert, the echo as `agent_message_chunk`s
//   of one `messageId`, `idle` with `end_turn`;
// - "write hello.txt": a `tool_call_update` upsert (kind `edit`), `requires_action`, a
//   permission request (v2: `title`, `subject: {type: "tool_call", toolCall}`), `running`, the
//   file written in the session's cwd only when allowed (v2 has no fs/*: the agent writes it),
//   the call `completed` or `failed`, a whole-message `agent_message` upsert replacing the
//   streamed text;
// - "slow": "tick N. " chunks 0.3 s apart (at most 40), `idle` with `cancelled` once
//   session/cancel comes (a pending permission request is withdrawn with $/cancel_request, and
//   a permission answered `cancelled` ends the turn `cancelled` too).
//
//     node ts_sdk_v2_agent.mjs SDK_PACKAGE_DIR   (the installed @agentclientprotocol/sdk)

import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdkDir = process.argv[2];
if (!sdkDir) {
  process.stderr.write("usage: node ts_sdk_v2_agent.mjs SDK_PACKAGE_DIR\n");
  process.exit(2);
}
const acp = await import(pathToFileURL(path.join(sdkDir, "dist/v2/stable/acp.js")).href);
const update = acp.methods.client.session.update;

const sessions = new Map(); // session id -> { cwd, turn: AbortController | null }
let messages = 0;
const messageId = () => `msg_${++messages}`;

function send(client, sessionId, body) {
  return client.notify(update, { sessionId, update: body });
}

function state(client, sessionId, value, stopReason) {
  const body = { sessionUpdate: "state_update", state: value };
  if (stopReason) body.stopReason = stopReason;
  return send(client, sessionId, body);
}

function say(client, sessionId, id, text) {
  return send(client, sessionId, {
    sessionUpdate: "agent_message_chunk",
    messageId: id,
    content: { type: "text", text },
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

async function write(client, sessionId, cwd, signal) {
  const target = path.join(cwd, "hello.txt");
  const toolCallId = "call_" + randomUUID().slice(0, 8);
  const reply = messageId();
  await say(client, sessionId, reply, "I'll write the file.");
  const toolCall = { toolCallId, title: "Write hello.txt", kind: "edit", status: "pending" };
  await send(client, sessionId, {
    sessionUpdate: "tool_call_update",
    ...toolCall,
    locations: [{ path: target }],
    rawInput: { path: target, content: "hi from the TypeScript SDK v2 agent\n" },
  });
  await state(client, sessionId, "requires_action");
  let allowed = false;
  let cancelled = false;
  try {
    const answer = await client.request(
      acp.methods.client.session.requestPermission,
      {
        sessionId,
        title: "Write hello.txt",
        subject: { type: "tool_call", toolCall },
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      },
      { cancellationSignal: signal, stopWaitingOnCancel: true },
    );
    allowed = answer.outcome.outcome === "selected" && answer.outcome.optionId === "allow";
    // A client that cancels the turn answers its pending requests `cancelled`; the SDK may
    // hand this agent that answer before its session/cancel, which came first on the wire.
    cancelled = answer.outcome.outcome === "cancelled";
  } catch (error) {
    if (!signal.aborted) throw error;
  }
  if (signal.aborted || cancelled) {
    await send(client, sessionId, { sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
    return "cancelled";
  }
  await state(client, sessionId, "running");
  if (allowed) {
    await writeFile(target, "hi from the TypeScript SDK v2 agent\n");
  }
  await send(client, sessionId, {
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: allowed ? "completed" : "failed",
  });
  // A whole-message upsert: replaces what the chunks of `reply` said.
  await send(client, sessionId, {
    sessionUpdate: "agent_message",
    messageId: reply,
    content: [{ type: "text", text: allowed ? "I wrote the file." : "I did not write the file." }],
  });
  return "end_turn";
}

async function turn(client, sessionId, session, userMessage, prompt, signal) {
  const text = prompt.map((block) => (block.type === "text" ? block.text : "")).join("");
  await state(client, sessionId, "running");
  await send(client, sessionId, { sessionUpdate: "user_message", messageId: userMessage, content: prompt });
  let stopReason = "end_turn";
  if (text.includes("write hello.txt")) {
    stopReason = await write(client, sessionId, session.cwd, signal);
  } else if (text.includes("slow")) {
    const id = messageId();
    for (let tick = 0; tick < 40 && !signal.aborted; tick++) {
      await say(client, sessionId, id, `tick ${tick}. `);
      await pause(300, signal);
    }
    if (signal.aborted) stopReason = "cancelled";
  } else {
    await say(client, sessionId, messageId(), text);
  }
  await state(client, sessionId, "idle", stopReason);
}

const app = acp
  .agent({ name: "acp-fast interop TypeScript SDK v2 agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "ts-sdk-v2-agent", title: "TypeScript SDK v2 agent", version: "1" },
    capabilities: {},
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = randomUUID().replaceAll("-", "");
    sessions.set(sessionId, { cwd: params.cwd, turn: null });
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw new acp.RequestError(-32602, `unknown session ${params.sessionId}`);
    }
    session.turn?.abort();
    const controller = (session.turn = new AbortController());
    const userMessage = messageId();
    // The acknowledgement goes first; the turn runs after it.
    setImmediate(() => {
      turn(client, params.sessionId, session, userMessage, params.prompt, controller.signal).catch((error) =>
        process.stderr.write(`turn failed: ${error}\n`),
      );
    });
    return { messageId: userMessage };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.turn?.abort();
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await connection.closed;
process.exit(0);
