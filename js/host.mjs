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
import { existsSync, readFileSync, rmSync } from "node:fs";
import { createRequire, register, syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync, spawn } from "node:child_process";
import { constants as osConstants } from "node:os";

const PROTOCOL = 1;
const file = process.argv[2];

// Upstream's extensions that run pi again (the subagent example) re-run the current script —
// `process.argv[1]`, this host — with pi's command line. The host then stands in for pi: it runs
// the pi executable it was started by (`PI_EXECUTABLE`, set below) with those arguments, passes
// signals on and exits as pi does. An extension file never starts with `-`.
if (file?.startsWith("-") && process.env.PI_EXECUTABLE) {
  const pi = spawn(process.env.PI_EXECUTABLE, process.argv.slice(2), { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => pi.kill(signal));
  pi.on("error", (e) => {
    process.stderr.write(`pi: ${process.env.PI_EXECUTABLE}: ${e.message}\n`);
    process.exit(1);
  });
  pi.on("exit", (code, signal) => process.exit(code ?? 128 + (osConstants.signals[signal] ?? 0)));
  await new Promise(() => {}); // nothing of the host below runs
}
process.env.PI_EXECUTABLE = process.argv[3];

// The module loader pi writes next to this host (loader-VERSION.mjs beside host-VERSION.mjs).
register(import.meta.url.replace(/host-([^/]*)\.mjs$/, "loader-$1.mjs"), import.meta.url, { data: { pi: process.argv[3] } });
// The protocol owns stdout: only `send` writes there. An extension (or a library it uses) that
// writes to process.stdout directly writes to stderr — pi's extension log — instead.
const protocolWrite = process.stdout.write.bind(process.stdout);
const send = (message) => protocolWrite(JSON.stringify(message) + "\n");
// Terminal notifications and titles (OSC sequences, `ESC ] … BEL|ST`: nothing that moves the
// cursor) reach the terminal where pi draws one; everything else is the log.
const OSC_ONLY = /^(?:\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))+$/;
process.stdout.write = (chunk, encoding, callback) => {
  const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
  if (uiPresent && OSC_ONLY.test(text)) {
    send({ type: "ui", method: "terminal_write", data: text });
    if (typeof encoding === "function") encoding();
    else callback?.();
    return true;
  }
  return process.stderr.write(chunk, encoding, callback);
};
const log = (...args) => process.stderr.write(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ") + "\n");
console.log = console.info = console.debug = console.warn = console.error = log;

const handlers = new Map(); // event -> [handler]
const tools = new Map(); // name -> definition
const commands = new Map(); // name -> definition
const shutdown = new AbortController();

const flags = new Map(); // name -> { type, default, description }
const givenFlags = JSON.parse(process.env.PI_EXTENSION_FLAGS || "{}"); // name -> value | true
const shortcuts = new Map(); // key -> { description, handler }
const renderers = new Map(); // customType -> renderer (drawn only where there is a UI)
const providers = new Map(); // name -> config

/** Upstream's event bus between extensions: what this one emits reaches its own listeners and,
 *  through pi, every other extension's (`{"type":"bus"}` lines; the data must be JSON). */
const busListeners = new Map();
function deliver(channel, data) {
  for (const listener of busListeners.get(channel) ?? []) {
    try {
      listener(data);
    } catch (error) {
      log(`pi js host: event bus ${channel}: ${error?.stack ?? error}`);
    }
  }
}
function eventBus() {
  const listeners = busListeners;
  return {
    on(channel, listener) {
      if (!listeners.has(channel)) listeners.set(channel, new Set());
      listeners.get(channel).add(listener);
      return () => listeners.get(channel)?.delete(listener);
    },
    emit(channel, data) {
      send({ type: "bus", channel: String(channel), data: data ?? null });
      deliver(channel, data);
    },
  };
}

/** A member of upstream's API this host does not carry out yet: says so when called, never
 *  pretends to have done it. */
const unsupported = (name) => () => {
  throw new Error(`${name.startsWith("ctx.") ? name : `pi.${name}`} is not supported by pi's JavaScript host yet`);
};

/** Upstream's `pi.exec`: runs a program (no shell), its output collected. */
function exec(command, args = [], options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd ?? process.cwd(), signal: options.signal, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let killed = false;
    const timer = options.timeout ? setTimeout(() => ((killed = true), child.kill("SIGTERM")), options.timeout) : undefined;
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ stdout, stderr: stderr + String(error?.message ?? error), code: 127, killed });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code: code ?? 1, killed: killed || Boolean(signal) });
    });
  });
}

