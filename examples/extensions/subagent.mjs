// Sub-agent: a `subagent` tool that hands a task to a nested `pi -p` and returns its answer.
// The child gets the call's TRACEPARENT and attribution, so its whole trace hangs under this
// tool's span in the same trace, for the same user and org; its model usage comes back on the
// tool result and is billed once (the child writes no session of its own).
import { spawn } from "node:child_process";

export default function (pi) {
  pi.registerTool({
    name: "subagent",
    description: "Runs a focused sub-task with a separate agent and returns its final answer.",
    parameters: {
      type: "object",
      properties: { task: { type: "string", description: "What the sub-agent should do" } },
      required: ["task"],
    },
    async execute(_toolCallId, params, signal, _onUpdate, ctx) {
      const args = ["-p", String(params.task), "--no-session", "--mode", "json", "--tools", "read,ls,grep,find"];
      if (process.env.SUBAGENT_FAUX_SCRIPT) args.push("--faux-script", process.env.SUBAGENT_FAUX_SCRIPT);
      const env = { ...process.env };
      delete env.PI_FAUX_SCRIPT;
      if (ctx.traceparent) env.TRACEPARENT = ctx.traceparent;
      for (const [key, value] of Object.entries(ctx.attribution ?? {})) {
        if (key === "userId") env.PI_USER_ID = value;
        else if (key === "orgId") env.PI_ORG_ID = value;
        else args.push("--context", `${key}=${value}`);
      }
      const child = spawn(ctx.piExecutable ?? "pi", args, { cwd: ctx.cwd, env, signal, stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      const code = await new Promise((resolve, reject) => {
        child.on("error", reject);
        child.on("close", resolve);
      });
      let answer = "";
      const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
      for (const line of out.split("\n")) {
        if (!line.trim()) continue;
        const event = JSON.parse(line);
        if (event.type !== "message_end" || event.message?.role !== "assistant") continue;
        answer = event.message.content.filter((b) => b.type === "text").map((b) => b.text).join("\n");
        const u = event.message.usage;
        for (const key of ["input", "output", "cacheRead", "cacheWrite", "totalTokens"]) usage[key] += u[key] ?? 0;
        for (const key of Object.keys(usage.cost)) usage.cost[key] += u.cost?.[key] ?? 0;
      }
      return { content: [{ type: "text", text: answer }], usage, isError: code !== 0 };
    },
  });
}
