//! The exported vectors read and compared with what [`crate::packing`] and [`crate::session`] make of them.
//!
//! Each check returns `Err` with one message naming the file, the tensor or step, how many values of how
//! many differ, the first of them (observed, then expected) and what to do next; the generated tests
//! panic with it. Values are compared exactly (float32 by their bits): packing moves numbers, it never
//! computes them.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs;
use std::path::Path;

use crate::json::{self, Json};
use crate::packing::{self, Block, Geometry, Packed, Segment};
use crate::session::{Answer, Session};
use crate::sha256;

/// The vector format these checks read (index.json's `vector_format`).
pub const FORMAT: i64 = 2;
const REEXPORT: &str = "export them again: harness laws --export-vectors DIR --replace";
const FIX: &str = "src/packing.rs packs otherwise than the harness: fix the packer (or, if the contract changed, \
                   export the vectors again: harness laws --export-vectors DIR --replace)";

/// Panic with the message of a failed check: what a generated `#[test]` does with it.
pub fn run(result: Result<(), String>) {
    if let Err(message) = result {
        panic!("{}", message);
    }
}

/// A JSON file of the folder, parsed.
pub fn read_json(dir: &Path, file: &str) -> Result<Json, String> {
    let path = dir.join(file);
    let bytes = fs::read(&path).map_err(|e| format!("{}: cannot read it ({})", path.display(), e))?;
    json::parse(&bytes).map_err(|e| format!("{}: not a JSON file ({}); {}", path.display(), e, REEXPORT))
}

// ------------------------------------------------------------------------------------------ the index

/// Every file index.json lists is there with the sha256 it lists, and no other JSON file is: a vector edited
/// by hand, cut short or left from another export is named before its comparisons are trusted.
pub fn index(dir: &Path) -> Result<(), String> {
    let index = read_json(dir, "index.json")?;
    format_of(&index, "index.json")?;
    let mut listed = vec!["index.json".to_string()];
    let sessions = index.get("sessions");
    let entries = index
        .get("vectors")
        .as_array()
        .ok_or("index.json: 'vectors' is not a list")?;
    for (file, digest) in entries
        .iter()
        .map(|e| (e.get("file"), e.get("sha256")))
        .chain(std::iter::once((sessions.get("file"), sessions.get("sha256"))))
    {
        let (file, want) = (
            text(file, "index.json: a file name")?,
            text(digest, "index.json: a sha256")?,
        );
        let bytes =
            fs::read(dir.join(&file)).map_err(|e| format!("{}: listed in index.json, cannot read it ({})", file, e))?;
        let got = sha256::hex_digest(&bytes);
        if got != want {
            return Err(format!(
                "{}: sha256 {} is not the {} index.json lists: the file was edited or cut short after the export; {}",
                file, got, want, REEXPORT
            ));
        }
        listed.push(file);
    }
    let mut stray: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot list it ({})", dir.display(), e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.ends_with(".json") && !listed.contains(name))
        .collect();
    stray.sort();
    if !stray.is_empty() {
        return Err(format!(
            "{} JSON file(s) not in index.json: {:?} (left from another export?); {}",
            stray.len(),
            stray,
            REEXPORT
        ));
    }
    Ok(())
}

fn format_of(j: &Json, file: &str) -> Result<(), String> {
    match j.get("vector_format").as_i64() {
        Some(FORMAT) => Ok(()),
        other => Err(format!(
            "{}: vector format {:?}, these checks read format {}: export the vectors with the harness these checks \
             were written for, or update src/check.rs",
            file, other, FORMAT
        )),
    }
}

// ------------------------------------------------------------------------------------------ one vector

/// Pack the vector's request, compare with its packed request (tensors, layout, Triton's index tensors);
/// unpack its output by the layout, compare with its per-block parts.
pub fn vector_file(dir: &Path, file: &str) -> Result<(), String> {
    let v = read_json(dir, file)?;
    format_of(&v, file)?;
    let g = geometry(v.get("geometry")).map_err(|e| format!("{}: geometry: {}", file, e))?;
    let (op, blocks, pad_to) = request(v.get("request"), g).map_err(|e| format!("{}: request: {}", file, e))?;
    let packed = packing::pack(op, &blocks, pad_to, g)
        .map_err(|e| format!("{}: the packer refused the request: {}; {}", file, e, FIX))?;
    same_packed(&packed, v.get("packed")).map_err(|e| format!("{}: packed {}; {}", file, e, FIX))?;
    same_unpacked(&packed, v.get("unpack"), v.get("unpacked")).map_err(|e| format!("{}: unpack: {}; {}", file, e, FIX))
}

