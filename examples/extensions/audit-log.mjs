// Audit log: one JSON line per session start, tool call and session end, appended to
// $PI_AUDIT_LOG (default ./pi-audit.jsonl). Tool arguments are not written: only names and ids.
import { appendFileSync } from "node:fs";

export default function (pi) {
  const file = process.env.PI_AUDIT_LOG ?? "pi-audit.jsonl";
  const write = (record) => appendFileSync(file, JSON.stringify({ at: new Date().toISOString(), ...record }) + "\n");

  pi.on("session_start", async (event, ctx) => write({ event: "session_start", reason: event.reason, session: ctx.sessionManager.getSessionId() }));
  pi.on("tool_call", async (event) => {
    write({ event: "tool_call", tool: event.toolName, id: event.toolCallId });
    return undefined;
  });
  pi.on("session_shutdown", async () => write({ event: "session_shutdown" }));
}