const pi = {
  on(event, handler) {
    if (!handlers.has(event)) handlers.set(event, []);
    handlers.get(event).push(handler);
  },
  // After start (from a handler or a command), pi offers it from its next write on.
  registerTool(definition) {
    tools.set(definition.name, definition);
    if (registered) send({ type: "register_tools", tools: [toolSpec(definition)] });
  },
  registerCommand(name, definition) {
    commands.set(name, typeof definition === "function" ? { handler: definition } : definition);
  },
  registerFlag(name, options = {}) {
    flags.set(name, options);
  },
  // `pi --name [value]` (pi hands the options it does not know to extensions); else the
  // declared default. A boolean flag given without a value is true.
  getFlag(name) {
    const declared = flags.get(name);
    if (!declared) return undefined;
    if (!(name in givenFlags)) return declared.default;
    const value = givenFlags[name];
    if (declared.type === "boolean") return value === true || value === "true";
    return value === true ? "" : value;
  },
  // Keys in pi-tui's id form, modifiers in its order (`alt+ctrl+P` → `ctrl+alt+p`).
  registerShortcut(shortcut, options) {
    const parts = String(shortcut).toLowerCase().split("+");
    const key = parts.pop();
    const order = ["ctrl", "shift", "alt", "super"];
    shortcuts.set([...order.filter((m) => parts.includes(m)), key].join("+"), options);
  },
  registerMessageRenderer(customType, renderer) {
    renderers.set(customType, renderer);
  },
  // Served by this host: pi sends the provider's requests (`--provider NAME`); the config's
  // `streamSimple`, else pi-ai's own for its `api` (with its `baseUrl`), makes them.
  registerProvider(name, config) {
    providers.set(name, config);
  },
  unregisterProvider(name) {
    providers.delete(name);
  },
  events: eventBus(),
  exec,
  // During a command: the prompt pi runs after it; otherwise a prompt pi runs after its
  // running job (RPC, interactive), as upstream's `deliverAs: "followUp"`.
  sendUserMessage(content) {
    const text = typeof content === "string" ? content : (content ?? []).filter((c) => c?.type === "text").map((c) => c.text).join("\n");
    if (inCommand > 0) pendingPrompt = text;
    else send({ type: "action", action: "prompt", text });
  },
  // Written by pi as a `custom_message` and in the model's context from its next write (a
  // prompt's start, a turn's end). `triggerTurn` is not carried out: said in the log.
  // `triggerTurn`: pi (RPC, interactive) asks the model again after its running job.
  sendMessage(message, options = {}) {
    const display = message?.display !== false;
    send({ type: "send_message", customType: String(message?.customType ?? ""), content: message?.content ?? "", display });
    if (display && uiPresent) showMessage(message);
    if (options.triggerTurn) send({ type: "action", action: "resume" });
  },
  // Kept by pi and written as a `custom` session entry at its next write (a prompt's start, a
  // turn's end, the session's end).
  appendEntry(customType, data) {
    send({ type: "append_entry", customType: String(customType), data: data ?? null });
  },
  // Written by pi at its next session write; known here at once.
  setSessionName(name) {
    sessionName = String(name);
    send({ type: "session_entry", entry: { type: "session_info", name: sessionName } });
  },
  getSessionName() {
    return sessionName ?? sessionManager(lastWire).getSessionName();
  },
  setLabel(entryId, label) {
    send({ type: "session_entry", entry: { type: "label", targetId: String(entryId), ...(label === undefined ? {} : { label: String(label) }) } });
  },
  // Known from the ctx of session_start, before_agent_start, agent_start and turn_start.
  getActiveTools() {
    if (!knownTools) throw new Error("pi.getActiveTools: the tools are known from session_start on");
    return [...activeTools];
  },
  getAllTools() {
    if (!knownTools) throw new Error("pi.getAllTools: the tools are known from session_start on");
    return knownTools.map((t) => ({ ...t }));
  },
  // Offered and run from pi's next write on (a prompt's start, a turn's end); known here at once.
  setActiveTools(names) {
    activeTools = [...names].map(String);
    send({ type: "set_active_tools", names: activeTools });
  },
  // Every slash command (extension commands, prompt templates, skills), as pi sent them with
  // the latest command.
  getCommands() {
    return (lastCommands ?? []).map((c) => ({ ...c, sourceInfo: { ...c.sourceInfo } }));
  },
  // Taken from pi's next job (RPC, interactive) or before print mode's prompt; false when pi
  // has no such model or no key for it.
  async setModel(model) {
    const known = knownModels.find((m) => m.provider === model?.provider && m.id === model?.id);
    if (!known) return false;
    const auth = await credentials(known);
    if (!auth.ok || (!auth.apiKey && known.api !== "faux")) return false;
    send({ type: "action", action: "set_model", provider: known.provider, id: known.id });
    return true;
  },
  getThinkingLevel() {
    return thinkingLevel;
  },
  setThinkingLevel(level) {
    thinkingLevel = String(level);
    send({ type: "action", action: "set_thinking_level", level: thinkingLevel });
  },
};
let pendingPrompt;
let thinkingLevel = "off"; // from the latest ctx, or as this extension set it
let inCommand = 0; // commands running now (their sendUserMessage is their follow-up prompt)
let sessionName; // set by this extension this run
let lastSystemPrompt; // from the latest agent_start / turn_start ctx
let lastCommands; // upstream's SlashCommandInfo list, from the latest command's ctx
let lastWire; // the latest ctx pi sent (its session file, for `pi.getSessionName`)
let knownTools; // every tool ({ name, description }), from the latest ctx that carried them
let activeTools = [];

/** One model request of a provider this extension registered: upstream's `streamSimple(model,
 *  context, options)` (the config's own, else pi-ai's for the config's `api`); each event goes
 *  to pi as a `stream` line, the final message is the reply. */
async function serveProvider(id, { provider, model, context, options }) {
  const config = providers.get(provider);
  if (!config) throw new Error(`no provider ${provider}`);
  const full = { ...model, provider, api: model.api ?? config.api, baseUrl: model.baseUrl ?? config.baseUrl };
  const stream = config.streamSimple ?? (await import("@mariozechner/pi-ai")).streamSimple;
  const key = config.apiKey ? process.env[config.apiKey] ?? config.apiKey : undefined;
  const events = stream(full, context, { apiKey: key, headers: config.headers, signal: shutdown.signal, reasoning: options?.reasoning ?? undefined });
  const out = (event) => send({ type: "stream", id, event });
  const calls = new Map(); // content index -> position among the tool calls
  let final;
  for await (const event of events) {
    const block = event.partial?.content?.[event.contentIndex];
    switch (event.type) {
      case "text_delta":
        out({ kind: "text", delta: event.delta });
        break;
      case "thinking_delta":
        out({ kind: "thinking", delta: event.delta });
        break;
      case "toolcall_start":
        calls.set(event.contentIndex, calls.size);
        out({ kind: "toolcall_start", index: calls.get(event.contentIndex), id: block?.id ?? "", name: block?.name ?? "" });
        break;
      case "toolcall_delta":
        out({ kind: "toolcall_delta", index: calls.get(event.contentIndex) ?? 0, delta: event.delta });
        break;
      case "toolcall_end":
        out({ kind: "toolcall_end", index: calls.get(event.contentIndex) ?? 0 });
        break;
      case "done":
        final = event.message;
        break;
      case "error":
        final = event.error;
        break;
    }
  }
  return { message: final ?? (await events.result?.()) };
}

/** A theme that styles nothing (no terminal to style for): `fg("accent", text)` is `text`. Not
 *  a thenable (`then` is not one of its methods), so a promise can resolve to it. */
const plainTheme = new Proxy(
  {},
  {
    get: (_target, key) =>
      key === "then" ? undefined : key === "name" ? "plain" : (...args) => (typeof args[args.length - 1] === "string" ? args[args.length - 1] : ""),
  },
);

/** Upstream's `Theme` for a theme pi sent in `hello` (its colours as `[r, g, b]`, a 256-colour
 *  index, or `null` for the terminal's default): `fg`/`bg` wrap text in the token's colour. */
