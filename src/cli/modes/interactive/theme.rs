//! Upstream's themes: JSON files (`name`, optional `vars`, and all 51 `colors` tokens; a value
//! is `"#rrggbb"`, a 256-colour index, a `vars` name, or `""` for the terminal's default) that
//! colour the terminal UI. Built in: `dark` and `light` (our own palettes, in
//! `themes/*.json`). Loaded as upstream's resource loader does: `--theme PATH` (repeatable, a
//! file or a folder of them), then — unless `--no-themes` — the settings' `themes` (files or
//! folders, relative to the settings file), `.pi/themes/` of a trusted project and
//! `~/.pi/agent/themes/`. The settings' `theme` names the one in use (`dark` when unset).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use ratatui::style::{Color, Style};
use serde_json::Value;

macro_rules! tokens {
    ($($token:ident = $name:literal),* $(,)?) => {
        /// A colour role of upstream's theme format.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(dead_code)] // the whole vocabulary: a theme file must define each
        pub enum Token { $($token),* }

        /// Every token's name in a theme file, in [`Token`] order.
        const NAMES: &[&str] = &[$($name),*];
    };
}

tokens! {
    Accent = "accent", Border = "border", BorderAccent = "borderAccent", BorderMuted = "borderMuted",
    Success = "success", Error = "error", Warning = "warning", Muted = "muted", Dim = "dim",
    Text = "text", ThinkingText = "thinkingText", SelectedBg = "selectedBg",
    UserMessageBg = "userMessageBg", UserMessageText = "userMessageText",
    CustomMessageBg = "customMessageBg", CustomMessageText = "customMessageText",
    CustomMessageLabel = "customMessageLabel", ToolPendingBg = "toolPendingBg",
    ToolSuccessBg = "toolSuccessBg", ToolErrorBg = "toolErrorBg", ToolTitle = "toolTitle",
    ToolOutput = "toolOutput", MdHeading = "mdHeading", MdLink = "mdLink", MdLinkUrl = "mdLinkUrl",
    MdCode = "mdCode", MdCodeBlock = "mdCodeBlock", MdCodeBlockBorder = "mdCodeBlockBorder",
    MdQuote = "mdQuote", MdQuoteBorder = "mdQuoteBorder", MdHr = "mdHr", MdListBullet = "mdListBullet",
    ToolDiffAdded = "toolDiffAdded", ToolDiffRemoved = "toolDiffRemoved", ToolDiffContext = "toolDiffContext",
    SyntaxComment = "syntaxComment", SyntaxKeyword = "syntaxKeyword", SyntaxFunction = "syntaxFunction",
    SyntaxVariable = "syntaxVariable", SyntaxString = "syntaxString", SyntaxNumber = "syntaxNumber",
    SyntaxType = "syntaxType", SyntaxOperator = "syntaxOperator", SyntaxPunctuation = "syntaxPunctuation",
    ThinkingOff = "thinkingOff", ThinkingMinimal = "thinkingMinimal", ThinkingLow = "thinkingLow",
    ThinkingMedium = "thinkingMedium", ThinkingHigh = "thinkingHigh", ThinkingXhigh = "thinkingXhigh",
    BashMode = "bashMode",
}

/// One theme: its name and a colour (or the terminal's default) per token.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    colors: Vec<Option<Color>>,
    /// The file it came from (`None`: built in).
    pub source: Option<PathBuf>,
}

impl Theme {
    /// Parses a theme file's text; `origin` names it in the error (one line: what is wrong).
    pub fn parse(text: &str, origin: &str) -> Result<Theme, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("theme {origin}: not JSON: {e}"))?;
        let name = doc.get("name").and_then(Value::as_str).filter(|n| !n.trim().is_empty());
        let name = name.ok_or_else(|| format!("theme {origin}: no \"name\""))?.to_owned();
        let vars = doc.get("vars").and_then(Value::as_object);
        let colors = doc.get("colors").and_then(Value::as_object);
        let colors = colors.ok_or_else(|| format!("theme {origin}: no \"colors\" object"))?;
        let missing: Vec<&str> = NAMES.iter().copied().filter(|n| !colors.contains_key(*n)).collect();
        if !missing.is_empty() {
            let more = if missing.len() > 5 { format!(" and {} more", missing.len() - 5) } else { String::new() };
            return Err(format!(
                "theme {origin}: colors missing: {}{more}",
                missing[..missing.len().min(5)].join(", ")
            ));
        }
        let resolve = |token: &str, value: &Value| {
            let mut value = value;
            // A `vars` name, possibly naming another (a loop is cut after a few steps).
            for _ in 0..8 {
                match value {
                    Value::String(s) if !s.is_empty() && !s.starts_with('#') => {
                        value = vars.and_then(|v| v.get(s.as_str())).ok_or_else(|| {
                            format!("theme {origin}: {token}: \"{s}\" is neither a colour nor one of its vars")
                        })?;
                    }
                    _ => break,
                }
            }
            parse_color(value).map_err(|why| format!("theme {origin}: {token}: {why}"))
        };
        let colors = NAMES.iter().map(|n| resolve(n, &colors[*n])).collect::<Result<Vec<_>, _>>()?;
        Ok(Theme { name, colors, source: None })
    }

    /// The token's colour (`None`: the terminal's default).
    pub fn color(&self, token: Token) -> Option<Color> {
        self.colors.get(token as usize).copied().flatten()
    }

    /// The theme for extensions (`hello`): `name`, `path`, and each token's colour as `[r, g, b]`,
    /// a 256-colour index, or `null` (the terminal's default).
    pub fn to_json(&self) -> Value {
        let colors: serde_json::Map<String, Value> = NAMES
            .iter()
            .zip(&self.colors)
            .map(|(name, color)| {
                let value = match color {
                    Some(Color::Rgb(r, g, b)) => serde_json::json!([r, g, b]),
                    Some(Color::Indexed(n)) => Value::from(*n),
                    _ => Value::Null,
                };
                ((*name).to_owned(), value)
            })
            .collect();
        serde_json::json!({"name": self.name, "path": self.source, "colors": colors})
    }

    /// A style with the token's colour as the foreground.
    pub fn fg(&self, token: Token) -> Style {
        self.color(token).map_or_else(Style::default, |c| Style::default().fg(c))
    }
}

