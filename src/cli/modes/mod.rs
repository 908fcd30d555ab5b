//! How `pi` talks to its user: print mode (`pi -p`, text or JSON lines), the RPC mode
//! (`--mode rpc`) and the interactive terminal mode — all on one [`harness`]: the same sessions,
//! extensions, settings and sinks.

pub mod driver;
pub mod harness;
pub mod interactive;
pub mod print;
pub mod rpc;
