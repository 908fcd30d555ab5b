//! TypeScript extensions, compiled to JavaScript in-process (oxc) — no setup step, no download:
//! types are stripped, imports used only as types are dropped, and the constructs that need code
//! (enums, namespaces, constructor parameter properties) are transformed. The JavaScript host's
//! module loader runs `pi strip-types FILE` for each `.ts` module it loads, so every module keeps
//! its own URL: sibling imports, the extension's `node_modules` and bare imports resolve from the
//! extension's own folder, as Node resolves them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use oxc::allocator::Allocator;
use oxc::codegen::Codegen;
use oxc::parser::Parser;
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};

use super::output;

/// `pi strip-types FILE` (for the JavaScript host's loader; hidden).
#[derive(Debug, clap::Args)]
pub struct StripTypesArgs {
    /// The `.ts` / `.mts` / `.cts` file.
    pub file: PathBuf,
}

/// Prints `file` as JavaScript; a file that does not parse is one line on stderr (file, line,
/// column, why) and exit 1.
pub fn run(args: &StripTypesArgs) -> ExitCode {
    let compiled = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("{}: {e}", args.file.display()))
        .and_then(|source| to_javascript(&args.file, &source));
    match compiled {
        Ok(code) => {
            output::text(code);
            ExitCode::SUCCESS
        }
        Err(why) => {
            output::error(format_args!("{why}"));
            ExitCode::FAILURE
        }
    }
}

/// `source` (the TypeScript of `path`) as JavaScript with the same module shape.
pub fn to_javascript(path: &Path, source: &str) -> Result<String, String> {
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path).unwrap_or_else(|_| SourceType::ts());
    let parsed = Parser::new(&allocator, source, source_type).parse();
    if let Some(error) = parsed.errors.first() {
        return Err(located(path, source, error));
    }
    let mut program = parsed.program;
    let scoping = SemanticBuilder::new().build(&program).semantic.into_scoping();
    let transformed =
        Transformer::new(&allocator, path, &TransformOptions::default()).build_with_scoping(scoping, &mut program);
    if let Some(error) = transformed.errors.first() {
        return Err(located(path, source, error));
    }
    Ok(Codegen::new().build(&program).code)
}

/// `path:line:column: message` of a diagnostic's first label.
fn located(path: &Path, source: &str, error: &oxc::diagnostics::OxcDiagnostic) -> String {
    let offset = error.labels.as_ref().and_then(|labels| labels.first()).map_or(0, |label| label.offset());
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{}:{line}:{column}: {}", path.display(), error.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_go_enums_and_parameter_properties_become_code_and_errors_are_located() {
        let source = r#"
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "@sinclair/typebox";
enum Level { Low = 1, High }
class Gate { constructor(private readonly limit: number) {} over(n: number): boolean { return n > this.limit; } }
export default function (pi: ExtensionAPI): void {
  const level: Level = Level.High;
  pi.on("tool_call", async (event: { toolName: string }) => (new Gate(level).over(3) ? undefined : undefined));
}
"#;
        let js = to_javascript(Path::new("gate.ts"), source).unwrap();
        assert!(!js.contains("ExtensionAPI") && !js.contains(": number"), "{js}");
        assert!(!js.contains("@sinclair/typebox"), "an import used only as a type is dropped: {js}");
        assert!(js.contains("Level[Level[\"Low\"] = 1]") || js.contains("Level[\"Low\"]"), "{js}");
        assert!(js.contains("this.limit = limit"), "{js}");
        let error = to_javascript(Path::new("bad.ts"), "const x: number = ;\n").unwrap_err();
        assert!(error.starts_with("bad.ts:1:"), "{error}");
    }
}
