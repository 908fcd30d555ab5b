// Line numbers: the `read` tool's output reaches the model with each line numbered, so the model
// can cite lines precisely.
export default function (pi) {
  pi.on("tool_result", async (event) => {
    if (event.toolName !== "read" || event.isError) return undefined;
    const content = event.content.map((block) =>
      block.type === "text"
        ? { ...block, text: block.text.split("\n").map((line, i) => `${String(i + 1).padStart(4)}  ${line}`).join("\n") }
        : block,
    );
    return { content };
  });
}
