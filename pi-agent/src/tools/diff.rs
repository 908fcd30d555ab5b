//! The edit tool's diff, in upstream's format (`details.diff`): changed lines as `-NN old` /
//! `+NN new`, up to four unchanged lines around each change as ` NN text`, and ` …` (`...`)
//! where unchanged lines are left out. Line numbers are the old file's for removed and unchanged
//! lines, the new file's for added ones.

use similar::{ChangeTag, TextDiff};

/// Unchanged lines shown on each side of a change.
const CONTEXT: usize = 4;

/// The diff of `old` → `new`, and the first changed line of the new file.
pub fn diff(old: &str, new: &str) -> (String, Option<usize>) {
    let diff = TextDiff::from_lines(old, new);
    let width = old.lines().count().max(new.lines().count()).max(1).to_string().len();
    // Runs of equal lines and of changes, in order: (is a change, its lines).
    let mut runs: Vec<(bool, Vec<(ChangeTag, String)>)> = Vec::new();
    for change in diff.iter_all_changes() {
        let changed = change.tag() != ChangeTag::Equal;
        let line = change.value().strip_suffix('\n').unwrap_or(change.value()).to_owned();
        match runs.last_mut() {
            Some((kind, lines)) if *kind == changed => lines.push((change.tag(), line)),
            _ => runs.push((changed, vec![(change.tag(), line)])),
        }
    }
    if !runs.iter().any(|(changed, _)| *changed) {
        return (String::new(), None);
    }
    let (mut out, mut first) = (Vec::new(), None);
    let (mut old_no, mut new_no) = (1usize, 1usize);
    let skipped = format!(" {} ...", " ".repeat(width));
    for (i, (changed, lines)) in runs.iter().enumerate() {
        if *changed {
            first.get_or_insert(new_no);
            for (tag, line) in lines {
                if *tag == ChangeTag::Insert {
                    out.push(format!("+{new_no:>width$} {line}"));
                    new_no += 1;
                } else {
                    out.push(format!("-{old_no:>width$} {line}"));
                    old_no += 1;
                }
            }
            continue;
        }
        let (before, after) = (i > 0, i + 1 < runs.len());
        // Which unchanged lines are shown: the first CONTEXT after a change, the last CONTEXT
        // before one.
        let n = lines.len();
        let head = if before { CONTEXT.min(n) } else { 0 };
        let tail = if after { CONTEXT.min(n - head) } else { 0 };
        for (k, (_, line)) in lines.iter().enumerate() {
            let shown = k < head || k >= n - tail;
            if shown {
                out.push(format!(" {old_no:>width$} {line}"));
            } else if k == head {
                out.push(skipped.clone());
            }
            old_no += 1;
            new_no += 1;
        }
    }
    (out.join("\n"), first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_shows_with_four_lines_around_it_as_upstream_writes_it() {
        let old: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 6\n", "line six\nline 6b\n");
        let (diff, first) = diff(&old, &new);
        assert_eq!(first, Some(6));
        let expected = [
            "    ...",
            "  2 line 2",
            "  3 line 3",
            "  4 line 4",
            "  5 line 5",
            "- 6 line 6",
            "+ 6 line six",
            "+ 7 line 6b",
            "  7 line 7",
            "  8 line 8",
            "  9 line 9",
            " 10 line 10",
            "    ...",
        ];
        assert_eq!(diff.lines().collect::<Vec<_>>(), expected, "{diff}");
        assert_eq!(super::diff("same\n", "same\n"), (String::new(), None));
    }
}