const BG_TOKENS = new Set(["selectedBg", "userMessageBg", "customMessageBg", "toolPendingBg", "toolSuccessBg", "toolErrorBg"]);
function themeOf(spec) {
  const sgr = (value, ground) =>
    Array.isArray(value) ? `\x1b[${ground};2;${value.join(";")}m` : typeof value === "number" ? `\x1b[${ground};5;${value}m` : `\x1b[${ground + 1}m`;
  const fgAnsi = new Map();
  const bgAnsi = new Map();
  for (const [token, value] of Object.entries(spec?.colors ?? {})) {
    if (BG_TOKENS.has(token)) bgAnsi.set(token, sgr(value, 48));
    else fgAnsi.set(token, sgr(value, 38));
  }
  const get = (map, token, what) => {
    const ansi = map.get(token);
    if (!ansi) throw new Error(`Unknown theme ${what}: ${token}`);
    return ansi;
  };
  const wrap = (on, off) => (text) => `\x1b[${on}m${text}\x1b[${off}m`;
  const theme = {
    name: spec?.name,
    sourcePath: spec?.path ?? undefined,
    fg: (token, text) => `${get(fgAnsi, token, "color")}${text}\x1b[39m`,
    bg: (token, text) => `${get(bgAnsi, token, "background color")}${text}\x1b[49m`,
    bold: wrap(1, 22),
    italic: wrap(3, 23),
    underline: wrap(4, 24),
    inverse: wrap(7, 27),
    strikethrough: wrap(9, 29),
    getFgAnsi: (token) => get(fgAnsi, token, "color"),
    getBgAnsi: (token) => get(bgAnsi, token, "background color"),
    getColorMode: () => "truecolor",
    getThinkingBorderColor: (level) => {
      const token = { minimal: "thinkingMinimal", low: "thinkingLow", medium: "thinkingMedium", high: "thinkingHigh", xhigh: "thinkingXhigh" }[level] ?? "thinkingOff";
      return (text) => theme.fg(token, text);
    },
    getBashModeBorderColor: () => (text) => theme.fg("bashMode", text),
  };
  return theme;
}
let knownThemes = []; // the themes pi has (interactive), from `hello`
let piCommands = []; // pi's own slash commands (interactive), from `hello`
/** `fd` (or Debian's `fdfind`) on PATH, for `@` file completions in an extension's editor. */
function fdPath() {
  for (const name of ["fd", "fdfind"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim() || null;
    } catch {}
  }
  return null;
}
let uiTheme; // the one in use (interactive), upstream's `Theme` shape

/** Upstream's answers where there is no UI (print mode): questions get "no answer", display
 *  calls do nothing, `notify` goes to the extension's log. */
const headlessUI = {
  select: async () => undefined,
  confirm: async () => false,
  input: async () => undefined,
  editor: async () => undefined,
  custom: async () => undefined,
  notify: (message, level = "info") => log(`[${level}] ${message}`),
  onTerminalInput: () => () => {},
  setStatus: () => {},
  setWorkingMessage: () => {},
  setWorkingVisible: () => {},
  setWorkingIndicator: () => {},
  setHiddenThinkingLabel: () => {},
  setWidget: () => {},
  setFooter: () => {},
  setHeader: () => {},
  setTitle: () => {},
  pasteToEditor: () => {},
  setEditorText: () => {},
  getEditorText: () => "",
  addAutocompleteProvider: () => {},
  setEditorComponent: () => {},
  getEditorComponent: () => undefined,
  theme: plainTheme,
  getAllThemes: () => [],
  getTheme: () => undefined,
  setTheme: () => ({ success: false, error: "UI not available" }),
  getToolsExpanded: () => false,
  setToolsExpanded: () => {},
};

/** The session's header and entries, read from its file (pi writes each entry before the
 *  events that follow it); none without a session file. */
function readSession(file) {
  let text = "";
  try {
    text = file ? readFileSync(file, "utf8") : "";
  } catch {}
  const records = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      records.push(JSON.parse(line));
    } catch {} // a torn last line
  }
  const header = records[0]?.type === "session" ? records[0] : undefined;
  return { header, entries: header ? records.slice(1) : records };
}

/** Upstream's read methods of `ctx.sessionManager`. The leaf is the last entry written. */
function sessionManager(wire) {
  const file = wire?.sessionFile ?? undefined;
  const entries = () => readSession(file).entries;
  const byId = (id) => entries().find((e) => e.id === id);
  const leaf = () => entries().at(-1);
  return {
    getSessionId: () => wire?.sessionId,
    getSessionFile: () => file,
    getCwd: () => wire?.cwd,
    getHeader: () => readSession(file).header,
    getEntries: entries,
    getEntry: byId,
    getLeafId: () => leaf()?.id ?? null,
    getLeafEntry: leaf,
    getBranch(fromId) {
      const all = new Map(entries().map((e) => [e.id, e]));
      const path = [];
      for (let entry = all.get(fromId ?? leaf()?.id); entry; entry = all.get(entry.parentId)) path.push(entry);
      return path.reverse();
    },
    getSessionName: () => entries().filter((e) => e.type === "session_info" && e.name).at(-1)?.name,
    getLabel: (id) => entries().filter((e) => e.type === "label" && e.targetId === id).at(-1)?.label,
  };
}

let uiPresent = false; // pi has a UI for extensions (RPC, interactive), from `hello`
let componentsDrawn = false; // pi draws what extensions render (interactive), from `hello`
let toolsExpanded = false; // Ctrl+O's state as this extension last set it
let knownModels = []; // every model pi knows (upstream's `Model` shape), from `hello`

/** Asks pi for a model's credentials (a `query_result` answers). */
function credentials(model) {
  const id = nextDialog++;
  return new Promise((resolve) => {
    dialogs.set(id, (result) => {
      dialogs.delete(id);
      resolve(result ?? { ok: false, error: "pi did not answer" });
    });
    send({ type: "credentials", id, provider: String(model?.provider ?? ""), model: String(model?.id ?? "") });
  });
}

/** Upstream's `ctx.modelRegistry`: pi's model table, and the credentials pi would send. */
const modelRegistry = {
  getAll: () => knownModels.map((m) => ({ ...m })),
  getAvailable: () => knownModels.map((m) => ({ ...m })),
  find: (provider, id) => {
    const found = knownModels.find((m) => m.provider === provider && m.id === id);
    return found ? { ...found } : undefined;
  },
  hasConfiguredAuth: () => true,
  getError: () => undefined,
  refresh: () => {},
  getApiKeyAndHeaders: (model) => credentials(model),
  getApiKey: async (model) => (await credentials(model)).apiKey,
  getApiKeyForProvider: async (provider) => {
    const model = knownModels.find((m) => m.provider === provider);
    return model ? (await credentials(model)).apiKey : undefined;
  },
  getProviderDisplayName: (provider) => provider,
  isUsingOAuth: () => false,
};

