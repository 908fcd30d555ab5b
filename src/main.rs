//! The `pi` command: the interactive mode, print mode (`pi -p`), RPC mode (`--mode rpc`), and
//! `demo`, `report`, `export`, `observe`, `config`, `trust` — all in the `cli` module.

#![allow(clippy::print_stdout, clippy::print_stderr)] // the binary is where output belongs

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
