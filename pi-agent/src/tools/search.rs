//! grep and find: recursive search of the working tree, as ripgrep and fd walk it: what
//! `.gitignore`, `.ignore` and `.git/info/exclude` ignore is skipped (in a repository or not),
//! and so are `.git`, `target` and `node_modules`; other hidden files are searched.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, cap_head, describe, str_arg};

const SKIP_DIRS: [&str; 3] = [".git", "target", "node_modules"];
const MAX_RESULTS: usize = 200;

/// All files under `root` that are not ignored, sorted.
fn walk(root: &Path) -> Result<Vec<PathBuf>, ToolError> {
    std::fs::read_dir(root).map_err(|e| ToolError::io(root, e))?;
    let mut files: Vec<PathBuf> = walker(root)
        .build()
        .flatten()
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .collect();
    files.sort();
    Ok(files)
}

/// The files and folders under `root` that `grep`, `find` and `ls` would see (ignore files
/// honoured, VCS and build folders skipped), at most `limit`, in walk order: each path and
/// whether it is a folder. For completions of project paths (`@file` in the editor).
pub fn project_entries(root: &Path, limit: usize) -> Vec<(std::path::PathBuf, bool)> {
    walker(root)
        .build()
        .flatten()
        .filter(|entry| entry.depth() > 0)
        .take(limit)
        .map(|entry| {
            let dir = entry.file_type().is_some_and(|t| t.is_dir());
            (entry.into_path(), dir)
        })
        .collect()
}

/// A walk of `root` that honours ignore files as ripgrep does (also outside a git repository)
/// and skips the usual VCS and build directories; hidden files are included.
pub(super) fn walker(root: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .filter_entry(|entry| !SKIP_DIRS.contains(&entry.file_name().to_string_lossy().as_ref()));
    builder
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// What `grep` says it does.
const GREP: &str = "Search files under `path` (default: working directory) for the regular expression `pattern`; prints path:line:text.";

/// What `find` says it does.
const FIND: &str = "Find files under `path` (default: working directory) whose relative path matches the glob `pattern` (e.g. `**/*.rs`).";

/// The arguments `grep` and `find` take: a `pattern` and an optional `path`.
const PATTERN_AND_PATH: &str = r#"{"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}"#;

/// Searches file contents with a regular expression.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

impl Tool for GrepTool {
    describe!("grep", GREP, PATTERN_AND_PATH);
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let pattern = str_arg(args, "pattern")?;
            let regex = Regex::new(pattern).map_err(|e| ToolError::InvalidArguments(format!("bad pattern: {e}")))?;
            let root = ctx.resolve(args.get("path").and_then(Value::as_str).unwrap_or("."));
            let cwd = ctx.cwd.clone();
            tokio::task::spawn_blocking(move || {
                let files = if root.is_file() { vec![root.clone()] } else { walk(&root)? };
                let mut hits = Vec::new();
                'files: for file in files {
                    let Ok(bytes) = std::fs::read(&file) else { continue };
                    if bytes.contains(&0) {
                        continue; // binary
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    for (n, line) in text.lines().enumerate() {
                        if regex.is_match(line) {
                            hits.push(format!("{}:{}:{}", relative(&cwd, &file), n + 1, line));
                            if hits.len() >= MAX_RESULTS {
                                break 'files;
                            }
                        }
                    }
                }
                let count = hits.len();
                let content = if hits.is_empty() { "No matches".to_owned() } else { hits.join("\n") };
                Ok(ToolOutput {
                    content: cap_head(content),
                    details: Some(json!({"matches": count})),
                    usage: None,
                    terminate: false,
                })
            })
            .await
            .map_err(|e| ToolError::Other(format!("grep failed: {e}")))?
        })
    }
}

/// Finds files whose relative path matches a glob (`*`, `**`, `?`).
#[derive(Debug, Clone, Copy, Default)]
pub struct FindTool;

/// A glob as a regex over `/`-separated relative paths: `**` spans directories, `*` and `?` do not.
fn glob_regex(glob: &str) -> Result<Regex, ToolError> {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| ToolError::InvalidArguments(format!("bad glob: {e}")))
}

impl Tool for FindTool {
    describe!("find", FIND, PATTERN_AND_PATH);
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let glob = str_arg(args, "pattern")?.to_owned();
            let regex = glob_regex(&glob)?;
            let root = ctx.resolve(args.get("path").and_then(Value::as_str).unwrap_or("."));
            tokio::task::spawn_blocking(move || {
                let found: Vec<String> = walk(&root)?
                    .iter()
                    .map(|f| relative(&root, f))
                    .filter(|rel| {
                        regex.is_match(rel)
                            || (!glob.contains('/') && regex.is_match(rel.rsplit('/').next().unwrap_or(rel)))
                    })
                    .take(MAX_RESULTS)
                    .collect();
                let count = found.len();
                let content = if found.is_empty() { "No files found".to_owned() } else { found.join("\n") };
                Ok(ToolOutput {
                    content: cap_head(content),
                    details: Some(json!({"files": count})),
                    usage: None,
                    terminate: false,
                })
            })
            .await
            .map_err(|e| ToolError::Other(format!("find failed: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        let re = glob_regex("**/*.rs").unwrap();
        assert!(re.is_match("src/lib.rs") && re.is_match("lib.rs") && re.is_match("a/b/c.rs"));
        assert!(!re.is_match("src/lib.rsx"));
        let re = glob_regex("src/?.txt").unwrap();
        assert!(re.is_match("src/a.txt") && !re.is_match("src/ab.txt") && !re.is_match("src/x/a.txt"));
    }

    /// A repository whose `.gitignore` hides `build/` and `*.log` (and `.ignore` hides `tmp/`):
    /// grep, find and ls never return what it hides.
    #[tokio::test]
    async fn ignored_paths_are_never_returned() {
        let root = std::env::temp_dir().join(format!("pi-ignore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(".gitignore", "build/\n*.log\n");
        write(".ignore", "tmp/\n");
        for i in 0..200 {
            write(&format!("build/gen/out{i}.txt"), "needle\n");
        }
        write("debug.log", "needle\n");
        write("tmp/scratch.txt", "needle\n");
        write("src/real.txt", "the needle\n");
        write(".config/visible.txt", "needle too\n");
        let ctx = ToolContext {
            cwd: root.clone(),
            cancel: tokio_util::sync::CancellationToken::new(),
            env: Default::default(),
            updates: None,
            call_id: String::new(),
        };
        let grep_args = json!({"pattern": "needle"});
        let grep = GrepTool.execute(&grep_args, &ctx).await.unwrap().content;
        assert_eq!(grep.lines().collect::<Vec<_>>(), [".config/visible.txt:1:needle too", "src/real.txt:1:the needle"]);
        let find_args = json!({"pattern": "**/*.txt"});
        let find = FindTool.execute(&find_args, &ctx).await.unwrap().content;
        assert_eq!(find.lines().collect::<Vec<_>>(), [".config/visible.txt", "src/real.txt"]);
        let ls = super::super::fs::LsTool.execute(&json!({}), &ctx).await.unwrap().content;
        assert_eq!(ls.lines().collect::<Vec<_>>(), [".config/", ".gitignore", ".ignore", "src/"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
