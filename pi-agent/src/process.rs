//! Process groups: every program pi starts that may start others of its own — the bash tool,
//! process extensions, the Node host of JavaScript extensions, attribution commands — leads a
//! process group, and pi ends the whole group (on timeout, abort and shutdown), so nothing it
//! started outlives it.

/// Sends SIGKILL to the process group led by `pid` (a child started with `process_group(0)`).
/// A group that is already gone is not an error.
pub fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn the_whole_group_goes() {
        // A shell that starts a grandchild in the background and prints its pid.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let grandchild = line.trim().to_owned();
        kill_group(child.id());
        child.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let alive = || {
            std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .is_ok_and(|s| !s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        };
        while alive() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(!alive(), "the grandchild outlived its group");
    }
}
