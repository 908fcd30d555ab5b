//! The `pi` command: run a prompt (`pi -p`), or the offline demo (`pi demo`).

#![allow(clippy::print_stdout, clippy::print_stderr)] // the binary is where output belongs

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
