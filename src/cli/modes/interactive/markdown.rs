//! The assistant's markdown as terminal lines (pulldown-cmark): headings, emphasis, inline code,
//! fenced code blocks (their language named, highlighted with syntect when it knows the
//! language, else in the code colour, behind a gutter),
//! lists, quotes, links with their address, rules and tables — wrapped at the screen's width,
//! continuation lines indented under their block.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use std::sync::{Arc, Mutex};

use ratatui::style::{Color, Modifier, Style};

use super::theme::{self, Token, fg};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Sublime's syntaxes, loaded the first time a code block names a language.
fn syntaxes() -> &'static syntect::parsing::SyntaxSet {
    static LOADED: std::sync::OnceLock<syntect::parsing::SyntaxSet> = std::sync::OnceLock::new();
    LOADED.get_or_init(syntect::parsing::SyntaxSet::load_defaults_newlines)
}

/// The current theme's `syntax*` colours as a syntect theme (built once per theme).
fn syntax_theme() -> Arc<syntect::highlighting::Theme> {
    use syntect::highlighting::{ScopeSelectors, StyleModifier, ThemeItem, ThemeSettings};
    static BUILT: Mutex<Option<(String, Arc<syntect::highlighting::Theme>)>> = Mutex::new(None);
    let theme = theme::current();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((name, syntax)) = built.as_ref().filter(|(name, _)| *name == theme.name) {
        let _ = name;
        return syntax.clone();
    }
    let rules: [(&str, Token); 9] = [
        ("comment", Token::SyntaxComment),
        ("keyword, storage.modifier", Token::SyntaxKeyword),
        ("keyword.operator", Token::SyntaxOperator),
        ("entity.name.function, support.function, variable.function", Token::SyntaxFunction),
        ("variable, entity.name.variable", Token::SyntaxVariable),
        ("string, constant.character", Token::SyntaxString),
        ("constant.numeric, constant.language", Token::SyntaxNumber),
        ("entity.name.type, entity.name.class, storage.type, support.type, support.class", Token::SyntaxType),
        ("punctuation", Token::SyntaxPunctuation),
    ];
    let scopes = rules
        .iter()
        .filter_map(|(selector, token)| {
            let scope: ScopeSelectors = selector.parse().ok()?;
            let style = StyleModifier { foreground: Some(to_syntect(theme.color(*token))), ..StyleModifier::default() };
            Some(ThemeItem { scope, style })
        })
        .collect();
    let settings =
        ThemeSettings { foreground: Some(to_syntect(theme.color(Token::MdCodeBlock))), ..Default::default() };
    let syntax = Arc::new(syntect::highlighting::Theme {
        name: Some(theme.name.clone()),
        settings,
        scopes,
        ..Default::default()
    });
    *built = Some((theme.name.clone(), syntax.clone()));
    syntax
}

/// A theme colour in syntect's form: RGB as it is, a palette index in `r` with alpha 0 (bat's
/// convention), the terminal's default as alpha 1.
fn to_syntect(color: Option<Color>) -> syntect::highlighting::Color {
    use syntect::highlighting::Color as C;
    match color {
        Some(Color::Rgb(r, g, b)) => C { r, g, b, a: 0xff },
        Some(Color::Indexed(n)) => C { r: n, g: 0, b: 0, a: 0 },
        _ => C { r: 0, g: 0, b: 0, a: 1 },
    }
}

fn from_syntect(color: syntect::highlighting::Color) -> Style {
    match color.a {
        0 => Style::new().fg(Color::Indexed(color.r)),
        1 => Style::new(),
        _ => Style::new().fg(Color::Rgb(color.r, color.g, color.b)),
    }
}

/// An open code block's highlighter: its parse and highlight state carried from line to line.
struct CodeHighlight {
    parse: syntect::parsing::ParseState,
    state: syntect::highlighting::HighlightState,
    theme: Arc<syntect::highlighting::Theme>,
}

impl CodeHighlight {
    /// A highlighter for a fenced block's language (`rust`, `py`, `ts`, `sh`… by name or file
    /// extension); `None` when syntect does not know it.
    fn new(lang: &str) -> Option<CodeHighlight> {
        let token = lang.split([' ', ',', '{']).next().unwrap_or(lang).to_ascii_lowercase();
        let alias = match token.as_str() {
            "ts" | "typescript" | "tsx" | "jsx" | "mjs" | "cjs" => "js",
            "shell" | "bash" | "zsh" | "console" => "sh",
            "py" | "python3" => "python",
            "yml" => "yaml",
            other => other,
        };
        let syntax = syntaxes().find_syntax_by_token(alias)?;
        let theme = syntax_theme();
        let highlighter = syntect::highlighting::Highlighter::new(&theme);
        let state = syntect::highlighting::HighlightState::new(&highlighter, syntect::parsing::ScopeStack::new());
        Some(CodeHighlight { parse: syntect::parsing::ParseState::new(syntax), state, theme })
    }