/** Dialogs waiting for pi's answer (`ui_result`), by id. */
const dialogs = new Map();
let nextDialog = 1;

/** A dialog through pi (upstream's `extension_ui_request` in RPC mode): resolves to upstream's
 *  answer object, or to `{ cancelled: true }` when `timeout` ms pass or `signal` aborts first. */
function dialog(method, fields, opts = {}) {
  const id = nextDialog++;
  return new Promise((resolve) => {
    const done = (answer) => {
      if (!dialogs.delete(id)) return;
      clearTimeout(timer);
      resolve(answer ?? { cancelled: true });
    };
    const timer = opts.timeout ? setTimeout(() => done({ cancelled: true }), opts.timeout) : undefined;
    opts.signal?.addEventListener("abort", () => done({ cancelled: true }), { once: true });
    dialogs.set(id, done);
    send({ type: "ui", id, method, ...fields, ...(opts.timeout ? { timeout: opts.timeout } : {}) });
  });
}

/** Upstream's components (pi-coding-agent's `BorderedLoader`, `DynamicBorder`…) style with its
 *  global theme: initialised once, when a component opens and upstream's package is installed. */
let themeReady;
function initUpstreamTheme() {
  themeReady ??= import("@mariozechner/pi-coding-agent").then(
    (upstream) => upstream.initTheme?.(undefined, false),
    () => {}, // not installed: nothing of it can be in use
  );
  return themeReady;
}

/** A module of upstream's `pi-coding-agent` its index does not export (`dist/PATH`), from pi's
 *  JS folder (where this host lives, and where the host's own imports of it resolve);
 *  `undefined` when the package is not installed there. */
async function upstreamModule(path) {
  const url = new URL(`node_modules/@mariozechner/pi-coding-agent/dist/${path}`, import.meta.url);
  return existsSync(url) ? import(url.href) : undefined;
}

/** Open custom components, by id: their keys and width from pi (`ui_input`). */
const customs = new Map();

/** A component pi draws from the lines sent here: `make(tui, done)` builds it (`render(width)`,
 *  `handleInput(data)`, `invalidate()`); pi sends the keys (terminal bytes), the width and — for
 *  an editor — the text back (`ui_input`); `done(result)` closes it and resolves the promise.
 *  `fields` go with the opening request. Where pi has no component UI (RPC), pi cancels it and
 *  the promise resolves to `undefined`. */
function openComponent(make, fields) {
  const id = nextDialog++;
  let width = 80;
  let component;
  let closed = false;
  let done;
  const promise = new Promise((resolve) => {
    const render = () => {
      if (closed || !component) return;
      const lines = component.render(width).map(String);
      send({ type: "ui", method: "custom_render", customId: id, lines });
    };
    done = (result) => {
      if (closed) return;
      closed = true;
      customs.delete(id);
      dialogs.delete(id);
      component?.dispose?.();
      send({ type: "ui", method: "custom_close", customId: id });
      resolve(result);
    };
    const tui = {
      requestRender: () => queueMicrotask(render),
      get columns() {
        return width;
      },
      terminal: { get columns() { return width; }, rows: 24 },
      // Upstream's way to run a full-screen program from a component: pi hands the terminal
      // over (and `spawnSync(…, {stdio: "inherit"})` then runs on it) until `start()`.
      stop: () => handTerminalOver(),
      start: () => takeTerminalBack(),
    };
    customs.set(id, (input) => {
      if (input.width) {
        width = input.width;
        component?.invalidate?.();
      }
      try {
        if (typeof input.setText === "string") component?.setText?.(input.setText);
        if (input.data !== undefined) component?.handleInput?.(input.data);
        render();
      } catch (error) {
        // The component failed: said in the log, closed, never the host's end.
        log(`pi js host: ${fields.editor ? "ctx.ui.setEditorComponent" : "ctx.ui.custom"}: ${error?.stack ?? error}`);
        done(undefined);
      }
    });
    // pi's answer to the opening request comes only when pi closed it (cancelled, quitting).
    dialogs.set(id, () => done(undefined));
    // Opened at once (so the handler waiting on it is waiting for the user, whatever loading
    // upstream's package for the component takes), drawn when it is made.
    send({ type: "ui", id, method: "custom", lines: [], ...fields });
    initUpstreamTheme().then(() => make(tui, done)).then((made) => {
      component = made;
      if (closed) return component?.dispose?.();
      render();
    }, (error) => {
      log(`pi js host: ${fields.editor ? "ctx.ui.setEditorComponent" : "ctx.ui.custom"}: ${error?.stack ?? error}`);
      done(undefined);
    });
  });
  return { promise, close: () => done(undefined), get component() { return component; } };
}

/** The terminal handed over by pi (upstream's `tui.stop()` in a component): pi's process group,
 *  which a program started with `spawnSync(…, {stdio: "inherit"})` joins on the terminal
 *  (`pi tty-run`) — this host's own stdio is pi's protocol. `undefined` while pi has it. */
let terminalGroup;
let handoffId; // the request that holds the terminal (closed by `start()`)
function handTerminalOver() {
  if (terminalGroup !== undefined || !componentsDrawn) return;
  patchSpawnSync();
  const token = `${process.pid}-${Date.now()}`;
  const ack = join(tmpdir(), `pi-tty-${token}`);
  handoffId = nextDialog++;
  dialogs.set(handoffId, () => dialogs.delete(handoffId));
  send({ type: "ui", id: handoffId, method: "custom", handoff: true, token, lines: [] });
  // Synchronous, as upstream's `stop()` is: the program starts right after it returns.
  const tick = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 5000;
  while (!existsSync(ack) && Date.now() < until) Atomics.wait(tick, 0, 0, 10);
  try {
    terminalGroup = Number(readFileSync(ack, "utf8"));
    rmSync(ack, { force: true });
  } catch {
    log("pi js host: tui.stop(): pi did not hand the terminal over");
  }
}
function takeTerminalBack() {
  if (handoffId === undefined) return;
  terminalGroup = undefined;
  send({ type: "ui", method: "custom_close", customId: handoffId });
  handoffId = undefined;
}
/** `spawnSync(…, {stdio: "inherit"})` through `pi tty-run` while the terminal is handed over;
 *  installed the first time it is (every importer's binding follows: `syncBuiltinESMExports`),
 *  so an extension's start pays nothing for it. */
