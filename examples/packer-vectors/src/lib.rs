//! The engine's side of the harness's packing test vectors (`harness laws --export-vectors DIR`).
//!
//! - [`packing`]: the packing of docs/models.md ("Packing") as the engine does it: what the vectors check.
//!   An engine puts its own packer here (or calls it from [`check`]).
//! - [`session`]: the packer's message loop (docs/packer-protocol.md, "Sessions"): the verb each message
//!   is answered with.
//! - [`check`]: one vector, one session, or the folder's index, read and compared; each returns what
//!   differed, observed against expected, in one message.
//! - [`json`], [`sha256`]: the two pieces of std-only plumbing (a JSON reader, the index's digests).
//!
//! `build.rs` turns every vector and session of the folder that `PACKER_TEST_VECTORS` names into one
//! `#[test]` of `tests/vectors.rs`, so `cargo test` lists and reports each by name.

pub mod check;
pub mod json;
pub mod packing;
pub mod session;
pub mod sha256;

/// The environment variable that names the exported vectors folder (an absolute path).
pub const VECTORS_VAR: &str = "PACKER_TEST_VECTORS";
