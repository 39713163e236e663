//! One `#[test]` per vector and per session of the exported folder: `cargo test` then lists, filters and
//! reports each by name (`test vector_op1_many_blocks ... FAILED`), as libtest does any test.
//!
//! The folder is the one `PACKER_TEST_VECTORS` names, an absolute path (cargo runs this script in the
//! package's folder, not where you stand). Its index.json lists the vectors, sessions.json the sessions;
//! the tests read the files when they run. Where the variable is unset, relative, or names no readable
//! index, the one generated test fails saying so: a `cargo test` that checked nothing never passes.
//! The script runs again when the variable or anything in the folder changes (a re-export included).

#[allow(dead_code)] // the build script reads with the library's JSON reader, and uses only part of it
#[path = "src/json.rs"]
mod json;

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const VAR: &str = "PACKER_TEST_VECTORS";

fn main() {
    println!("cargo:rerun-if-env-changed={}", VAR);
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("vector_tests.rs");
    let code = generated().unwrap_or_else(|why| failing("vectors_folder", &why));
    fs::write(&out, code).unwrap_or_else(|e| panic!("{}: cannot write the generated tests: {}", out.display(), e));
}

fn generated() -> Result<String, String> {
    let dir = env::var_os(VAR).ok_or_else(|| {
        format!(
            "{VAR} is not set: export the vectors (harness laws --export-vectors DIR) and run \
             {VAR}=/absolute/path/to/DIR cargo test"
        )
    })?;
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() {
        return Err(format!(
            "{VAR}={}: give an absolute path (cargo builds in the package's folder, not where you stand), \
             e.g. {VAR}=$PWD/{}",
            dir.display(),
            dir.display()
        ));
    }
    println!("cargo:rerun-if-changed={}", dir.display());
    let index = read(&dir, "index.json")?;
    let dir_text = dir
        .to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", dir.display()))?;
    let mut code = format!("const VECTORS: &str = {:?};\n\n", dir_text);
    code += &test_fn("index", "packer_vectors::check::index(std::path::Path::new(VECTORS))");
    let vectors = index
        .get("vectors")
        .as_array()
        .ok_or("index.json: 'vectors' is not a list")?;
    for entry in vectors {
        let name = name(entry.get("name"), "index.json: a vector's name")?;
        let file = entry
            .get("file")
            .as_str()
            .ok_or("index.json: a vector's file is not a string")?;
        let call = format!(
            "packer_vectors::check::vector_file(std::path::Path::new(VECTORS), {:?})",
            file
        );
        code += &test_fn(&format!("vector_{}", ident(&name)), &call);
    }
    let sessions_file = index
        .get("sessions")
        .get("file")
        .as_str()
        .ok_or("index.json: 'sessions.file' is not a string")?;
    let sessions = read(&dir, sessions_file)?;
    for case in sessions
        .get("sessions")
        .as_array()
        .ok_or(format!("{}: 'sessions' is not a list", sessions_file))?
    {
        let name = name(case.get("name"), &format!("{}: a session's name", sessions_file))?;
        let call = format!(
            "packer_vectors::check::session(std::path::Path::new(VECTORS), {:?}, {:?})",
            sessions_file, name
        );
        code += &test_fn(&format!("session_{}", ident(&name)), &call);
    }
    Ok(code)
}

fn read(dir: &Path, file: &str) -> Result<json::Json, String> {
    let path = dir.join(file);
    let bytes = fs::read(&path).map_err(|e| {
        format!(
            "{}: cannot read it ({}): is {VAR} the folder `harness laws --export-vectors` wrote?",
            path.display(),
            e
        )
    })?;
    json::parse(&bytes).map_err(|e| format!("{}: not a JSON file ({})", path.display(), e))
}

/// A vector's or session's name: 1-100 of a-z, 0-9 and '-' (the vectors' schema), so it makes a test name.
fn name(j: &json::Json, what: &str) -> Result<String, String> {
    let text = j.as_str().ok_or_else(|| format!("{} is not a string", what))?;
    let ok = !text.is_empty()
        && text.len() <= 100
        && text
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!("{} {:?} is not 1-100 of a-z, 0-9 and '-'", what, text))
    }
}

fn ident(name: &str) -> String {
    name.replace('-', "_")
}

fn test_fn(name: &str, call: &str) -> String {
    let mut code = String::new();
    writeln!(
        code,
        "#[test]\nfn {}() {{\n    packer_vectors::check::run({});\n}}\n",
        name, call
    )
    .unwrap();
    code
}

fn failing(name: &str, why: &str) -> String {
    format!("#[test]\nfn {}() {{\n    panic!(\"{{}}\", {:?});\n}}\n", name, why)
}
