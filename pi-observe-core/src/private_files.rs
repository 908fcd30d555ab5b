//! Files that hold content (sessions, event logs, extension logs) are private to their owner:
//! created `0600` in directories created `0700`, whatever the umask (a umask only removes
//! bits). Files and directories that already exist keep their modes.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::path::Path;

/// Open options that create a file only its owner can read and write (`0600` on Unix); add
/// `append`, `create` or `create_new` as needed.
pub fn private_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Writes `contents` to `path` (created `0600`, or truncated if it exists) and syncs it: the
/// temporary file of an atomic replace.
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = private_file_options().write(true).create(true).truncate(true).open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Creates `dir` and its missing parents, each new one only its owner can enter (`0700` on
/// Unix).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the parent directory of `path` (if it has one) with [`create_private_dir_all`].
pub fn create_private_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => create_private_dir_all(dir),
        None => Ok(()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_and_dirs_are_private_even_with_an_open_umask() {
        let root = std::env::temp_dir().join(format!("pi-private-{}", crate::SpanId::random()));
        let file = root.join("a/b/f.jsonl");
        create_private_parent(&file).unwrap();
        private_file_options().append(true).create(true).open(&file).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&root.join("a/b")), 0o700);
        assert_eq!(mode(&root.join("a")), 0o700);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
