//! The messages a run starts with, as upstream builds them from its command line: piped stdin,
//! then the `@FILE` arguments as `<file name="…">` blocks, then the first message — one prompt —
//! followed by the other messages, each a prompt of its own.

use std::io::Read;
use std::path::{Path, PathBuf};

use pi_agent::message::ContentBlock;

use crate::cli::CliError;

/// How long a run that has messages of its own waits for piped stdin to say anything (data or
/// its end) before going on without it: a parent that leaves an idle pipe open must not hang it.
const IDLE_STDIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Everything piped to stdin, trimmed; `None` when there was nothing. With `has_messages`, a
/// stdin that stays silent for [`IDLE_STDIN`] is not waited for (upstream reads it to its end
/// regardless); without, it is the message, so it is read to its end.
pub fn read_stdin(has_messages: bool) -> Result<Option<String>, CliError> {
    if has_messages && !stdin_speaks_within(IDLE_STDIN) {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).map_err(|e| CliError::Failure(format!("stdin: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| CliError::Usage("stdin: not UTF-8 text".into()))?;
    let text = text.trim();
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

/// What a run starts with: the prompts to send in turn, and the images that go with the first.
#[derive(Debug, Default, PartialEq)]
pub struct Initial {
    /// The first carries stdin and the `@FILE`s; the rest are the other arguments.
    pub messages: Vec<String>,
    /// Images among the `@FILE`s (named in the first message as `<file name="…"></file>`).
    pub images: Vec<ContentBlock>,
}

/// True when stdin has data or its end within `wait`.
fn stdin_speaks_within(wait: std::time::Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    let timeout = rustix::time::Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: i64::from(wait.subsec_nanos()) };
    match poll(&mut fds, Some(&timeout)) {
        Ok(n) => n > 0,
        // Not pollable (a regular file): it has its end.
        Err(_) => true,
    }
}

/// The prompts to send in turn: the first carries `stdin` and every `@FILE` of `args` (paths
/// relative to `cwd`, `~/` for the home folder; empty files skipped; images attached to it), the
/// rest are the other arguments. Empty when there is nothing at all.
pub fn messages(args: Vec<String>, stdin: Option<String>, cwd: &Path) -> Result<Initial, CliError> {
    let mut first = stdin.unwrap_or_default();
    let mut initial = Initial::default();
    for arg in args {
        match arg.strip_prefix('@').filter(|path| !path.is_empty()) {
            Some(path) => {
                let (text, image) = file_block(path, cwd)?;
                first.push_str(&text);
                initial.images.extend(image);
            }
            None => initial.messages.push(arg),
        }
    }
    if initial.messages.is_empty() {
        if !first.is_empty() {
            initial.messages.push(first);
        }
    } else {
        initial.messages[0].insert_str(0, &first);
    }
    Ok(initial)
}

/// `<file name="ABSOLUTE">\n…\n</file>\n` for a text file (empty for an empty one); for an
/// image, `<file name="ABSOLUTE"></file>\n` and the image.
fn file_block(arg: &str, cwd: &Path) -> Result<(String, Option<ContentBlock>), CliError> {
    let path = resolve(arg, cwd);
    let bytes = std::fs::read(&path).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound { "no such file".to_owned() } else { e.to_string() };
        CliError::Usage(format!("@{arg}: {why} ({})", path.display()))
    })?;
    if bytes.is_empty() {
        return Ok((String::new(), None));
    }
    if let Some(image) = crate::cli::images::from_bytes(&bytes) {
        return Ok((format!("<file name=\"{}\"></file>\n", path.display()), Some(image)));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::Usage(format!("@{arg}: not UTF-8 text ({})", path.display())))?;
    Ok((format!("<file name=\"{}\">\n{text}\n</file>\n", path.display()), None))
}

/// `arg` as an absolute path: `~/…` under the home folder, a relative path under `cwd`.
fn resolve(arg: &str, cwd: &Path) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    let path = match arg.strip_prefix("~/").zip(home()) {
        Some((rest, home)) => home.join(rest),
        None if arg == "~" => home().unwrap_or_else(|| cwd.to_owned()),
        None => cwd.join(arg),
    };
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pi-initial-{}", pi_observe::core::SpanId::random()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn stdin_and_files_go_before_the_first_message_and_the_rest_follow() {
        let dir = scratch();
        std::fs::write(dir.as_path().join("a.md"), "alpha").unwrap();
        std::fs::write(dir.as_path().join("empty.txt"), "").unwrap();
        let args = ["@a.md", "first", "@empty.txt", "second"].map(String::from).to_vec();
        let got = messages(args, Some("piped".into()), dir.as_path()).unwrap().messages;
        let name = dir.as_path().join("a.md");
        assert_eq!(got, [format!("piped<file name=\"{}\">\nalpha\n</file>\nfirst", name.display()), "second".into()]);
        // Files alone are the one message; nothing at all is none.
        let got = messages(vec!["@a.md".into()], None, dir.as_path()).unwrap().messages;
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with("</file>\n"));
        assert!(messages(Vec::new(), None, dir.as_path()).unwrap().messages.is_empty());
        // An image is named in the text and attached.
        std::fs::write(dir.join("shot.png"), b"\x89PNG\r\n\x1a\n").unwrap();
        let got = messages(vec!["@shot.png".into(), "what is this".into()], None, dir.as_path()).unwrap();
        let name = dir.join("shot.png");
        assert_eq!(got.messages, [format!("<file name=\"{}\"></file>\nwhat is this", name.display())]);
        assert!(matches!(&got.images[..], [ContentBlock::Image { mime_type, .. }] if mime_type == "image/png"));
    }

    #[test]
    fn missing_and_binary_files_are_one_line_errors_naming_the_argument() {
        let dir = scratch();
        std::fs::write(dir.join("bin"), [0xC3, 0x28]).unwrap();
        for (arg, says) in [("@nope.md", "@nope.md: no such file"), ("@bin", "@bin: not UTF-8")] {
            let e = messages(vec![arg.into()], None, dir.as_path()).unwrap_err().to_string();
            assert!(e.starts_with(says) && !e.contains('\n'), "{e}");
        }
    }
}