fn geometry(j: &Json) -> Result<Geometry, String> {
    Ok(Geometry {
        windows_per_block: count(j.get("windows_per_block"), "windows_per_block")?,
        weights_frames: count(j.get("weights_frames"), "weights_frames")?,
    })
}

fn request(j: &Json, g: Geometry) -> Result<(i32, Vec<Block>, Option<usize>), String> {
    let pad_to = if j.get("pad_to").is_null() {
        None
    } else {
        Some(count(j.get("pad_to"), "pad_to")?)
    };
    let items = j.get("blocks").as_array().ok_or("'blocks' is not a list")?;
    let mut op = None;
    let mut blocks = Vec::new();
    for (i, b) in items.iter().enumerate() {
        let at = format!("blocks[{}]", i);
        let this = int(b.get("OP"), &format!("{}.OP", at))? as i32;
        if *op.get_or_insert(this) != this {
            return Err(format!("{}.OP is {}, the request's is {:?}", at, this, op));
        }
        let weights = match b.get("WEIGHTS") {
            Json::Null => None,
            rows => Some(weight_rows(rows, g.weights_frames, &format!("{}.WEIGHTS", at))?),
        };
        blocks.push(Block {
            id: text(b.get("block_id"), &format!("{}.block_id", at))?,
            span: floats(b.get("SPAN"), &format!("{}.SPAN", at))?,
            offsets: ints(b.get("OFFSETS"), &format!("{}.OFFSETS", at))?,
            valid: narrow(ints(b.get("VALID"), &format!("{}.VALID", at))?, "VALID")?,
            weights,
            idx: optional(b.get("IDX"), |j| narrow(ints(j, &format!("{}.IDX", at))?, "IDX"))?,
            speakers: optional(b.get("speakers"), |j| {
                narrow(ints(j, &format!("{}.speakers", at))?, "speakers")
            })?,
        });
    }
    Ok((op.ok_or("a request of no block")?, blocks, pad_to))
}

fn same_packed(p: &Packed, want: &Json) -> Result<(), String> {
    same("OP", &[p.op as i64], &[int(want.get("OP"), "OP")?])?;
    same(
        "k (blocks, padding included)",
        &[p.segments.len() as i64],
        &[int(want.get("k"), "k")?],
    )?;
    same_floats("SPAN", &p.span, &floats(want.get("SPAN"), "SPAN")?)?;
    same("OFFSETS", &p.offsets, &ints(want.get("OFFSETS"), "OFFSETS")?)?;
    same("VALID", &widen(&p.valid), &ints(want.get("VALID"), "VALID")?)?;
    let weights = optional(want.get("WEIGHTS"), |j| weight_rows(j, 0, "WEIGHTS"))?;
    same_present("WEIGHTS", &p.weights, &weights, |a, b| same_floats("WEIGHTS", a, b))?;
    for (name, got) in [("IDX", &p.idx), ("speakers", &p.speakers)] {
        let expected = optional(want.get(name), |j| ints(j, name))?;
        same_present(name, &got.as_ref().map(|v| widen(v)), &expected, |a, b| {
            same(name, a, b)
        })?;
    }
    let segments = want.get("segments").as_array().ok_or("'segments' is not a list")?;
    same(
        "layout: segment count",
        &[p.segments.len() as i64],
        &[segments.len() as i64],
    )?;
    for (i, (s, w)) in p.segments.iter().zip(segments).enumerate() {
        let expected = segment(w).map_err(|e| format!("segments[{}]: {}", i, e))?;
        if *s != expected {
            return Err(format!("layout: segment {} is {:?}, expected {:?}", i, s, expected));
        }
    }
    let ragged = want.get("ragged_index");
    for (name, got) in packing::ragged_index(p) {
        same(&format!("index tensor {}", name), &got, &ints(ragged.get(name), name)?)?;
    }
    Ok(())
}

fn segment(w: &Json) -> Result<Segment, String> {
    let n = |key: &str| int(w.get(key), key);
    Ok(Segment {
        block_id: text(w.get("block_id"), "block_id")?,
        padding: w.get("padding").as_bool().ok_or("'padding' is not true or false")?,
        span_start: n("span_start")?,
        span_length: n("span_length")?,
        window_start: n("window_start")?,
        windows: n("windows")?,
        row_start: n("row_start")?,
        rows: n("rows")?,
    })
}

