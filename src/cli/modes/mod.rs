//! How `pi` talks to its user: print mode (`pi -p`, text or JSON lines) today; the interactive
//! terminal mode and the RPC mode (`--mode rpc`) will live beside it on the same harness,
//! sessions and sinks.

pub mod print;
