// pi's module loader for the JavaScript extension host (Node >= 20.6, registered by host.mjs;
// runs on Node's loader thread). TypeScript modules (`.ts`, `.mts`, `.cts`) are compiled by
// `pi strip-types FILE` as Node loads them, each at its own URL, so their imports resolve from
// the extension's own folder; TypeScript's import spellings (`./x.js` for `./x.ts`, `./x`
// for `./x.ts`) resolve too.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
let pi;
export async function initialize(data) { pi = data.pi; }
const relative = (s) => /^(\.{1,2}\/|\/|file:)/.test(s);
function alternatives(s) {
  if (/\.js$/.test(s)) return [s.replace(/\.js$/, ".ts")];
  if (/\.mjs$/.test(s)) return [s.replace(/\.mjs$/, ".mts")];
  if (/\.cjs$/.test(s)) return [s.replace(/\.cjs$/, ".cts")];
  if (/\.[A-Za-z0-9]+$/.test(s)) return [];
  return [s + ".ts", s + ".js", s + "/index.ts", s + "/index.js"];
}
// Upstream's packages: from the extension's folder when it has them, else from pi's own JS
// folder (where this loader lives; pi installs them there on first use).
const upstream = (s) => /^(@mariozechner\/pi-[a-z-]+|@sinclair\/typebox|typebox)(\/|$)/.test(s);
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    if (upstream(specifier)) return next(specifier, { ...context, parentURL: import.meta.url });
    if (!relative(specifier)) throw error;
    for (const alternative of alternatives(specifier)) {
      try { return await next(alternative, context); } catch {}
    }
    throw error;
  }
}
export async function load(url, context, next) {
  if (!url.startsWith("file:") || !/\.[mc]?ts$/.test(url)) return next(url, context);
  let source;
  try {
    source = execFileSync(pi, ["strip-types", fileURLToPath(url)], { encoding: "utf8", maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    throw new Error(String(error.stderr || error.message).trim());
  }
  return { format: url.endsWith(".cts") ? "commonjs" : "module", source, shortCircuit: true };
}
