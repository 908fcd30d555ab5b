//! Skills and prompt templates: markdown files discovered from directories and expanded from
//! `/skill:name args` and `/name args` input, each expansion traced (`pi.agent.skill`,
//! `pi.agent.prompt_template`; names are safe, bodies are Content).
//!
//! - A **skill** is a directory with a `SKILL.md` (found recursively) or a root `.md` file, with
//!   frontmatter `name` (1–64 chars: lowercase letters, digits, single hyphens) and
//!   `description` (required). `/skill:name args` expands to the skill's instructions, with the
//!   arguments appended as `User: args`.
//! - A **prompt template** is a root `.md` file of a templates directory; its file name is the
//!   command (`review.md` → `/review`), `description` is optional. `/name args` expands the body
//!   with `$1`, `$2`, …, `$@` / `$ARGUMENTS` (all arguments), `${@:N}` (from the Nth) and
//!   `${@:N:L}` (L from the Nth).
//!
//! A file that cannot be used (unreadable, bad frontmatter, invalid name, no description) is
//! skipped with a [`LoadError`] naming it; the others load. On a name collision the first one
//! found is kept.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use pi_observe_core::{ContentKind, Payload, names, trace_operation_sync};

/// A loaded skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// `/skill:<name>`.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The markdown file.
    pub path: PathBuf,
    /// The instructions (after the frontmatter).
    pub body: String,
}

/// A loaded prompt template.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTemplate {
    /// `/<name>` (the file name without `.md`).
    pub name: String,
    /// What it is for (frontmatter `description`, else the first non-empty line).
    pub description: String,
    /// The markdown file.
    pub path: PathBuf,
    /// The body (after the frontmatter).
    pub body: String,
}

/// A file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// Skills and templates available to an agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// Skills, first found wins on a name collision.
    pub skills: Vec<Skill>,
    /// Templates, first found wins on a name collision.
    pub templates: Vec<PromptTemplate>,
    /// Context files (`AGENTS.md` / `CLAUDE.md`), global first, then from the root down to the
    /// working directory; they go in the system prompt under "Project Context".
    pub context_files: Vec<ContextFile>,
    /// Files that were skipped.
    pub errors: Vec<LoadError>,
}

/// One context file's path and text.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextFile {
    /// Where it was read.
    pub path: PathBuf,
    /// Its contents.
    pub content: String,
}