fn same_unpacked(p: &Packed, unpack: &Json, unpacked: &Json) -> Result<(), String> {
    let data = floats(unpack.get("data"), "data")?;
    let shape = counts(unpack.get("shape"), "shape")?;
    let parts = packing::unpack(p, &data, &shape).map_err(|e| format!("the packer refused the output: {}", e))?;
    let want = unpacked.as_array().ok_or("'unpacked' is not a list")?;
    same("parts (real blocks)", &[parts.len() as i64], &[want.len() as i64])?;
    for (part, w) in parts.iter().zip(want) {
        let id = text(w.get("block_id"), "block_id")?;
        if part.block_id != id {
            return Err(format!(
                "part of block {:?} where block {:?} was expected",
                part.block_id, id
            ));
        }
        let at = format!("block {:?}", id);
        same(
            &format!("{} shape", at),
            &widen_usize(&part.shape),
            &ints(w.get("shape"), "shape")?,
        )?;
        same_floats(&format!("{} data", at), &part.data, &floats(w.get("data"), "data")?)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------ sessions

/// Feed the named session's messages (their metadata) to a fresh [`Session`]; each answer's verb must be the
/// step's, and a request it serves is packed (or unpacked) as its vector says, with the geometry and
/// `pad_to` of the message's own metadata, as the engine's loop reads them.
pub fn session(dir: &Path, file: &str, name: &str) -> Result<(), String> {
    let doc = read_json(dir, file)?;
    format_of(&doc, file)?;
    let cases = doc
        .get("sessions")
        .as_array()
        .ok_or_else(|| format!("{}: 'sessions' is not a list", file))?;
    let case = cases
        .iter()
        .find(|c| c.get("name").as_str() == Some(name))
        .ok_or_else(|| {
            format!(
                "{}: no session {:?} (the folder changed since the build?); {}",
                file, name, REEXPORT
            )
        })?;
    let mut loop_ = Session::new();
    let steps = case
        .get("steps")
        .as_array()
        .ok_or_else(|| format!("session {}: 'steps' is not a list", name))?;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("session {} step {}", name, i);
        let meta = metadata(step.get("metadata")).map_err(|e| format!("{}: metadata: {}", at, e))?;
        let got = loop_.answer(&meta);
        let want = text(step.get("answer"), "answer")?;
        if got.verb() != want {
            return Err(format!(
                "{} ({:?}): answered {}, expected {}; fix the message loop (src/session.rs)",
                at,
                meta.get("verb").map(String::as_str).unwrap_or("no verb"),
                got.verb(),
                want
            ));
        }
        if matches!(got, Answer::Packed | Answer::Unpacked) {
            served(dir, step, &meta, got).map_err(|e| format!("{}: {}", at, e))?;
        }
    }
    Ok(())
}

fn served(dir: &Path, step: &Json, meta: &BTreeMap<String, String>, answer: Answer) -> Result<(), String> {
    let file = format!("{}.json", text(step.get("vector"), "vector")?);
    let v = read_json(dir, &file)?;
    let number = |key: &str| -> Result<usize, String> {
        meta.get(key)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("metadata {:?} is not a whole number", key))
    };
    let g = Geometry {
        windows_per_block: number("windows_per_block")?,
        weights_frames: number("weights_frames")?,
    };
    if answer == Answer::Unpacked {
        // an unpack carries the layout the harness was answered with: the vector's packed request
        let layout = packed_of(v.get("packed"), g).map_err(|e| format!("{}: packed: {}", file, e))?;
        return same_unpacked(&layout, v.get("unpack"), v.get("unpacked"))
            .map_err(|e| format!("{}: unpack: {}; {}", file, e, FIX));
    }
    let pad_to = match meta.get("pad_to").map(String::as_str) {
        None | Some("") => None,
        Some(_) => Some(number("pad_to")?),
    };
    let (op, blocks, _) = request(v.get("request"), g).map_err(|e| format!("{}: request: {}", file, e))?;
    let packed =
        packing::pack(op, &blocks, pad_to, g).map_err(|e| format!("{}: the packer refused: {}; {}", file, e, FIX))?;
    same_packed(&packed, v.get("packed")).map_err(|e| format!("{}: packed {}; {}", file, e, FIX))
}

fn packed_of(j: &Json, g: Geometry) -> Result<Packed, String> {
    let segments = j.get("segments").as_array().ok_or("'segments' is not a list")?;
    Ok(Packed {
        op: int(j.get("OP"), "OP")? as i32,
        span: floats(j.get("SPAN"), "SPAN")?,
        offsets: ints(j.get("OFFSETS"), "OFFSETS")?,
        valid: narrow(ints(j.get("VALID"), "VALID")?, "VALID")?,
        weights: optional(j.get("WEIGHTS"), |w| weight_rows(w, g.weights_frames, "WEIGHTS"))?,
        idx: optional(j.get("IDX"), |w| narrow(ints(w, "IDX")?, "IDX"))?,
        speakers: optional(j.get("speakers"), |w| narrow(ints(w, "speakers")?, "speakers"))?,
        segments: segments.iter().map(segment).collect::<Result<_, _>>()?,
    })
}

