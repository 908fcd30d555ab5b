//! Threads that do telemetry's work, below the priority of the threads that emit records.

use std::thread::JoinHandle;

/// Starts a thread named `name` that runs `work` below the scheduling priority of the threads
/// that emit records (nice +10 on Linux; elsewhere at the usual priority): when the cores are
/// busy, the agent's threads run first and telemetry waits. [`crate::Background`]'s worker and the
/// adapters' export and writer threads start this way; use it for any thread that does
/// telemetry's work and that nothing the agent needs waits on. It only lowers (an unprivileged
/// process may), and a failure to lower is ignored: the thread then keeps the usual priority.
pub fn spawn_telemetry_thread<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    std::thread::Builder::new().name(name.to_owned()).spawn(move || {
        #[cfg(target_os = "linux")]
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
        work()
    })
}