let spawnSyncPatched = false;
function patchSpawnSync() {
  if (spawnSyncPatched) return;
  spawnSyncPatched = true;
  const childProcess = createRequire(import.meta.url)("node:child_process");
  const originalSpawnSync = childProcess.spawnSync;
  childProcess.spawnSync = function (command, args, options) {
    const [argv, opts] = Array.isArray(args) ? [args, options] : [[], args];
    if (terminalGroup === undefined || opts?.stdio !== "inherit") return originalSpawnSync.apply(this, arguments);
    const helper = ["tty-run", "--pgid", String(terminalGroup), "--", String(command), ...argv.map(String)];
    return originalSpawnSync(process.env.PI_EXECUTABLE, helper, { ...opts, stdio: "ignore" });
  };
  syncBuiltinESMExports();
}

/** Upstream's `ctx.ui.custom(factory)`: the component the factory returns, drawn by pi in a box
 *  or as an overlay (`overlayOptions` are plain data: pi-tui's `visible` callback stays here). */
function custom(factory, options) {
  const { visible: _visible, ...overlayOptions } = options?.overlayOptions ?? {};
  const fields = { overlay: Boolean(options?.overlay), overlayOptions };
  return openComponent((tui, done) => factory(tui, uiTheme ?? plainTheme, {}, done), fields).promise;
}

/** Upstream's `ctx.ui.setEditorComponent(factory)`: the editor the factory returns (usually a
 *  subclass of upstream's `CustomEditor`) takes the place of pi's in the terminal, as upstream
 *  wires it: made with upstream's editor theme and keybindings (`~/.pi/agent/keybindings.json`),
 *  its text kept in step with pi's editor (`onChange`), `onSubmit` sends the message, and the
 *  app's actions it recognises (Esc, Ctrl+D, Ctrl+L…) are carried out by pi by their ids. `undefined`
 *  gives pi's own editor back. */
let editorComponent; // { factory, opened }

/** Upstream's editor theme and its manager of app and editor keybindings (modules its index
 *  does not export); without upstream's package (an editor of the extension's own), a plain
 *  theme and bindings that match nothing. */
async function upstreamEditorKit() {
  try {
    await initUpstreamTheme();
    const { getEditorTheme } = await upstreamModule("modes/interactive/theme/theme.js");
    const { KeybindingsManager } = await upstreamModule("core/keybindings.js");
    return { theme: getEditorTheme(), keybindings: KeybindingsManager.create() };
  } catch {
    const plain = (text) => text;
    const selectList = { selectedPrefix: plain, selectedText: plain, description: plain, scrollInfo: plain, noMatch: plain };
    return { theme: { borderColor: plain, selectList }, keybindings: { matches: () => false, getKeys: () => [] } };
  }
}
function setEditorComponent(factory) {
  editorComponent?.opened.close();
  editorComponent = undefined;
  if (typeof factory !== "function") return;
  const make = async (tui) => {
    const { theme, keybindings } = await upstreamEditorKit();
    const editor = await factory(tui, theme, keybindings);
    editor.focused = true;
    // Upstream gives a custom editor the app's completions: slash commands (pi's and this
    // extension's), paths, and `@` files where `fd` is installed.
    try {
      const { CombinedAutocompleteProvider } = await import("@mariozechner/pi-tui");
      const names = [...piCommands, ...commands.keys()];
      const slash = names.map((name) => ({ name, description: commands.get(name)?.description ?? "" }));
      editor.setAutocompleteProvider?.(new CombinedAutocompleteProvider(slash, process.cwd(), fdPath()));
    } catch {} // without upstream's package: the extension's own editor completes what it does
    const action = (id) => () => send({ type: "ui", method: "editor_action", action: id });
    editor.onSubmit = (text) => {
      editor.addToHistory?.(text);
      send({ type: "ui", method: "editor_submit", text });
    };
    editor.onChange = (text) => send({ type: "ui", method: "editor_change", text });
    if (editor.actionHandlers instanceof Map) {
      editor.onEscape ??= action("app.interrupt");
      editor.onCtrlD ??= action("app.exit");
      editor.onPasteImage ??= action("app.clipboard.pasteImage");
      // Extensions' shortcuts reach pi before the editor sees the key.
      editor.onExtensionShortcut ??= () => false;
      for (const id of Object.keys(keybindings.getEffectiveConfig?.() ?? {})) {
        if (id.startsWith("app.") && !editor.actionHandlers.has(id)) editor.actionHandlers.set(id, action(id));
      }
    }
    return editor;
  };
  editorComponent = { factory, opened: openComponent(make, { editor: true }) };
}

/** Upstream's `ctx.ui.addAutocompleteProvider(factory)`: each factory is given the provider
 *  before it (first: pi's own completions, which answer nothing here — pi lists its `@file` and
 *  path completions itself) and its provider is asked about the editor's text as the user types
 *  (pi sends `lines`, `cursorLine`, `cursorCol`); its suggestions (`items`, `prefix`) go back to
 *  pi, which lists them and puts a chosen `value` in place of the prefix. */
const completers = [];
const piCompletions = {
  getSuggestions: async () => null,
  applyCompletion(lines, cursorLine, cursorCol, item, prefix) {
    const line = lines[cursorLine] ?? "";
    const before = line.slice(0, cursorCol - prefix.length);
    const next = [...lines];
    next[cursorLine] = before + item.value + line.slice(cursorCol);
    return { lines: next, cursorLine, cursorCol: before.length + item.value.length };
  },
  shouldTriggerFileCompletion: () => true,
};
function addAutocompleteProvider(factory) {
  const provider = factory(completers.at(-1) ?? piCompletions);
  if (!provider) return;
  completers.push(provider);
  if (completers.length > 1) return;
  // The first provider: pi is told to ask this extension (a component that draws nothing).
  const id = nextDialog++;
  let asking;
  customs.set(id, async (input) => {
    const ask = input.complete;
    if (!ask) return;
    asking?.abort();
    const controller = (asking = new AbortController());
    let answer = null;
    try {
      answer = await completers.at(-1).getSuggestions(ask.lines ?? [""], ask.cursorLine ?? 0, ask.cursorCol ?? 0, { signal: controller.signal, force: false });
    } catch (error) {
      log(`pi js host: autocomplete: ${error?.stack ?? error}`);
    }
    if (controller.signal.aborted) return;
    const items = (answer?.items ?? []).map((item) => ({
      value: String(item.value),
      label: String(item.label ?? item.value),
      description: item.description === undefined ? undefined : String(item.description),
    }));
    send({ type: "ui", method: "autocomplete_result", customId: id, seq: ask.seq, prefix: String(answer?.prefix ?? ""), items });
  });
  // pi without an editor to complete in (RPC) cancels it.
  dialogs.set(id, () => {
    customs.delete(id);
    dialogs.delete(id);
  });
  send({ type: "ui", id, method: "custom", autocomplete: true, lines: [] });
}