fn metadata(j: &Json) -> Result<BTreeMap<String, String>, String> {
    match j {
        Json::Obj(m) => m.iter().map(|(k, v)| Ok((k.clone(), text(v, k)?))).collect(),
        _ => Err("not an object".into()),
    }
}

// ------------------------------------------------------------------------------------------ comparing

fn same<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{}: {} values, expected {}", what, got.len(), want.len()));
    }
    let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    match differ.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{}: {} of {} values differ, first at [{}]: {:?} instead of {:?}",
            what,
            differ.len(),
            got.len(),
            i,
            got[i],
            want[i]
        )),
    }
}

/// float32 compared by their bits: -0.0 is not 0.0, and a NaN never passes.
fn same_floats(what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{}: {} values, expected {}", what, got.len(), want.len()));
    }
    let differ: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].is_nan() || got[i].to_bits() != want[i].to_bits())
        .collect();
    match differ.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{}: {} of {} values differ, first at [{}]: {:?} instead of {:?}",
            what,
            differ.len(),
            got.len(),
            i,
            got[i],
            want[i]
        )),
    }
}

fn same_present<T>(
    what: &str,
    got: &Option<Vec<T>>,
    want: &Option<Vec<T>>,
    compare: impl Fn(&[T], &[T]) -> Result<(), String>,
) -> Result<(), String> {
    match (got, want) {
        (None, None) => Ok(()),
        (Some(a), Some(b)) => compare(a, b),
        (a, _) => Err(format!(
            "{}: {} where the vector has {}",
            what,
            present(a),
            present(want)
        )),
    }
}

fn present<T>(v: &Option<Vec<T>>) -> &'static str {
    if v.is_some() {
        "a list"
    } else {
        "null"
    }
}

// ------------------------------------------------------------------------------------------ reading values

fn text(j: &Json, what: &str) -> Result<String, String> {
    j.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} is not a string", what))
}

fn int(j: &Json, what: &str) -> Result<i64, String> {
    j.as_i64().ok_or_else(|| format!("{} is not a whole number", what))
}

fn count(j: &Json, what: &str) -> Result<usize, String> {
    usize::try_from(int(j, what)?).map_err(|_| format!("{} is negative", what))
}

fn ints(j: &Json, what: &str) -> Result<Vec<i64>, String> {
    let items = j.as_array().ok_or_else(|| format!("{} is not a list", what))?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| int(x, &format!("{}[{}]", what, i)))
        .collect()
}

fn counts(j: &Json, what: &str) -> Result<Vec<usize>, String> {
    ints(j, what)?
        .into_iter()
        .map(|x| usize::try_from(x).map_err(|_| format!("{} holds a negative value", what)))
        .collect()
}

fn floats(j: &Json, what: &str) -> Result<Vec<f32>, String> {
    let items = j.as_array().ok_or_else(|| format!("{} is not a list", what))?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .map(|v| v as f32)
                .ok_or_else(|| format!("{}[{}] is not a number", what, i))
        })
        .collect()
}

/// WEIGHTS: a list of rows, each `width` wide (0: any width), flattened.
fn weight_rows(j: &Json, width: usize, what: &str) -> Result<Vec<f32>, String> {
    let rows = j.as_array().ok_or_else(|| format!("{} is not a list of rows", what))?;
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let values = floats(row, &format!("{}[{}]", what, i))?;
        if width != 0 && values.len() != width {
            return Err(format!(
                "{}[{}] holds {} values, expected {}",
                what,
                i,
                values.len(),
                width
            ));
        }
        out.extend(values);
    }
    Ok(out)
}

fn optional<T>(j: &Json, read: impl Fn(&Json) -> Result<T, String>) -> Result<Option<T>, String> {
    if j.is_null() {
        Ok(None)
    } else {
        read(j).map(Some)
    }
}

/// int32 values (VALID, IDX, speakers), refused where one does not fit.
fn narrow(v: Vec<i64>, what: &str) -> Result<Vec<i32>, String> {
    v.into_iter()
        .map(|x| i32::try_from(x).map_err(|_| format!("{} value {} does not fit int32", what, x)))
        .collect()
}

fn widen(v: &[i32]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn widen_usize(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}
