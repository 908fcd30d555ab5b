//! Terminal bytes and styles between pi's screen and what extensions draw: the lines a
//! component renders (SGR styles kept, other escapes dropped), the keys it reads (xterm's
//! legacy encoding, as pi-tui's `matchesKey` reads them) and upstream's key ids for shortcuts.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::text::{Line, Span};

/// Upstream's key id of `key` for extension shortcuts (`ctrl+alt+p`, `ctrl+shift+u`, `alt+m`,
/// `f5`: modifiers in pi-tui's order ctrl, shift, alt, super), for keys with Ctrl, Alt or Super
/// and function keys; `None` for what types text or drives the editor and for Ctrl+C / Ctrl+D.
pub fn key_id(key: &KeyEvent) -> Option<String> {
    let m = key.modifiers;
    let (ctrl, alt, sup) =
        (m.contains(KeyModifiers::CONTROL), m.contains(KeyModifiers::ALT), m.contains(KeyModifiers::SUPER));
    let mut shift = m.contains(KeyModifiers::SHIFT);
    let base = match key.code {
        KeyCode::Char(c) if ctrl && !alt && !sup && matches!(c.to_ascii_lowercase(), 'c' | 'd') => return None,
        KeyCode::Char(c) => {
            shift |= c.is_ascii_uppercase();
            c.to_ascii_lowercase().to_string()
        }
        KeyCode::F(n) => format!("f{n}"),
        KeyCode::Up => "up".into(),
        KeyCode::Down => "down".into(),
        KeyCode::Left => "left".into(),
        KeyCode::Right => "right".into(),
        KeyCode::Enter => "enter".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::Backspace => "backspace".into(),
        KeyCode::Delete => "delete".into(),
        _ => return None,
    };
    if !(ctrl || alt || sup || matches!(key.code, KeyCode::F(_))) {
        return None;
    }
    let mods = [(ctrl, "ctrl"), (shift, "shift"), (alt, "alt"), (sup, "super")];
    let mut id: Vec<&str> = mods.iter().filter(|(on, _)| *on).map(|(_, name)| *name).collect();
    id.push(&base);
    Some(id.join("+"))
}

/// True when `text` is one or more OSC sequences (`ESC ] …` ended by BEL or `ESC \\`) and
/// nothing else.
pub fn osc_only(text: &str) -> bool {
    let mut rest = text;
    while !rest.is_empty() {
        let Some(body) = rest.strip_prefix("\x1b]") else { return false };
        let Some(end) = body.find(['\x07', '\x1b']) else { return false };
        rest = match &body[end..] {
            tail if tail.starts_with('\x07') => &tail[1..],
            tail if tail.starts_with("\x1b\\") => &tail[2..],
            _ => return false,
        };
    }
    !text.is_empty()
}

/// One line an extension drew, its ANSI colours and styles kept (SGR codes, as pi-tui writes
/// them); anything else that escapes is dropped.
pub fn styled(line: &str) -> Line<'static> {
    use ansi_to_tui::IntoText as _;
    // String sequences (OSC titles, pi-tui's APC cursor marker) carry no style: gone first.
    let line = &if line.contains("\x1b]") || line.contains("\x1b_") || line.contains("\x1bP") {
        strip_strings(line)
    } else {
        line.to_owned()
    };
    line.into_text()
        .ok()
        .and_then(|text| text.lines.into_iter().next())
        .map(|l| Line::from(l.spans.into_iter().map(|s| Span::styled(plain(&s.content), s.style)).collect::<Vec<_>>()))
        .unwrap_or_else(|| Line::raw(plain(line)))
}

/// `text` without its string sequences (`ESC ]`, `ESC _`, `ESC P`, … ended by BEL or `ESC \\`).
fn strip_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.next_if(|n| matches!(n, ']' | '_' | 'P' | '^' | 'X')).is_some() {
            skip_string(&mut chars);
        } else {
            out.push(c);
        }
    }
    out
}