/** Upstream's `ctx.ui.onTerminalInput(handler)`: each key pi's terminal reads (its bytes) goes to
 *  the handlers; the keys travel to this process after pi has taken them, so a handler's
 *  `consume` / `data` answer changes nothing (said in the log once). Returns the unsubscribe. */
const inputListeners = new Set();
let inputListening = false;
let consumeSaid = false;
function onTerminalInput(handler) {
  inputListeners.add(handler);
  if (!inputListening && componentsDrawn) {
    inputListening = true;
    const id = nextDialog++;
    customs.set(id, (input) => {
      if (input.data === undefined) return;
      for (const listener of inputListeners) {
        try {
          const answer = listener(input.data);
          if ((answer?.consume || answer?.data !== undefined) && !consumeSaid) {
            consumeSaid = true;
            log("pi js host: ctx.ui.onTerminalInput: pi reads keys before extensions hear them; consume/data are not applied");
          }
        } catch (error) {
          log(`pi js host: onTerminalInput: ${error?.stack ?? error}`);
        }
      }
    });
    dialogs.set(id, () => {
      customs.delete(id);
      dialogs.delete(id);
      inputListening = false;
    });
    send({ type: "ui", id, method: "custom", terminalInput: true, lines: [] });
  }
  return () => inputListeners.delete(handler);
}

/** A displayed custom message in pi's transcript: drawn by the extension's renderer
 *  (`registerMessageRenderer`), else as `[customType] text`. */
function showMessage(message) {
  const text = typeof message.content === "string" ? message.content : (message.content ?? []).filter((c) => c?.type === "text").map((c) => c.text).join("\n");
  let lines = [`[${message.customType}] ${text}`];
  const renderer = renderers.get(message.customType);
  if (renderer) {
    try {
      lines = renderer({ role: "custom", ...message, content: text }, { expanded: false }, plainTheme).render(panelWidth).map(String);
    } catch (error) {
      log(`pi js host: message renderer ${message.customType}: ${error?.stack ?? error}`);
    }
  }
  send({ type: "ui", method: "message", lines });
}

/** Upstream's `setFooter` / `setHeader` components: rendered here (100 columns; pi crops) and
 *  sent as lines when they ask to be drawn, after each command, and once a second while one is
 *  set (what they show — usage, the git branch — changes as pi works); only changes are sent. */