/// The names a context file may have in a folder, the first present wins (upstream's order).
const CONTEXT_FILE_NAMES: [&str; 4] = ["AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];

/// Upstream's context files: `AGENTS.md` (or `CLAUDE.md`) of `agent_dir` (global
/// instructions), then of each folder from the file-system root down to `cwd`, each file once.
/// A file that cannot be read is skipped and reported in the errors.
pub fn context_files(cwd: &Path, agent_dir: Option<&Path>) -> (Vec<ContextFile>, Vec<LoadError>) {
    let mut errors = Vec::new();
    let mut read = |dir: &Path| {
        let path = CONTEXT_FILE_NAMES.iter().map(|name| dir.join(name)).find(|p| p.is_file())?;
        match std::fs::read_to_string(&path) {
            Ok(content) => Some(ContextFile { path, content }),
            Err(e) => {
                errors.push(LoadError { path, message: e.to_string() });
                None
            }
        }
    };
    let global = agent_dir.and_then(&mut read);
    let mut ancestors: Vec<ContextFile> = Vec::new();
    for dir in cwd.ancestors() {
        if let Some(file) = read(dir).filter(|f| global.as_ref().is_none_or(|g| g.path != f.path)) {
            ancestors.push(file);
        }
    }
    let files = global.into_iter().chain(ancestors.into_iter().rev()).collect();
    (files, errors)
}

/// What an input expanded to.
#[derive(Debug, Clone, PartialEq)]
pub enum Expansion {
    /// A skill: `/skill:<name>`.
    Skill {
        /// Its name.
        name: String,
        /// The expanded prompt.
        text: String,
    },
    /// A template: `/<name>`.
    Template {
        /// Its name.
        name: String,
        /// The expanded prompt.
        text: String,
    },
}

impl Resources {
    /// Loads skills from `skill_dirs` and templates from `template_dirs` (missing directories
    /// are fine; earlier directories win on name collisions).
    pub fn load(skill_dirs: &[PathBuf], template_dirs: &[PathBuf]) -> Resources {
        let mut resources = Resources::default();
        for dir in skill_dirs {
            let mut files = Vec::new();
            collect_skill_files(dir, true, &mut files);
            for file in files {
                match load_skill(&file) {
                    Ok(skill) if resources.skill(&skill.name).is_some() => resources.errors.push(LoadError {
                        path: file,
                        message: format!("skill name {:?} is already taken; the first one is kept", skill.name),
                    }),
                    Ok(skill) => resources.skills.push(skill),
                    Err(message) => resources.errors.push(LoadError { path: file, message }),
                }
            }
        }
        for dir in template_dirs {
            for file in markdown_files(dir) {
                match load_template(&file) {
                    Ok(template) if resources.template(&template.name).is_some() => {}
                    Ok(template) => resources.templates.push(template),
                    Err(message) => resources.errors.push(LoadError { path: file, message }),
                }
            }
        }
        resources
    }

    /// The skill with this name.
    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The template with this name.
    pub fn template(&self, name: &str) -> Option<&PromptTemplate> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// Expands `/skill:name args` or `/name args`, traced as `pi.agent.skill` /
    /// `pi.agent.prompt_template`. `None` when the text is not a known command.
    pub fn expand(&self, text: &str) -> Option<Expansion> {
        let command = text.strip_prefix('/')?;
        let (head, args) = match command.split_once(char::is_whitespace) {
            Some((head, rest)) => (head, rest.trim()),
            None => (command, ""),
        };
        if let Some(name) = head.strip_prefix("skill:") {
            let skill = self.skill(name)?;
            let text = traced_expansion(names::AGENT_SKILL, names::SKILL_NAME, &skill.name, args, || {
                expand_skill(skill, args)
            });
            return Some(Expansion::Skill { name: skill.name.clone(), text });
        }
        let template = self.template(head)?;
        let text = traced_expansion(names::AGENT_PROMPT_TEMPLATE, names::TEMPLATE_NAME, &template.name, args, || {
            substitute(template.body.trim(), &split_args(args))
        });
        Some(Expansion::Template { name: template.name.clone(), text })
    }

    /// The "Project Context" block of the system prompt: each context file under its path;
    /// empty without context files.
    pub fn context_section(&self) -> String {
        if self.context_files.is_empty() {
            return String::new();
        }
        let mut out = String::from("\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n");
        for file in &self.context_files {
            out.push_str(&format!("## {}\n\n{}\n\n", file.path.display(), file.content));
        }
        out
    }

    /// The skills block for the system prompt (names, descriptions, locations), so the model
    /// can read a skill when a task matches; empty without skills.
    pub fn system_prompt_section(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "\n\nThe following skills provide specialized instructions for specific tasks.\n\
             Use the read tool to load a skill's file when the task matches its description.\n\n\
             <available_skills>\n",
        );
        for skill in &self.skills {
            out.push_str(&format!(
                "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>\n",
                xml_escape(&skill.name),
                xml_escape(&skill.description),
                xml_escape(&skill.path.display().to_string()),
            ));
        }
        out.push_str("</available_skills>");
        out
    }
}

impl Expansion {
    /// The expanded prompt.
    pub fn text(&self) -> &str {
        match self {
            Expansion::Skill { text, .. } | Expansion::Template { text, .. } => text,
        }
    }
}

/// Runs one expansion as operation `op`: the name and argument count are safe, the arguments and
/// the expanded text are Content (prompt).
fn traced_expansion(
    op: &'static str,
    name_key: &'static str,
    name: &str,
    args: &str,
    expand: impl FnOnce() -> String,
) -> String {
    let payload = || {
        Payload::new().safe(name_key, name.to_owned()).safe("argumentCount", split_args(args).len()).content(
            ContentKind::Prompt,
            "arguments",
            args.to_owned(),
        )
    };
    trace_operation_sync(op, payload, |span| {
        let text = expand();
        span.record(|| {
            Payload::new().safe("expandedLength", text.chars().count()).content(
                ContentKind::Prompt,
                "expanded",
                text.clone(),
            )
        });
        Ok::<_, std::convert::Infallible>(text)
    })
    .unwrap_or_else(|never| match never {})
}