/// A colour value: `"#rrggbb"`, a 256-colour index, or `""` (the terminal's default).
fn parse_color(value: &Value) -> Result<Option<Color>, String> {
    match value {
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => {
            let hex = s.strip_prefix('#').filter(|h| h.len() == 6 && h.chars().all(|c| c.is_ascii_hexdigit()));
            let hex = hex.ok_or_else(|| format!("\"{s}\" is not #rrggbb"))?;
            let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0);
            Ok(Some(Color::Rgb(byte(0), byte(2), byte(4))))
        }
        Value::Number(n) => match n.as_u64().filter(|n| *n <= 255) {
            Some(index) => Ok(Some(Color::Indexed(index as u8))),
            None => Err(format!("{n} is not a 256-colour index (0–255)")),
        },
        other => Err(format!("{other} is not a colour")),
    }
}

/// The built-in themes.
pub fn builtins() -> Vec<Theme> {
    [include_str!("themes/dark.json"), include_str!("themes/light.json")]
        .iter()
        .filter_map(|text| Theme::parse(text, "built-in").ok())
        .collect()
}

/// The themes pi knows, and what could not be loaded from the folders it looked in.
pub struct Themes {
    pub all: Vec<Theme>,
    pub warnings: Vec<String>,
}

impl Themes {
    /// The built-ins, then `given` (files or folders: a theme there that cannot be loaded is an
    /// error), then `discovered` (the same; what cannot be loaded is a warning). A later theme
    /// of an earlier one's name is skipped with a warning.
    pub fn load(given: &[PathBuf], discovered: &[PathBuf]) -> Result<Themes, String> {
        let mut themes = Themes { all: builtins(), warnings: Vec::new() };
        for path in given {
            if !path.exists() {
                return Err(format!("--theme {}: no such file or folder", path.display()));
            }
            for theme in theme_files(path) {
                let loaded = read(&theme)?;
                themes.add(loaded);
            }
        }
        for path in discovered.iter().filter(|p| p.exists()) {
            for theme in theme_files(path) {
                match read(&theme) {
                    Ok(loaded) => themes.add(loaded),
                    Err(why) => themes.warnings.push(why),
                }
            }
        }
        Ok(themes)
    }

    fn add(&mut self, theme: Theme) {
        match self.all.iter().find(|t| t.name == theme.name) {
            Some(first) => self.warnings.push(format!(
                "theme {}: \"{}\" is already {}",
                theme.source.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(),
                theme.name,
                first.source.as_deref().map_or("built in".to_owned(), |s| format!("loaded from {}", s.display())),
            )),
            None => self.all.push(theme),
        }
    }

    /// The theme called `name`, else `dark` (with a warning when `name` was asked for).
    pub fn pick(&mut self, name: Option<&str>) -> Theme {
        let wanted = name.unwrap_or("dark");
        if let Some(theme) = self.all.iter().find(|t| t.name == wanted) {
            return theme.clone();
        }
        self.warnings.push(format!("theme \"{wanted}\" not found: using dark"));
        self.all.iter().find(|t| t.name == "dark").cloned().unwrap_or_else(|| builtins().remove(0))
    }

    /// The names, in load order.
    pub fn names(&self) -> Vec<String> {
        self.all.iter().map(|t| t.name.clone()).collect()
    }
}