/// Skips a string sequence's body and its end (BEL or `ESC \\`).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
            break;
        }
    }
}

/// `text` without terminal escape sequences (the component's colours and styles).
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        // CSI (`ESC [ … final`), OSC (`ESC ] … BEL|ST`), or a two-character escape.
        match chars.next() {
            Some('[') => while chars.next().is_some_and(|c| !('@'..='~').contains(&c)) {},
            Some(']' | '_' | 'P' | '^' | 'X') => skip_string(&mut chars),
            _ => {}
        }
    }
    out
}

/// A key as the terminal bytes a component reads (`matchesKey` in pi-tui), in xterm's legacy
/// encoding: Ctrl letters as control characters, Alt as an `ESC` prefix, modified arrows and
/// editing keys with xterm's modifier parameter (`ESC [1;5D` is Ctrl+Left).
pub fn key_bytes(key: &KeyEvent) -> Option<String> {
    let m = key.modifiers;
    let (ctrl, alt, shift) =
        (m.contains(KeyModifiers::CONTROL), m.contains(KeyModifiers::ALT), m.contains(KeyModifiers::SHIFT));
    // xterm's modifier parameter: 1 + Shift 1, Alt 2, Ctrl 4.
    let param = 1 + u8::from(shift) + 2 * u8::from(alt) + 4 * u8::from(ctrl);
    let csi = |last: char| if param > 1 { format!("\x1b[1;{param}{last}") } else { format!("\x1b[{last}") };
    let tilde = |n: u8| if param > 1 { format!("\x1b[{n};{param}~") } else { format!("\x1b[{n}~") };
    let alt_prefix = |bytes: String| if alt { format!("\x1b{bytes}") } else { bytes };
    Some(match key.code {
        KeyCode::Char(c) if ctrl => alt_prefix(
            match c.to_ascii_lowercase() {
                c @ 'a'..='z' => (c as u8 - b'a' + 1) as char,
                ' ' | '@' | '2' => '\0',
                '[' | '3' => '\x1b',
                '\\' | '4' => '\x1c',
                ']' | '5' => '\x1d',
                '^' | '6' => '\x1e',
                '-' | '_' | '7' | '/' => '\x1f',
                _ => return None,
            }
            .to_string(),
        ),
        KeyCode::Char(c) => alt_prefix(c.to_string()),
        KeyCode::Enter => alt_prefix("\r".into()),
        KeyCode::Esc => alt_prefix("\x1b".into()),
        KeyCode::Backspace if ctrl => alt_prefix("\x08".into()),
        KeyCode::Backspace => alt_prefix("\x7f".into()),
        KeyCode::Tab => alt_prefix("\t".into()),
        KeyCode::BackTab => "\x1b[Z".into(),
        KeyCode::Up => csi('A'),
        KeyCode::Down => csi('B'),
        KeyCode::Right => csi('C'),
        KeyCode::Left => csi('D'),
        KeyCode::Home => csi('H'),
        KeyCode::End => csi('F'),
        KeyCode::Insert => tilde(2),
        KeyCode::Delete => tilde(3),
        KeyCode::PageUp => tilde(5),
        KeyCode::PageDown => tilde(6),
        KeyCode::F(n @ 1..=4) if param == 1 => format!("\x1bO{}", char::from(b'P' + n - 1)),
        KeyCode::F(n @ 1..=4) => format!("\x1b[1;{param}{}", char::from(b'P' + n - 1)),
        KeyCode::F(n @ 5..=12) => tilde([15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_dropped_and_keys_become_terminal_bytes() {
        assert_eq!(plain("\x1b[1;32mgreen\x1b[0m and \x1b]0;title\x07plain"), "green and plain");
        assert_eq!(plain("a\x1b_pi:c\x07b"), "ab", "pi-tui's cursor marker");
        let marked = styled("\x1b[7mx\x1b_pi:c\x07\x1b[27m y");
        assert_eq!(marked.spans.iter().map(|s| s.content.as_ref()).collect::<String>(), "x y");
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(key_bytes(&key(KeyCode::Up)).as_deref(), Some("\x1b[A"));
        assert_eq!(key_bytes(&key(KeyCode::Esc)).as_deref(), Some("\x1b"));
        let with = |code, modifiers| key_bytes(&KeyEvent::new(code, modifiers));
        let (ctrl, alt) = (KeyModifiers::CONTROL, KeyModifiers::ALT);
        assert_eq!(with(KeyCode::Char('c'), ctrl).as_deref(), Some("\x03"));
        assert_eq!(with(KeyCode::Char('b'), alt).as_deref(), Some("\x1bb"));
        assert_eq!(with(KeyCode::Left, ctrl).as_deref(), Some("\x1b[1;5D"));
        assert_eq!(with(KeyCode::Up, alt).as_deref(), Some("\x1b[1;3A"));
        assert_eq!(with(KeyCode::Backspace, alt).as_deref(), Some("\x1b\x7f"));
        assert_eq!(with(KeyCode::Char('-'), ctrl).as_deref(), Some("\x1f"));
        assert_eq!(with(KeyCode::Char(']'), ctrl).as_deref(), Some("\x1d"));
        assert_eq!(with(KeyCode::Enter, alt).as_deref(), Some("\x1b\r"));
        assert_eq!(with(KeyCode::Delete, ctrl).as_deref(), Some("\x1b[3;5~"));
        assert_eq!(key_bytes(&key(KeyCode::F(1))).as_deref(), Some("\x1bOP"));
        assert_eq!(key_bytes(&key(KeyCode::F(5))).as_deref(), Some("\x1b[15~"));
    }

    #[test]
    fn extension_lines_keep_their_colours() {
        let line = styled("\x1b[38;2;255;0;0mred\x1b[39m and \x1b[1mbold\x1b[22m\x1b]0;t\x07");
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "red and bold");
        let red = line.spans.iter().find(|s| s.content == "red").unwrap();
        assert_eq!(red.style.fg, Some(ratatui::style::Color::Rgb(255, 0, 0)));
        let bold = line.spans.iter().find(|s| s.content == "bold").unwrap();
        assert!(bold.style.add_modifier.contains(ratatui::style::Modifier::BOLD));
    }

    #[test]
    fn shortcut_keys_get_upstreams_ids() {
        let id = |code, modifiers| key_id(&KeyEvent::new(code, modifiers));
        let (ctrl, alt, shift) = (KeyModifiers::CONTROL, KeyModifiers::ALT, KeyModifiers::SHIFT);
        assert_eq!(id(KeyCode::Char('p'), ctrl | alt).as_deref(), Some("ctrl+alt+p"));
        assert_eq!(id(KeyCode::Char('U'), ctrl | shift).as_deref(), Some("ctrl+shift+u"));
        assert_eq!(id(KeyCode::Char('m'), alt).as_deref(), Some("alt+m"));
        assert_eq!(id(KeyCode::F(5), KeyModifiers::NONE).as_deref(), Some("f5"));
        assert_eq!(id(KeyCode::Char('x'), KeyModifiers::NONE), None, "typing");
        assert_eq!(id(KeyCode::Char('c'), ctrl), None, "pi's own");
    }

    #[test]
    fn only_osc_sequences_reach_the_terminal() {
        assert!(osc_only("\x1b]777;notify;Pi;Ready\x07"));
        assert!(osc_only("\x1b]99;i=1;t\x1b\\\x1b]99;i=1:p=body;b\x1b\\"));
        for not in ["", "plain", "\x1b]777;notify;no end", "\x1b]0;t\x07\x1b[2J", "\x1b[H"] {
            assert!(!osc_only(not), "{not:?}");
        }
    }
}
