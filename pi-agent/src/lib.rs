//! The pi coding-agent runtime: providers, harness, tools, sessions; emits pi.* events through pi-observe-core.
//!
//! Not built yet: this crate is a placeholder in the workspace so the dependency arrows are fixed
//! from the start (it depends on `pi-observe-core` only).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