    /// One code line as coloured spans.
    fn line(&mut self, line: &str) -> Option<Vec<Span<'static>>> {
        let line = format!("{line}\n");
        let ops = self.parse.parse_line(&line, syntaxes()).ok()?;
        let highlighter = syntect::highlighting::Highlighter::new(&self.theme);
        let pieces = syntect::highlighting::HighlightIterator::new(&mut self.state, &ops, &line, &highlighter);
        let spans = pieces
            .map(|(style, text)| Span::styled(text.trim_end_matches('\n').to_owned(), from_syntect(style.foreground)))
            .filter(|span| !span.content.is_empty())
            .collect();
        Some(spans)
    }
}

/// `text` as lines at most `width` columns wide.
pub fn lines(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut r = Renderer::default();
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        r.event(event);
    }
    r.break_line();
    let mut out = Vec::new();
    for logical in r.done {
        wrap(logical, width.max(8), &mut out);
    }
    // No blank line at the end of a block that ends the text.
    while out.last().is_some_and(|l: &Line<'_>| l.width() == 0) {
        out.pop();
    }
    out
}

/// One line before wrapping: what starts it, what its wrapped continuations start with, and its
/// spans.
struct Logical {
    lead: Vec<Span<'static>>,
    indent: String,
    spans: Vec<Span<'static>>,
}

#[derive(Default)]
struct Renderer {
    done: Vec<Logical>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// A list item's bullet, for the item's first line.
    bullet: Option<String>,
    quote: usize,
    /// Inside a fenced or indented code block.
    code: bool,
    /// The open code block's highlighter, when its language is known.
    highlight: Option<CodeHighlight>,
    link: Option<String>,
    /// Cells of the table row being read.
    row: Vec<String>,
    cell: Option<String>,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.iter().fold(Style::default(), |acc, s| acc.patch(*s))
    }

    /// The indentation of the open lists and quotes.
    fn indent(&self) -> String {
        let mut indent = "  ".repeat(self.lists.len().saturating_sub(1));
        if !self.lists.is_empty() {
            indent.push_str("  ");
        }
        indent.push_str(&"│ ".repeat(self.quote));
        indent
    }

    fn text(&mut self, text: &str) {
        if let Some(cell) = &mut self.cell {
            cell.push_str(text);
            return;
        }
        if self.code {
            // Line by line, each behind the gutter.
            let mut parts = text.split('\n').peekable();
            while let Some(part) = parts.next() {
                if !part.is_empty() {
                    let spans = self.highlight.as_mut().and_then(|h| h.line(part));
                    self.spans
                        .extend(spans.unwrap_or_else(|| vec![Span::styled(part.to_owned(), fg(Token::MdCodeBlock))]));
                }
                if parts.peek().is_some() {
                    self.break_line();
                }
            }
            return;
        }
        self.spans.push(Span::styled(text.to_owned(), self.style()));
    }

    /// Ends the line being built (an empty one only when something asked for it).
    fn break_line(&mut self) {
        if self.spans.is_empty() && self.bullet.is_none() && !self.code {
            return;
        }
        let indent = self.indent();
        let lead = match (self.bullet.take(), self.code) {
            (Some(bullet), _) => {
                let base = "  ".repeat(self.lists.len().saturating_sub(1));
                vec![Span::raw(base), Span::styled(bullet, fg(Token::MdListBullet))]
            }
            (None, true) => vec![Span::raw(indent.clone()), Span::styled("│ ", fg(Token::MdCodeBlockBorder))],
            (None, false) => vec![Span::styled(indent.clone(), fg(Token::MdQuoteBorder))],
        };
        let indent = if self.code { format!("{indent}│ ") } else { indent };
        let spans = std::mem::take(&mut self.spans);
        self.done.push(Logical { lead, indent, spans });
    }

    fn blank(&mut self) {
        if self.done.last().is_some_and(|l| !(l.spans.is_empty() && l.lead.iter().all(|s| s.content.is_empty()))) {
            self.done.push(Logical { lead: Vec::new(), indent: String::new(), spans: Vec::new() });
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                if let Some(cell) = &mut self.cell {
                    cell.push_str(&code);
                } else {
                    self.spans.push(Span::styled(code.into_string(), fg(Token::MdCode)));
                }
            }
            // Raw HTML is shown as written.
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.break_line(),
            Event::Rule => {
                self.break_line();
                self.done.push(Logical {
                    lead: vec![Span::styled("─".repeat(40), fg(Token::MdHr))],
                    indent: String::new(),
                    spans: Vec::new(),
                });
                self.blank();
            }
            Event::TaskListMarker(done) => self.spans.push(Span::raw(if done { "[x] " } else { "[ ] " })),
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => {
                self.break_line();
                let style = if level <= HeadingLevel::H2 { fg(Token::MdHeading) } else { Style::new() };
                self.styles.push(style.add_modifier(Modifier::BOLD));
            }
            Tag::Paragraph => {}
            Tag::BlockQuote(_) => {
                self.break_line();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.break_line();
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    self.highlight = CodeHighlight::new(&lang);
                    self.done.push(Logical {
                        lead: vec![Span::styled(format!("{}  {lang}", self.indent()), fg(Token::Dim))],
                        indent: String::new(),
                        spans: Vec::new(),
                    });
                }
                self.code = true;
            }
            Tag::List(start) => {
                self.break_line();
                self.lists.push(start);
            }
            Tag::Item => {
                self.break_line();
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => "• ".into(),
                };
                self.bullet = Some(bullet);
            }
            Tag::Emphasis => self.styles.push(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.styles.push(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.styles.push(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.styles.push(fg(Token::MdLink).add_modifier(Modifier::UNDERLINED));
                self.link = Some(dest_url.into_string());
            }
            Tag::Image { dest_url, .. } => {
                self.text("[image: ");
                self.link = Some(dest_url.into_string());
            }
            Tag::Table(_) => self.break_line(),
            Tag::TableHead | Tag::TableRow => self.row.clear(),
            Tag::TableCell => self.cell = Some(String::new()),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.break_line();
                self.blank();
            }
            TagEnd::Paragraph => {
                self.break_line();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::BlockQuote(_) => {
                self.break_line();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.code = false;
                self.highlight = None;
                self.spans.clear();
                self.blank();
            }
            TagEnd::List(_) => {
                self.break_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.break_line(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(url) = self.link.take() {
                    let said: String = self.spans.iter().rev().take(1).map(|s| s.content.to_string()).collect();
                    if said != url {
                        self.spans.push(Span::styled(format!(" ({url})"), fg(Token::MdLinkUrl)));
                    }
                }
            }
            TagEnd::Image => {
                let url = self.link.take().unwrap_or_default();
                self.text(&format!(" {url}]"));
            }
            TagEnd::TableCell => {
                let cell = self.cell.take().unwrap_or_default();
                self.row.push(cell);
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                let row = std::mem::take(&mut self.row).join(" │ ");
                let head = matches!(tag, TagEnd::TableHead);
                let style = if head { Style::new().add_modifier(Modifier::BOLD) } else { Style::default() };
                self.spans.push(Span::styled(row, style));
                self.break_line();
            }
            TagEnd::Table => self.blank(),
            _ => {}
        }
    }
}