fn expand_skill(skill: &Skill, args: &str) -> String {
    let dir = skill.path.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let mut text = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        xml_escape(&skill.name),
        xml_escape(&skill.path.display().to_string()),
        dir,
        skill.body.trim()
    );
    if !args.is_empty() {
        text.push_str("\n\nUser: ");
        text.push_str(args);
    }
    text
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `dir/SKILL.md` files found recursively, plus root `.md` files of the top directory.
fn collect_skill_files(dir: &Path, root: bool, out: &mut Vec<PathBuf>) {
    // A path may name one skill file (upstream's `skillPaths` from `resources_discover`).
    if root && is_markdown_file(dir) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let skill_file = dir.join("SKILL.md");
    if !root && skill_file.is_file() {
        out.push(skill_file);
        return;
    }
    for path in entries {
        if path.is_dir() {
            collect_skill_files(&path, false, out);
        } else if root && path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn is_markdown_file(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "md")
}

/// Root `.md` files of `dir` (not recursive), sorted; `dir` itself when it is one `.md` file
/// (upstream's `promptPaths` may name files).
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    if is_markdown_file(dir) {
        return vec![dir.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// Splits `---` frontmatter from the body: YAML (block scalars such as `description: >-` on
/// several lines, quoting, comments) whose top-level scalar values are kept as text; frontmatter
/// that is not valid YAML but reads as `key: value` lines (`description: d: with colon`) is
/// taken line by line, as pi always has.
fn frontmatter(text: &str) -> Result<(BTreeMap<String, String>, String), String> {
    let (fields, body) = frontmatter_lines(text)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(yaml) = text.strip_prefix("---").and_then(|rest| {
        let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n'))?;
        let end = rest.lines().position(|l| l.trim_end() == "---")?;
        Some(rest.lines().take(end).map(|l| format!("{l}\n")).collect::<String>())
    }) else {
        return Ok((fields, body));
    };
    use serde_yaml_ng::Value as Yaml;
    match serde_yaml_ng::from_str::<Yaml>(&yaml) {
        Ok(Yaml::Mapping(map)) => {
            let text_of = |value: &Yaml| match value {
                Yaml::String(s) => Some(s.clone()),
                Yaml::Number(n) => Some(n.to_string()),
                Yaml::Bool(b) => Some(b.to_string()),
                _ => None,
            };
            let fields = map.iter().filter_map(|(k, v)| Some((text_of(k)?, text_of(v)?))).collect();
            Ok((fields, body))
        }
        _ => Ok((fields, body)),
    }
}

/// Splits `---` frontmatter (simple `key: value` lines) from the body.
fn frontmatter_lines(text: &str) -> Result<(BTreeMap<String, String>, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---").filter(|r| r.starts_with('\n') || r.starts_with("\r\n")) else {
        return Ok((BTreeMap::new(), text.to_owned()));
    };
    let mut fields = BTreeMap::new();
    let mut lines = rest.lines().skip(1).enumerate();
    for (index, line) in lines.by_ref() {
        if line.trim_end() == "---" {
            let body: Vec<&str> = rest.lines().skip(index + 2).collect();
            return Ok((fields, body.join("\n")));
        }
        if line.trim().is_empty() || line.trim_start().starts_with('#') || line.starts_with([' ', '\t']) {
            continue; // blank, comment, or a nested value of a mapping we do not use
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("frontmatter line {}: expected `key: value`, got {line:?}", index + 2));
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        fields.insert(key.trim().to_owned(), value.to_owned());
    }
    Err("frontmatter is not closed with `---`".to_owned())
}

fn load_skill(path: &Path) -> Result<Skill, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let (fields, body) = frontmatter(&text)?;
    let name = fields.get("name").cloned().unwrap_or_default();
    if !valid_skill_name(&name) {
        return Err(format!(
            "skill name {name:?} is invalid: 1-64 lowercase letters, digits and single hyphens, no leading or trailing hyphen"
        ));
    }
    let description = fields.get("description").cloned().unwrap_or_default();
    if description.trim().is_empty() {
        return Err("skill has no description".to_owned());
    }
    if description.chars().count() > 1024 {
        return Err("skill description is longer than 1024 characters".to_owned());
    }
    Ok(Skill { name, description, path: path.to_owned(), body })
}

fn valid_skill_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

fn load_template(path: &Path) -> Result<PromptTemplate, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let (fields, body) = frontmatter(&text)?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("template name {name:?} cannot be typed as a command"));
    }
    let description = fields
        .get("description")
        .cloned()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| body.lines().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_owned()))
        .unwrap_or_default();
    Ok(PromptTemplate { name, description, path: path.to_owned(), body })
}

/// Splits arguments like a shell: whitespace-separated, `"…"` and `'…'` group.
pub fn split_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    let mut has_token = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                has_token = true;
            }
            (None, c) if c.is_whitespace() => {
                if has_token {
                    args.push(std::mem::take(&mut current));
                    has_token = false;
                }
            }
            (None, c) => {
                current.push(c);
                has_token = true;
            }
        }
    }
    if has_token {
        args.push(current);
    }
    args
}