const panels = new Map(); // "setFooter" | "setHeader" -> component
const panelLines = new Map(); // the lines last sent
const panelWidth = 100;
let panelTimer;
function renderPanels() {
  for (const [method, component] of panels) {
    try {
      const lines = component.render(panelWidth).map(String);
      if (same(panelLines.get(method), lines)) continue;
      panelLines.set(method, lines);
      send({ type: "ui", method, lines });
    } catch (error) {
      log(`pi js host: ${method}: ${error?.stack ?? error}`);
      panels.delete(method);
      send({ type: "ui", method, lines: null });
    }
  }
}
function gitBranch() {
  try {
    return execFileSync("git", ["rev-parse", "--abbrev-ref", "HEAD"], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim() || null;
  } catch {
    return null;
  }
}
function setPanel(method, factory) {
  panels.get(method)?.dispose?.();
  panels.delete(method);
  panelLines.delete(method);
  if (!panels.size) panelTimer = clearInterval(panelTimer);
  if (!factory) return send({ type: "ui", method, lines: null });
  const tui = { requestRender: () => queueMicrotask(renderPanels), get columns() { return panelWidth; }, terminal: { get columns() { return panelWidth; }, rows: 24 } };
  const footerData = { getGitBranch: gitBranch, onBranchChange: () => () => {}, getExtensionStatuses: () => new Map(), getAvailableProviderCount: () => 0 };
  Promise.resolve(initUpstreamTheme())
    .then(() => factory(tui, uiTheme ?? plainTheme, footerData))
    .then((component) => {
      panels.set(method, component);
      renderPanels();
      panelTimer ??= setInterval(renderPanels, 1000);
      panelTimer.unref?.();
    }, (error) => log(`pi js host: ${method}: ${error?.stack ?? error}`));
}

/** `ctx.ui` when pi has a UI for extensions (RPC, interactive): upstream's methods over the
 *  protocol; what a terminal alone can do keeps its headless answer. */
const protocolUI = {
  ...headlessUI,
  select: async (title, options, opts) => {
    const answer = await dialog("select", { title, options }, opts);
    return answer.cancelled ? undefined : answer.value;
  },
  confirm: async (title, message, opts) => {
    const answer = await dialog("confirm", { title, message }, opts);
    return answer.cancelled ? false : Boolean(answer.confirmed);
  },
  input: async (title, placeholder, opts) => {
    const answer = await dialog("input", { title, placeholder }, opts);
    return answer.cancelled ? undefined : answer.value;
  },
  editor: async (title, prefill) => {
    const answer = await dialog("editor", { title, prefill });
    return answer.cancelled ? undefined : answer.value;
  },
  notify: (message, notifyType = "info") => send({ type: "ui", method: "notify", message, notifyType }),
  setStatus: (statusKey, statusText) => send({ type: "ui", method: "setStatus", statusKey, statusText }),
  setWidget: (widgetKey, content, options) =>
    send({ type: "ui", method: "setWidget", widgetKey, widgetLines: Array.isArray(content) ? content : undefined, widgetPlacement: options?.placement }),
  setTitle: (title) => send({ type: "ui", method: "setTitle", title }),
  setFooter: (factory) => setPanel("setFooter", factory),
  setHeader: (factory) => setPanel("setHeader", factory),
  setHiddenThinkingLabel: (label) => send({ type: "ui", method: "setHiddenThinkingLabel", label }),
  setWorkingMessage: (message) => send({ type: "ui", method: "setWorkingMessage", message }),
  setWorkingIndicator: (options) => send({ type: "ui", method: "setWorkingIndicator", frames: options?.frames }),
  setWorkingVisible: (visible) => send({ type: "ui", method: "setWorkingVisible", visible: Boolean(visible) }),
  setEditorText: (text) => send({ type: "ui", method: "set_editor_text", text }),
  pasteToEditor: (text) => send({ type: "ui", method: "set_editor_text", text }),
  getEditorText: () => editorComponent?.opened.component?.getText?.() ?? "",
  // Themes (the interactive mode's): the one in use, every one pi loaded, switching (pi draws
  // with it at once and keeps it in the settings, as upstream).
  get theme() {
    return uiTheme ?? plainTheme;
  },
  getAllThemes: () => knownThemes.map((t) => ({ name: t.name, path: t.path ?? undefined })),
  getTheme: (name) => {
    const found = knownThemes.find((t) => t.name === name);
    return found ? themeOf(found) : undefined;
  },
  setTheme: (themeOrName) => {
    const name = typeof themeOrName === "string" ? themeOrName : themeOrName?.name;
    const found = knownThemes.find((t) => t.name === name);
    if (!found) return { success: false, error: knownThemes.length ? `Theme not found: ${name}` : "UI not available" };
    uiTheme = themeOf(found);
    send({ type: "ui", method: "setTheme", name });
    return { success: true };
  },
  getToolsExpanded: () => toolsExpanded,
  setToolsExpanded: (expanded) => {
    toolsExpanded = Boolean(expanded);
    send({ type: "ui", method: "setToolsExpanded", expanded: toolsExpanded });
  },
  setEditorComponent,
  getEditorComponent: () => editorComponent?.factory,
  addAutocompleteProvider,
  onTerminalInput,
  custom,
};

/** The `ctx` handlers get: print mode has no UI, so questions resolve to "no answer". */
function context(wire) {
  if (wire?.sessionFile) lastWire = wire;
  if (Array.isArray(wire?.commands)) lastCommands = wire.commands;
  if (typeof wire?.systemPrompt === "string") lastSystemPrompt = wire.systemPrompt;
  if (typeof wire?.thinkingLevel === "string") thinkingLevel = wire.thinkingLevel;
  if (Array.isArray(wire?.tools)) {
    knownTools = wire.tools;
    activeTools = wire.activeTools ?? wire.tools.map((t) => t.name);
  }
  return {
    hasUI: Boolean(wire?.hasUI),
    cwd: wire?.cwd,
    signal: shutdown.signal,
    model: wire?.model,
    modelRegistry,
    // For tools: the call's W3C trace context, attribution, and the pi binary (a nested `pi`
    // given TRACEPARENT joins this trace).
    traceparent: wire?.traceparent ?? undefined,
    attribution: wire?.attribution ?? {},
    piExecutable: wire?.piExecutable ?? undefined,
    sessionManager: sessionManager(wire),
    ui: wire?.hasUI ? protocolUI : headlessUI,
    // Idle between prompts (commands, session start and end); working during a prompt's events.
    isIdle: () => wire?.idle === true,
    // As pi sent them with this event: queued user messages, and the context's size.
    hasPendingMessages: () => wire?.pendingMessages === true,
    // Aborts the running prompt at once (RPC, interactive).
    abort: () => send({ type: "action", action: "abort" }),
    // A fresh session, a fork before a user message, another session file, a move in the
    // tree — after the running command (RPC, interactive): resolved at once (the command has
    // to end first); `withSession` runs once the session has changed.
    newSession: async (options = {}) => sessionAction("new_session", {}, options, wire),
    fork: async (entryId, options = {}) =>
      sessionAction("fork", { entryId: String(entryId), position: options.position === "at" ? "at" : "before" }, options, wire),
    switchSession: async (sessionPath, options = {}) => sessionAction("switch_session", { path: String(sessionPath) }, options, wire),
    navigateTree: async (targetId, options = {}) =>
      sessionAction("navigate_tree", { targetId: String(targetId), summarize: Boolean(options.summarize) }, {}, wire),
    // Commands run while pi is idle (jobs run one at a time): nothing streams to wait for.
    waitForIdle: async () => {},
    // Asks pi (RPC, interactive) to end once the running job is done; print mode ends anyway.
    shutdown: () => send({ type: "action", action: "shutdown" }),
    // Asks pi to reload (extensions, skills, prompts, settings) after the running job.
    reload: async () => send({ type: "action", action: "reload" }),
    getContextUsage: () => {
      if (typeof wire?.contextTokens !== "number" || !wire?.model?.contextWindow) return undefined;
      const contextWindow = wire.model.contextWindow;
      return { tokens: wire.contextTokens, contextWindow, percent: (wire.contextTokens / contextWindow) * 100 };
    },
    // Asks pi to compact after the running job; `onComplete(result)` / `onError(error)` hear
    // how it went.
    compact: (options = {}) => {
      const id = nextDialog++;
      dialogs.set(id, (reply) => {
        dialogs.delete(id);
        const call = (f, value) => Promise.resolve(f?.(value)).catch((e) => log(`pi js host: compact callback: ${e?.stack ?? e}`));
        if (reply?.ok) call(options.onComplete, reply.result);
        else call(options.onError, new Error(reply?.error ?? "the compaction did not run"));
      });
      send({ type: "action", action: "compact", instructions: options.customInstructions, id });
    },
    // The running prompt's system prompt, as pi sent it at the prompt's start and each turn.
    getSystemPrompt: () => lastSystemPrompt ?? "",
  };
}

/** Asks pi for a session action (`new_session`, `fork`, `switch_session`, `navigate_tree`);
 *  `options.withSession` runs with a ctx on the session pi then uses (its file and id from pi's
 *  answer) once pi says it changed. */
function sessionAction(action, fields, options, wire) {
  const id = nextDialog++;
  dialogs.set(id, (result) => {
    dialogs.delete(id);
    if (!result?.cancelled) {
      const next = context({ ...wire, idle: true, sessionFile: result?.sessionFile ?? wire?.sessionFile, sessionId: result?.sessionId ?? wire?.sessionId });
      Promise.resolve(options.withSession?.(next)).catch((error) => log(`pi js host: withSession: ${error?.stack ?? error}`));
    }
  });
  send({ type: "action", action, id, ...fields });
  return { cancelled: false };
}

/** A tool as pi offers it to the model. */
const toolSpec = (t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters ?? { type: "object", properties: {} } });

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
    case "user_bash": {
      // Upstream's `{ result }` is the command's outcome; `{ operations }` runs it here with the
      // extension's own `exec` (over SSH, in a sandbox…), its output collected.
      for (const handler of list) {
        const result = await handler(payload, ctx);
        if (result?.result) return { result: result.result };
        if (result?.operations?.exec) {
          let output = "";
          const { exitCode } = await result.operations.exec(payload.command, payload.cwd, {
            onData: (data) => (output += data.toString()),
            signal: shutdown.signal,
          });
          return { result: { output, exitCode, cancelled: exitCode === null, truncated: false } };
        }
      }
      return null;
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

/** Upstream's `renderCall` / `renderResult` of this extension's tools, for the transcript of
 *  pi's terminal: the call's lines (and the result's while it runs) when the call starts, the
 *  result's — collapsed and expanded, for Ctrl+O — when it ends, as `tool_render` calls. A
 *  renderer that throws is said in the log and pi draws that part its own way. */
const renderWidth = 100;
let rendererThemeReady;
function rendererTheme() {
  rendererThemeReady ??= initUpstreamTheme()
    .then(() => upstreamModule("modes/interactive/theme/theme.js"))
    .then((module) => ({ theme: module?.theme ?? uiTheme ?? plainTheme }), () => ({ theme: uiTheme ?? plainTheme }));
  return rendererThemeReady;
}
function toolRenderer(tool, toolCallId, params, wire) {
  if (!componentsDrawn || !toolCallId || !(tool.renderCall || tool.renderResult)) return undefined;
  const state = {};
  const renderContext = (extra) => ({ args: params, toolCallId, cwd: wire?.cwd ?? process.cwd(), invalidate() {}, lastComponent: undefined, state, executionStarted: true, argsComplete: true, showImages: false, isError: false, isPartial: false, expanded: false, ...extra });
  const lines = (what, make) => {
    try {
      return make()?.render(renderWidth).map(String) ?? [];
    } catch (error) {
      log(`pi js host: ${tool.name}.${what}: ${error?.stack ?? error}`);
      return undefined;
    }
  };
  const result = (theme, full, expanded) =>
    lines("renderResult", () => tool.renderResult(full, { expanded, isPartial: false }, theme, renderContext({ expanded, isError: Boolean(full.isError) })));
  return {
    async started() {
      const { theme } = await rendererTheme();
      const call = tool.renderCall ? lines("renderCall", () => tool.renderCall(params, theme, renderContext({ isPartial: true }))) : undefined;
      const partial = tool.renderResult ? lines("renderResult", () => tool.renderResult({ content: [], details: undefined }, { expanded: false, isPartial: true }, theme, renderContext({ isPartial: true }))) : undefined;
      send({ type: "ui", method: "tool_render", toolCallId, call, partial });
    },
    async ended(full) {
      if (!tool.renderResult) return;
      const { theme } = await rendererTheme();
      send({ type: "ui", method: "tool_render", toolCallId, collapsed: result(theme, full, false), expanded: result(theme, full, true) });
    },
  };
}

async function runTool(name, params, wire, toolCallId) {
  const tool = tools.get(name);
  if (!tool) throw new Error(`no tool ${name}`);
  const updates = () => {};
  const renderer = toolRenderer(tool, toolCallId, params ?? {}, wire);
  await renderer?.started();
  let result;
  try {
    result = await tool.execute(toolCallId || `call_${Date.now()}`, params ?? {}, shutdown.signal, updates, context(wire));
  } catch (error) {
    await renderer?.ended({ content: [{ type: "text", text: String(error?.message ?? error) }], details: undefined, isError: true });
    throw error;
  }
  await renderer?.ended({ content: result?.content ?? [], details: result?.details, isError: Boolean(result?.isError) });
  return {
    content: result?.content ?? [],
    details: result?.details,
    isError: Boolean(result?.isError),
    usage: result?.usage ?? result?.details?.usage,
    terminate: Boolean(result?.terminate),
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
    knownModels = Array.isArray(message.models) ? message.models : [];
    uiPresent = Boolean(message.hasUI);
    componentsDrawn = Boolean(message.components);
    knownThemes = Array.isArray(message.themes) ? message.themes : [];
    piCommands = Array.isArray(message.commands) ? message.commands.map(String) : [];
    const current = knownThemes.find((t) => t.name === message.theme);
    uiTheme = current ? themeOf(current) : undefined;
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
      tools: [...tools.values()].map(toolSpec),
      commands: [...commands.entries()].map(([name, c]) => ({ name, description: c.description ?? "" })),
      flags: [...flags.keys()].map((name) => ({ name })),
      shortcuts: [...shortcuts.entries()].map(([key, s]) => ({ key, description: s?.description ?? "" })),
      providers: [...providers.entries()].map(([name, c]) => ({ name, models: (c?.models ?? []).map((m) => ({ ...m })) })),
    });
  } else if (message.type === "event") {
    const { id, event, payload, ctx } = message;
    const idle = event === "session_start" || event === "session_shutdown";
    // Upstream's compaction event carries an AbortSignal for the extension's own model call.
    if (event === "session_before_compact") payload.signal = shutdown.signal;
    dispatch(event, payload, context({ ...ctx, idle })).then(
      (result) => send({ type: "result", id, result: result ?? null }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "tool") {
    const { id, name, params, ctx, toolCallId } = message;
    runTool(name, params, ctx, toolCallId).then(
      (result) => send({ type: "result", id, result }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "command") {
    const { id, name, args, ctx } = message;
    const command = commands.get(name);
    pendingPrompt = undefined;
    inCommand++;
    Promise.resolve(command ? command.handler(args ?? "", context({ ...ctx, idle: true })) : Promise.reject(new Error(`no command ${name}`)))
      .finally(() => inCommand--)
      .then(
        (result) => {
          send({ type: "result", id, result: { text: typeof result === "string" ? result : result?.text, prompt: result?.prompt ?? pendingPrompt } });
          if (panels.size) renderPanels();
        },
        (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
      );
  } else if (message.type === "bus") {
    deliver(message.channel, message.data);
  } else if (message.type === "provider") {
    serveProvider(message.id, message).then(
      (result) => send({ type: "result", id: message.id, result }),
      (error) => send({ type: "error", id: message.id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "shortcut") {
    const { id, key, ctx } = message;
    const shortcut = shortcuts.get(key);
    Promise.resolve(shortcut ? shortcut.handler(context({ ...ctx, idle: true })) : Promise.reject(new Error(`no shortcut ${key}`))).then(
      () => send({ type: "result", id, result: null }),
      (error) => send({ type: "error", id, message: String(error?.message ?? error) }),
    );
  } else if (message.type === "ui_input") {
    customs.get(message.customId)?.(message);
  } else if (message.type === "ui_result" || message.type === "query_result") {
    dialogs.get(message.id)?.(message.result);
  } else if (message.type === "shutdown") {
    shutdown.abort();
    break;
  }
}
process.exit(0);
