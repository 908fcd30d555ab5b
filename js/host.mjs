// pi's JavaScript extension host. Runs one extension file written in upstream pi's shape —
//
//     export default function (pi) {
//       pi.on("tool_call", async (event, ctx) => { … });
//       pi.registerTool({ name, description, parameters, async execute(toolCallId, params, signal, onUpdate, ctx) { … } });
//     }
//
// — and speaks pi's process protocol for it on stdin/stdout (docs/extension-protocol.md).
// Usage: node host.mjs EXTENSION_FILE PI_EXECUTABLE. The extension's console output goes to
// stderr (pi's extension log), never into the protocol. TypeScript modules (`.ts`, `.mts`,
// `.cts`) are compiled by `PI_EXECUTABLE strip-types FILE` as Node loads them, each at its own
// URL, so imports resolve from the extension's own folder (siblings, its node_modules).

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { basename } from "node:path";
import { register } from "node:module";

const PROTOCOL = 1;
const file = process.argv[2];

// The module loader pi writes next to this host (loader-VERSION.mjs beside host-VERSION.mjs).
register(import.meta.url.replace(/host-([^/]*)\.mjs$/, "loader-$1.mjs"), import.meta.url, { data: { pi: process.argv[3] } });
// The protocol owns stdout: only `send` writes there. An extension (or a library it uses) that
// writes to process.stdout directly writes to stderr — pi's extension log — instead.
const protocolWrite = process.stdout.write.bind(process.stdout);
const send = (message) => protocolWrite(JSON.stringify(message) + "\n");
process.stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);
const log = (...args) => process.stderr.write(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ") + "\n");
console.log = console.info = console.debug = console.warn = console.error = log;

const handlers = new Map(); // event -> [handler]
const tools = new Map(); // name -> definition
const commands = new Map(); // name -> definition
const shutdown = new AbortController();

const pi = {
  on(event, handler) {
    if (!handlers.has(event)) handlers.set(event, []);
    handlers.get(event).push(handler);
  },
  registerTool(definition) {
    tools.set(definition.name, definition);
  },
  registerCommand(name, definition) {
    commands.set(name, typeof definition === "function" ? { handler: definition } : definition);
  },
  // During a command: the prompt pi runs after it (upstream's sendUserMessage).
  sendUserMessage(text) {
    pendingPrompt = typeof text === "string" ? text : JSON.stringify(text);
  },
};
let pendingPrompt;

/** The `ctx` handlers get: print mode has no UI, so questions resolve to "no answer". */
function context(wire) {
  return {
    hasUI: Boolean(wire?.hasUI),
    cwd: wire?.cwd,
    signal: shutdown.signal,
    model: wire?.model,
    // For tools: the call's W3C trace context, attribution, and the pi binary (a nested `pi`
    // given TRACEPARENT joins this trace).
    traceparent: wire?.traceparent ?? undefined,
    attribution: wire?.attribution ?? {},
    piExecutable: wire?.piExecutable ?? undefined,
    sessionManager: {
      getSessionId: () => wire?.sessionId,
      getSessionFile: () => wire?.sessionFile ?? undefined,
    },
    ui: {
      notify: (message, level = "info") => log(`[${level}] ${message}`),
      confirm: async () => false,
      select: async () => undefined,
      input: async () => undefined,
      setStatus: () => {},
      setWidget: () => {},
    },
  };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** Runs this extension's handlers of one event in order, with upstream's chaining rules. */
async function dispatch(event, payload, ctx) {
  const list = handlers.get(event) ?? [];
  switch (event) {
    case "tool_call": {
      const before = structuredClone(payload.input);
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.input !== undefined) payload.input = result.input;
        if (result?.block) return { block: true, reason: result.reason, input: same(before, payload.input) ? undefined : payload.input };
      }
      return same(before, payload.input) ? null : { input: payload.input };
    }
    case "tool_result": {
      let patch = null;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (!result) continue;
        patch = { ...(patch ?? {}), ...result };
        Object.assign(payload, result);
      }
      return patch;
    }
    case "input": {
      let transformed = false;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.action === "handled") return { action: "handled" };
        if (result?.action === "transform") {
          payload.text = result.text;
          transformed = true;
        }
      }
      return transformed ? { action: "transform", text: payload.text } : null;
    }
    case "before_agent_start": {
      const messages = [];
      let systemPrompt;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.message) messages.push(result.message);
        if (result?.systemPrompt !== undefined) payload.systemPrompt = systemPrompt = result.systemPrompt;
      }
      return messages.length || systemPrompt !== undefined ? { messages, systemPrompt } : null;
    }
    case "context": {
      let replaced = false;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.messages) {
          payload.messages = result.messages;
          replaced = true;
        }
      }
      return replaced ? { messages: payload.messages } : null;
    }
    case "session_before_compact":
    case "session_before_tree":
    case "session_before_switch":
    case "session_before_fork": {
      let last = null;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.cancel) return { cancel: true };
        if (result) last = result;
      }
      return last;
    }
    default: {
      let last = null;
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result !== undefined && result !== null) last = result;
      }
      return last;
    }
  }
}

async function runTool(name, params, wire) {
  const tool = tools.get(name);
  if (!tool) throw new Error(`no tool ${name}`);
  const updates = () => {};
  const result = await tool.execute(`call_${Date.now()}`, params ?? {}, shutdown.signal, updates, context(wire));
  return {
    content: result?.content ?? [],
    details: result?.details,
    isError: Boolean(result?.isError),
    usage: result?.usage ?? result?.details?.usage,
  };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
let registered = false;
for await (const line of lines) {
  if (!line.trim()) continue;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log(`pi js host: not JSON from pi: ${line.slice(0, 80)}`);
    continue;
  }
  if (message.type === "hello" && !registered) {
    try {
      const module = await import(pathToFileURL(file).href);
      const factory = module.default;
      if (typeof factory !== "function") throw new Error("its default export is not a function (pi) => …");
      await factory(pi);
    } catch (error) {
      log(`pi js host: ${file}: ${error?.stack ?? error}`);
      // Why, in place of a register message: pi names it in its one-line load error.
      send({ type: "error", message: String(error?.message ?? error) });
      process.exit(2);
    }
    registered = true;
    send({
      type: "register",
      protocol: PROTOCOL,
      name: basename(file).replace(/\.(m?js|ts)$/, ""),
      events: [...handlers.keys()],
      tools: [...tools.values()].map((t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters ?? { type: "object", properties: {} } })),
      commands: [...commands.entries()].map(([name, c]) => ({ name, description: c.description ?? "" })),
    });
  } else if (message.type === "event") {
    const { id, event, payload, ctx } = message;
    dispatch(event, payload, context(ctx)).then(
      (result) => send({ type: "result", id, result: result ?? null }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "tool") {
    const { id, name, params, ctx } = message;
    runTool(name, params, ctx).then(
      (result) => send({ type: "result", id, result }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "command") {
    const { id, name, args, ctx } = message;
    const command = commands.get(name);
    pendingPrompt = undefined;
    Promise.resolve(command ? command.handler(args ?? "", context(ctx)) : Promise.reject(new Error(`no command ${name}`))).then(
      (result) => send({ type: "result", id, result: { text: typeof result === "string" ? result : result?.text, prompt: result?.prompt ?? pendingPrompt } }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "shutdown") {
    shutdown.abort();
    break;
  }
}
process.exit(0);
