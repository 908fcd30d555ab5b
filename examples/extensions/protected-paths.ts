/**
 * Protected paths: `write` and `edit` may not touch secrets or version-control internals.
 * TypeScript in upstream pi's shape; pi compiles it as Node loads it (nothing to install).
 */
import type { ExtensionAPI, ToolCallEvent } from "@mariozechner/pi-coding-agent";

const PROTECTED: readonly string[] = [".env", ".git/", "node_modules/"];

interface Decision {
  block: boolean;
  reason: string;
}

function check(event: ToolCallEvent): Decision | undefined {
  if (event.toolName !== "write" && event.toolName !== "edit") return undefined;
  const path = String((event.input as { path?: unknown }).path ?? "");
  const hit: string | undefined = PROTECTED.find((p) => path.includes(p));
  return hit ? { block: true, reason: `Path "${path}" is protected` } : undefined;
}

export default function (pi: ExtensionAPI): void {
  pi.on("tool_call", async (event: ToolCallEvent, _ctx) => check(event));
}
