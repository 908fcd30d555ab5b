// Permission gate: dangerous bash commands need a "yes" from a person. Without a UI (print
// mode, CI) they are blocked, and the run goes on.
export default function (pi) {
  const dangerous = [/\brm\s+(-[a-z]*r[a-z]*f|-[a-z]*f[a-z]*r|--recursive)/i, /\bsudo\b/i, /\b(chmod|chown)\b.*777/];

  pi.on("tool_call", async (event, ctx) => {
    if (event.toolName !== "bash") return undefined;
    const command = String(event.input.command ?? "");
    if (!dangerous.some((pattern) => pattern.test(command))) return undefined;
    if (!ctx.hasUI) return { block: true, reason: "Dangerous command blocked (no UI to confirm it)" };
    const ok = await ctx.ui.confirm("Dangerous command", `Allow ${command}?`);
    return ok ? undefined : { block: true, reason: "Blocked by the user" };
  });
}
