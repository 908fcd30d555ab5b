#!/usr/bin/env node
// Generates pi-agent/data/models.json — the model catalogue pi prices usage with — from upstream
// pi's own generated model list, so `pi` knows every model upstream knows, at upstream's prices.
//
//   node scripts/gen-models.mjs [--as NAME] [UPSTREAM [REF]]
//
// UPSTREAM is where upstream pi's sources are: a git directory (bare or not; REF defaults to
// HEAD), a checkout, or a raw-file base URL. Default:
// https://raw.githubusercontent.com/badlogic/pi-mono/main
//
// Read from it:
//   packages/ai/src/models.generated.ts            every model: id, provider, API, limits, input
//                                                  kinds, prices per million tokens, compat flags
//   packages/ai/src/env-api-keys.ts                the variable each provider's API key is read from
//   packages/coding-agent/src/core/model-resolver.ts  each provider's default model
//
// The output is stamped with the source (`--as NAME` names it, e.g. `badlogic/pi-mono` for a
// local mirror of it), its commit (for a git source) and the date of that
// commit (else today). Run it, review the diff, commit the data file.

import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const MODELS = "packages/ai/src/models.generated.ts";
const ENV_KEYS = "packages/ai/src/env-api-keys.ts";
const RESOLVER = "packages/coding-agent/src/core/model-resolver.ts";
const OUT = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "pi-agent", "data", "models.json");

const args = process.argv.slice(2);
const asAt = args.indexOf("--as");
const sourceName = asAt >= 0 ? args.splice(asAt, 2)[1] : undefined;
const [upstream = "https://raw.githubusercontent.com/badlogic/pi-mono/main", ref = "HEAD"] = args;

/** Reads one upstream file, and says where from. */
async function source() {
	if (/^https?:\/\//.test(upstream)) {
		const read = async (file) => {
			const response = await fetch(`${upstream.replace(/\/$/, "")}/${file}`);
			if (!response.ok) throw new Error(`${file}: HTTP ${response.status}`);
			return response.text();
		};
		return { read, stamp: { source: upstream, date: new Date().toISOString().slice(0, 10) } };
	}
	const gitDir = fs.existsSync(path.join(upstream, "HEAD")) ? upstream : path.join(upstream, ".git");
	if (fs.existsSync(path.join(gitDir, "HEAD"))) {
		const git = (...args) => execFileSync("git", ["--git-dir", gitDir, ...args], { encoding: "utf8", maxBuffer: 1 << 28 });
		const commit = git("rev-parse", ref).trim();
		const date = git("show", "-s", "--format=%cs", commit).trim();
		const remote = (() => {
			try {
				return git("config", "--get", "remote.origin.url").trim();
			} catch {
				return path.resolve(upstream);
			}
		})();
		return { read: async (file) => git("show", `${commit}:${file}`), stamp: { source: remote, commit, date } };
	}
	const read = async (file) => fs.readFileSync(path.join(upstream, file), "utf8");
	return { read, stamp: { source: path.resolve(upstream), date: new Date().toISOString().slice(0, 10) } };
}

/** `export const MODELS = {...} as const;` with `satisfies Model<...>` clauses: the object. */
function parseModels(ts) {
	const start = ts.indexOf("export const MODELS =");
	if (start < 0) throw new Error(`${MODELS}: no "export const MODELS ="`);
	let body = ts.slice(start + "export const MODELS =".length);
	body = body.replace(/\s+satisfies\s+Model<"[^"]*">/g, "").replace(/\}\s*as const;[\s\S]*$/, "}");
	return new Function(`return (${body});`)();
}

/** The `NAME: "VAR"` pairs of the object literal that follows `marker`. */
function stringMap(ts, marker, file) {
	const at = ts.indexOf(marker);
	if (at < 0) throw new Error(`${file}: no ${marker}`);
	const open = ts.indexOf("{", at);
	const close = ts.indexOf("}", open);
	const map = {};
	for (const m of ts.slice(open + 1, close).matchAll(/(?:"([^"]+)"|([A-Za-z_][\w-]*))\s*:\s*"([^"]+)"/g)) {
		map[m[1] ?? m[2]] = m[3];
	}
	return map;
}

const { read, stamp } = await source();
if (sourceName) stamp.source = sourceName;
const models = parseModels(await read(MODELS));
const apiKeyVars = stringMap(await read(ENV_KEYS), "const envMap", ENV_KEYS);
const defaults = stringMap(await read(RESOLVER), "defaultModelPerProvider", RESOLVER);

const out = [];
for (const [provider, byId] of Object.entries(models)) {
	for (const m of Object.values(byId)) {
		const model = {
			id: m.id,
			name: m.name,
			provider,
			api: m.api,
			baseUrl: m.baseUrl,
			reasoning: Boolean(m.reasoning),
			input: m.input,
			contextWindow: m.contextWindow,
			maxTokens: m.maxTokens,
			cost: {
				input: m.cost.input,
				output: m.cost.output,
				cacheRead: m.cost.cacheRead ?? 0,
				cacheWrite: m.cost.cacheWrite ?? 0,
			},
		};
		if (m.compat) model.compat = m.compat;
		if (m.headers) model.headers = m.headers;
		out.push(model);
	}
}

const lines = out.map((m) => `    ${JSON.stringify(m)}`);
const head = { ...stamp, generatedBy: "scripts/gen-models.mjs", defaults, apiKeyVars };
const text = `${JSON.stringify(head, null, 2).replace(/\n}$/, ",")}\n  "models": [\n${lines.join(",\n")}\n  ]\n}\n`;
fs.writeFileSync(OUT, text);
const providers = new Set(out.map((m) => m.provider)).size;
const apis = new Set(out.map((m) => m.api)).size;
console.log(`${OUT}: ${out.length} models, ${providers} providers, ${apis} APIs (${stamp.source} ${stamp.commit ?? ""} ${stamp.date})`);