/// Wraps one logical line at `width` columns: its lead first, continuations behind its indent.
fn wrap(logical: Logical, width: usize, out: &mut Vec<Line<'static>>) {
    let indent_width: usize = logical.indent.chars().filter_map(|c| c.width()).sum();
    let mut line: Vec<Span<'static>> = logical.lead;
    let mut used: usize = line.iter().map(|s| s.width()).sum();
    for span in logical.spans {
        let mut piece = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width && used > indent_width {
                if !piece.is_empty() {
                    line.push(Span::styled(std::mem::take(&mut piece), span.style));
                }
                out.push(Line::from(std::mem::take(&mut line)));
                line.push(Span::styled(logical.indent.clone(), fg(Token::Dim)));
                used = indent_width;
            }
            piece.push(c);
            used += w;
        }
        if !piece.is_empty() {
            line.push(Span::styled(piece, span.style));
        }
    }
    out.push(Line::from(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect::<String>()).collect()
    }

    #[test]
    fn blocks_render_as_terminal_lines() {
        let text = "# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n\n> quoted\n\n[pi](https://pi.dev)";
        let lines = lines(text, 80);
        assert_eq!(
            plain(&lines),
            [
                "Title",
                "",
                "Some bold and code.",
                "",
                "• one",
                "• two",
                "",
                "1. first",
                "2. second",
                "",
                "  rust",
                "│ fn main() {}",
                "",
                "│ quoted",
                "",
                "pi (https://pi.dev)",
            ]
        );
        let bold = lines[2].spans.iter().find(|s| s.content == "bold").unwrap();
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        let code = lines[2].spans.iter().find(|s| s.content == "code").unwrap();
        assert_eq!(code.style.fg, theme::color(Token::MdCode));
    }

    #[test]
    fn code_blocks_are_highlighted_by_language() {
        let lines = lines("```rust\nfn main() { let s = \"text\"; }\n```\n\n```klingon\nqapla'\n```", 80);
        let colour =
            |line: &Line<'_>, text: &str| line.spans.iter().find(|s| s.content.contains(text)).unwrap().style.fg;
        let rust = &lines[1];
        assert_eq!(plain(std::slice::from_ref(rust)), ["│ fn main() { let s = \"text\"; }"]);
        let (keyword, string) = (colour(rust, "fn"), colour(rust, "text"));
        assert!(keyword.is_some() && string.is_some(), "{rust:?}");
        assert_ne!(keyword, string, "keywords and strings differ");
        // A language syntect does not know: the code colour.
        let other = lines.iter().find(|l| plain(std::slice::from_ref(*l))[0].contains("qapla")).unwrap();
        assert_eq!(colour(other, "qapla"), theme::color(Token::MdCodeBlock));
    }

    #[test]
    fn long_lines_wrap_under_their_block() {
        let lines = lines("- a list item that is long enough to wrap", 20);
        let text = plain(&lines);
        assert!(text.len() > 1 && text.iter().all(|l| l.chars().count() <= 20), "{text:?}");
        assert!(text[0].starts_with("• ") && text[1].starts_with("  "), "{text:?}");
    }
}
