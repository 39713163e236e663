//! The packer's message loop, as docs/packer-protocol.md ("Sessions") states it: `hello` first and once,
//! then `pack` and `unpack` in any order; a request before `hello`, a second `hello`, another `version`
//! (or none) and a verb that is not a request are each answered with `error`, and the loop reads on.
//! Metadata keys it does not know are ignored.

use std::collections::BTreeMap;

/// The verb a message is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Hello,
    Packed,
    Unpacked,
    Error,
}

impl Answer {
    pub fn verb(self) -> &'static str {
        match self {
            Answer::Hello => "hello",
            Answer::Packed => "packed",
            Answer::Unpacked => "unpacked",
            Answer::Error => "error",
        }
    }
}

/// One packer process, from its start to the end of its stdin.
#[derive(Debug, Default)]
pub struct Session {
    greeted: bool,
}

impl Session {
    pub fn new() -> Self {
        Self::default()
    }

    /// The answer to a message with this schema metadata (a request served here still has to pack).
    pub fn answer(&mut self, metadata: &BTreeMap<String, String>) -> Answer {
        if metadata.get("version").map(String::as_str) != Some("2") {
            return Answer::Error;
        }
        match (metadata.get("verb").map(String::as_str), self.greeted) {
            (Some("hello"), false) => {
                self.greeted = true;
                Answer::Hello
            }
            (Some("pack"), true) => Answer::Packed,
            (Some("unpack"), true) => Answer::Unpacked,
            _ => Answer::Error,
        }
    }
}
