//! Upstream's packages for JavaScript extensions: `@mariozechner/pi-coding-agent`, `pi-ai`,
//! `pi-tui` and TypeBox (`@sinclair/typebox`, `typebox`), the published npm packages at the
//! release pi follows, installed into pi's own JS folder (`<agent dir>/js`) the first time an
//! extension names one. The host's module loader resolves them from there when the extension's
//! own folder has none (`js/loader.mjs`).

use std::path::{Path, PathBuf};

use super::output;

/// What `npm install` gets, pinned (upstream's npm release 0.73.1 and the TypeBox it uses).
pub const PACKAGES: &[&str] = &[
    "@mariozechner/pi-coding-agent@0.73.1",
    "@mariozechner/pi-ai@0.73.1",
    "@mariozechner/pi-tui@0.73.1",
    "@sinclair/typebox@0.34.52",
    "typebox@1.4.3",
];

/// The import names an extension's source is searched for.
const NAMES: &[&str] = &["@mariozechner/pi-", "@sinclair/typebox", "\"typebox", "'typebox"];

/// Files of a folder extension searched at most (its `node_modules` is skipped).
const MAX_FILES: usize = 500;

/// Makes sure upstream's packages are in `js_dir` when the extension at `entry` (a file; for a
/// folder extension, every source file under its folder) imports one: installed once with `npm`
/// (one stderr line), under a lock other pi processes wait on. Offline or without `npm`: why, and
/// the one command that installs them.
pub fn ensure_for(entry: &Path, folder: Option<&Path>, js_dir: &Path) -> Result<(), String> {
    if installed(js_dir) || !imports_upstream(entry, folder) {
        return Ok(());
    }
    if offline() {
        return Err(format!(
            "needs upstream's packages, which are not installed, and pi is offline (--offline, PI_OFFLINE); \
             install them with: {}",
            install_command(js_dir)
        ));
    }
    std::fs::create_dir_all(js_dir).map_err(|e| format!("{}: {e}", js_dir.display()))?;
    let lock = std::fs::File::create(js_dir.join(".install.lock")).map_err(|e| format!("{}: {e}", js_dir.display()))?;
    lock.lock().map_err(|e| format!("{}: {e}", js_dir.display()))?;
    if installed(js_dir) {
        return Ok(());
    }
    output::error(format_args!(
        "pi: installing upstream's extension packages into {} (once): {}",
        js_dir.display(),
        PACKAGES.join(" ")
    ));
    let command = install_command(js_dir);
    let failed = |why: String| {
        format!("needs upstream's packages, and installing them failed ({why}); install them with: {command}")
    };
    let npm = std::process::Command::new("npm")
        .args(["install", "--prefix"])
        .arg(js_dir)
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .args(PACKAGES)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| failed(format!("npm: {e}")))?;
    if !npm.status.success() {
        let stderr = String::from_utf8_lossy(&npm.stderr);
        let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_owned();
        return Err(failed(format!("npm: {first}")));
    }
    Ok(())
}

/// `--offline` was given (set once, as the run starts).
static OFFLINE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// This run is offline (`--offline`); `PI_OFFLINE=1` (or `true`, `yes`) says so too.
pub fn set_offline(offline: bool) {
    let _ = OFFLINE.set(offline);
}

fn offline() -> bool {
    let var = std::env::var("PI_OFFLINE").unwrap_or_default().to_ascii_lowercase();
    OFFLINE.get().copied().unwrap_or(false) || matches!(var.as_str(), "1" | "true" | "yes")
}

/// `npm install --prefix DIR PACKAGES…`, for messages.
pub fn install_command(js_dir: &Path) -> String {
    format!("npm install --prefix {} {}", js_dir.display(), PACKAGES.join(" "))
}

/// True when every pinned package is in `js_dir` at its version.
fn installed(js_dir: &Path) -> bool {
    PACKAGES.iter().all(|spec| {
        let (name, version) = spec.rsplit_once('@').unwrap_or((spec, ""));
        let manifest = js_dir.join("node_modules").join(name).join("package.json");
        std::fs::read_to_string(manifest)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|m| m["version"] == version)
    })
}

/// True when `entry` (or a source file of `folder`) imports a value of one of upstream's
/// packages. TypeScript is compiled first, so imports used only as types (most extensions'
/// `import type { ExtensionAPI }`) install nothing.
fn imports_upstream(entry: &Path, folder: Option<&Path>) -> bool {
    let names = |path: &Path| {
        let Ok(text) = std::fs::read_to_string(path) else { return false };
        let typescript = matches!(path.extension().and_then(|e| e.to_str()), Some("ts" | "mts" | "cts"));
        let code = if typescript { super::typescript::to_javascript(path, &text).unwrap_or(text) } else { text };
        NAMES.iter().any(|n| code.contains(n))
    };
    names(entry) || folder.is_some_and(|folder| sources(folder).iter().any(|p| names(p)))
}

/// The JavaScript and TypeScript files under `folder`, its `node_modules` left out.
fn sources(folder: &Path) -> Vec<PathBuf> {
    let (mut found, mut todo) = (Vec::new(), vec![folder.to_path_buf()]);
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.flatten().map(|e| e.path()) {
            if found.len() >= MAX_FILES {
                return found;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "node_modules" && !name.starts_with('.') {
                    todo.push(path);
                }
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("ts" | "mts" | "cts" | "js" | "mjs")) {
                found.push(path);
            }
        }
    }
    found
}