/// Replaces `$1`…, `$@`, `$ARGUMENTS`, `${@:N}` and `${@:N:L}` in `body`.
pub fn substitute(body: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let slice = |start: usize, len: Option<usize>| -> String {
        let from = start.saturating_sub(1).min(args.len());
        let to = len.map_or(args.len(), |l| (from + l).min(args.len()));
        args[from..to].join(" ")
    };
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix("ARGUMENTS") {
            out.push_str(&all);
            rest = after;
        } else if let Some(after) = tail.strip_prefix('@') {
            out.push_str(&all);
            rest = after;
        } else if let Some((inner, after)) = tail.strip_prefix("{@:").and_then(|t| t.split_once('}')) {
            let mut parts = inner.splitn(2, ':').map(|p| p.trim().parse::<usize>());
            match (parts.next(), parts.next()) {
                (Some(Ok(start)), None) => out.push_str(&slice(start, None)),
                (Some(Ok(start)), Some(Ok(len))) => out.push_str(&slice(start, Some(len))),
                _ => out.push_str(&rest[at..at + 4 + inner.len() + 1]),
            }
            rest = after;
        } else {
            let digits = tail.chars().take_while(char::is_ascii_digit).count();
            match tail[..digits].parse::<usize>() {
                Ok(n) if n >= 1 => out.push_str(args.get(n - 1).map(String::as_str).unwrap_or("")),
                _ => out.push_str(&rest[at..at + 1 + digits]),
            }
            rest = &tail[digits..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_path_may_name_one_skill_or_template_file() {
        let dir = std::env::temp_dir().join(format!("pi-resources-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("skill")).unwrap();
        std::fs::write(dir.join("skill/SKILL.md"), "---\nname: solo\ndescription: One file\n---\nBody\n").unwrap();
        std::fs::write(dir.join("solo-prompt.md"), "---\ndescription: d\n---\nSay $1\n").unwrap();
        let resources = Resources::load(&[dir.join("skill/SKILL.md")], &[dir.join("solo-prompt.md")]);
        assert!(resources.errors.is_empty(), "{:?}", resources.errors);
        assert!(resources.skill("solo").is_some() && resources.template("solo-prompt").is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn arguments_split_like_a_shell() {
        assert_eq!(
            split_args(r#"Button "onClick handler" 'disabled support'  x"#),
            ["Button", "onClick handler", "disabled support", "x"]
        );
        assert_eq!(split_args(r#"a "" b"#), ["a", "", "b"]);
        assert!(split_args("   ").is_empty());
    }

    #[test]
    fn placeholders_expand() {
        let a = args(&["Button", "click", "disabled"]);
        assert_eq!(substitute("Make $1 with $@.", &a), "Make Button with Button click disabled.");
        assert_eq!(substitute("All: $ARGUMENTS", &a), "All: Button click disabled");
        assert_eq!(substitute("Rest: ${@:2}", &a), "Rest: click disabled");
        assert_eq!(substitute("One: ${@:2:1}", &a), "One: click");
        assert_eq!(substitute("Missing: [$7] [${@:9}]", &a), "Missing: [] []");
        assert_eq!(substitute("Costs $ and $0 and ${@:x}", &a), "Costs $ and $0 and ${@:x}");
        assert_eq!(substitute("$10", &args(&["a"; 10])), "a");
    }

    #[test]
    fn skill_names_follow_the_standard() {
        for good in ["pdf-processing", "a", "code-review-2"] {
            assert!(valid_skill_name(good), "{good}");
        }
        for bad in ["PDF", "-pdf", "pdf-", "pdf--x", "", "with space", &"x".repeat(65)] {
            assert!(!valid_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn frontmatter_problems_are_named() {
        assert!(frontmatter("---\nname: x\nno colon here\n---\nbody").unwrap_err().contains("line 3"));
        assert!(frontmatter("---\nname: x\n").unwrap_err().contains("not closed"));
        let (fields, body) =
            frontmatter("---\nname: \"quoted\"\ndescription: d: with colon\n---\nline 1\nline 2").unwrap();
        assert_eq!(fields["name"], "quoted");
        assert_eq!(fields["description"], "d: with colon");
        assert_eq!(body, "line 1\nline 2");
        assert_eq!(frontmatter("no frontmatter").unwrap().1, "no frontmatter");
    }

    #[test]
    fn frontmatter_is_yaml() {
        let skill = "---\nname: deploy # the skill's name\ndescription: >-\n  Deploys the service\n  to staging.\nallowed-tools: [bash]\nversion: 2\n---\nSteps";
        let (fields, body) = frontmatter(skill).unwrap();
        assert_eq!(fields["name"], "deploy");
        assert_eq!(fields["description"], "Deploys the service to staging.");
        assert_eq!(fields["version"], "2");
        assert!(!fields.contains_key("allowed-tools"), "lists are not text");
        assert_eq!(body, "Steps");
        let literal = frontmatter("---\ndescription: |\n  line one\n  line two\n---\n").unwrap().0;
        assert_eq!(literal["description"], "line one\nline two\n");
    }
}
