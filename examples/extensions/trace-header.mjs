// Trace header: every provider request carries the session id, so a gateway's logs can be joined
// to pi's traces (pi already sends the W3C `traceparent`).
export default function (pi) {
  pi.on("before_provider_headers", async (_event, ctx) => {
    const session = ctx.sessionManager.getSessionId();
    return session ? { headers: { "x-pi-session-id": session } } : undefined;
  });
}