/// A theme file, or the `.json` files of a folder (sorted).
fn theme_files(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_owned()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map(|entries| {
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn read(path: &Path) -> Result<Theme, String> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("theme {origin}: {e}"))?;
    let mut theme = Theme::parse(&text, &origin)?;
    theme.source = Some(path.to_owned());
    Ok(theme)
}

static CURRENT: RwLock<Option<Arc<Theme>>> = RwLock::new(None);

/// The theme the screen is drawn with (`dark` until one is set).
pub fn current() -> Arc<Theme> {
    if let Some(theme) = CURRENT.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return theme.clone();
    }
    let dark = Arc::new(builtins().remove(0));
    CURRENT.write().unwrap_or_else(|e| e.into_inner()).get_or_insert(dark).clone()
}

/// Draws the screen with `theme` from now on.
pub fn set(theme: Theme) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(theme));
}

/// The current theme's colour for `token` as a foreground style.
pub fn fg(token: Token) -> Style {
    current().fg(token)
}

/// The current theme's colour for `token`.
pub fn color(token: Token) -> Option<Color> {
    current().color(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(colors: impl Fn(&str) -> Value) -> String {
        let colors: serde_json::Map<String, Value> = NAMES.iter().map(|n| ((*n).to_owned(), colors(n))).collect();
        serde_json::json!({"name": "t", "vars": {"primary": "#00aaff", "gray": 242, "alias": "primary"}, "colors": colors})
            .to_string()
    }

    #[test]
    fn upstreams_four_value_forms_are_read() {
        let text = doc(|name| match name {
            "accent" => "primary".into(),
            "muted" => "gray".into(),
            "border" => "alias".into(),
            "dim" => 240.into(),
            "error" => "#FF0000".into(),
            _ => "".into(),
        });
        let theme = Theme::parse(&text, "t.json").unwrap();
        assert_eq!(theme.color(Token::Accent), Some(Color::Rgb(0, 0xaa, 0xff)));
        assert_eq!(theme.color(Token::Border), Some(Color::Rgb(0, 0xaa, 0xff)), "a var naming a var");
        assert_eq!(theme.color(Token::Muted), Some(Color::Indexed(242)));
        assert_eq!(theme.color(Token::Dim), Some(Color::Indexed(240)));
        assert_eq!(theme.color(Token::Error), Some(Color::Rgb(255, 0, 0)));
        assert_eq!(theme.color(Token::Text), None, "the terminal's default");
        assert_eq!(NAMES.len(), 51);
    }

    #[test]
    fn a_broken_theme_is_said_in_one_line() {
        let missing = serde_json::json!({"name": "t", "colors": {"accent": "#000000"}}).to_string();
        let why = Theme::parse(&missing, "t.json").unwrap_err();
        assert!(why.starts_with("theme t.json: colors missing: border, borderAccent"), "{why}");
        for (value, said) in [
            (Value::from("nope"), "accent: \"nope\" is neither a colour nor one of its vars"),
            (Value::from("#12345"), "accent: \"#12345\" is not #rrggbb"),
            (Value::from(256), "accent: 256 is not a 256-colour index"),
            (Value::Bool(true), "accent: true is not a colour"),
        ] {
            let text = doc(|name| if name == "accent" { value.clone() } else { "".into() });
            let why = Theme::parse(&text, "t.json").unwrap_err();
            assert!(why.contains(said) && !why.contains('\n'), "{why}");
        }
        assert!(Theme::parse("{", "t.json").unwrap_err().starts_with("theme t.json: not JSON"));
    }

    #[test]
    fn builtins_load_and_discovery_warns_where_a_flag_fails() {
        assert_eq!(builtins().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["dark", "light"]);
        let dir = std::env::temp_dir().join(format!("pi-themes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ocean.json"), doc(|_| "".into()).replace("\"t\"", "\"ocean\"")).unwrap();
        std::fs::write(dir.join("broken.json"), "{").unwrap();
        std::fs::write(dir.join("dark.json"), doc(|_| "".into()).replace("\"t\"", "\"dark\"")).unwrap();
        let mut themes = Themes::load(&[], std::slice::from_ref(&dir)).unwrap();
        assert_eq!(themes.names(), ["dark", "light", "ocean"]);
        assert!(themes.warnings.iter().any(|w| w.contains("broken.json: not JSON")), "{:?}", themes.warnings);
        assert!(themes.warnings.iter().any(|w| w.contains("\"dark\" is already built in")), "{:?}", themes.warnings);
        assert_eq!(themes.pick(Some("ocean")).name, "ocean");
        assert_eq!(themes.pick(Some("absent")).name, "dark");
        assert!(themes.warnings.last().unwrap().contains("\"absent\" not found"));
        let given = Themes::load(&[dir.join("broken.json")], &[]).err().unwrap();
        assert!(given.contains("broken.json: not JSON"), "{given}");
        assert!(Themes::load(&[dir.join("gone.json")], &[]).err().unwrap().contains("no such file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
