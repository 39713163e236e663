//! A std-only check of a packer against the harness's packing test vectors (no crates, no Arrow).
//!
//!     harness laws --export-vectors vectors/
//!     rustc --edition 2021 examples/packer_vectors_check.rs -o /tmp/packer_vectors_check
//!     /tmp/packer_vectors_check vectors/          # exit 0: every vector packed and unpacked as expected
//!
//! What an engine's own `cargo test` does with the vectors (docs/packer-protocol.md, "Test vectors"):
//! read each vector's request, pack it by DESIGN.md's rules (here: `pack` below, standing in for
//! the engine's packer), compare with the expected packed request and layout, unpack the given
//! output by the layout and compare with the expected per-block outputs. Then sessions.json: feed
//! every session's messages (their metadata) to the packer's message loop (`Session` below) and
//! compare the verb of each answer; a served pack reads the geometry from its own metadata. The
//! JSON reader is a minimal one, enough for these files.

use std::collections::BTreeMap;
use std::{env, fs, process};

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        let c = *self.s.get(self.i).ok_or("unexpected end")?;
        match c {
            b'n' => self.word("null", Json::Null),
            b't' => self.word("true", Json::Bool(true)),
            b'f' => self.word("false", Json::Bool(false)),
            b'"' => Ok(Json::Str(self.string()?)),
            b'[' => {
                self.i += 1;
                let mut out = Vec::new();
                self.ws();
                if self.s[self.i] == b']' {
                    self.i += 1;
                    return Ok(Json::Arr(out));
                }
                loop {
                    out.push(self.value()?);
                    self.ws();
                    match self.s[self.i] {
                        b',' => self.i += 1,
                        b']' => { self.i += 1; return Ok(Json::Arr(out)); }
                        other => return Err(format!("expected , or ] at {}, got {:?}", self.i, other as char)),
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut out = BTreeMap::new();
                self.ws();
                if self.s[self.i] == b'}' {
                    self.i += 1;
                    return Ok(Json::Obj(out));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    if self.s[self.i] != b':' {
                        return Err(format!("expected : at {}", self.i));
                    }
                    self.i += 1;
                    out.insert(key, self.value()?);
                    self.ws();
                    match self.s[self.i] {
                        b',' => self.i += 1,
                        b'}' => { self.i += 1; return Ok(Json::Obj(out)); }
                        other => return Err(format!("expected , or }} at {}, got {:?}", self.i, other as char)),
                    }
                }
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                text.parse::<f64>().map(Json::Num).map_err(|e| format!("number {:?} at {}: {}", text, start, e))
            }
        }
    }
    fn word(&mut self, w: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(format!("bad literal at {}", self.i))
        }
    }
    fn string(&mut self) -> Result<String, String> {
        if self.s[self.i] != b'"' {
            return Err(format!("expected a string at {}", self.i));
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let c = *self.s.get(self.i).ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = self.s[self.i];
                    self.i += 1;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hex = std::str::from_utf8(&self.s[self.i..self.i + 4]).map_err(|e| e.to_string())?;
                            let code = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            out.push(char::from_u32(code).unwrap_or('?'));
                            self.i += 4;
                        }
                        other => out.push(other as char),
                    }
                }
                _ => {
                    // UTF-8 continuation bytes are copied as they are
                    let start = self.i - 1;
                    let mut end = self.i;
                    while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                        end += 1;
                    }
                    out.push_str(std::str::from_utf8(&self.s[start..end]).map_err(|e| e.to_string())?);
                    self.i = end;
                }
            }
        }
    }
}

fn get<'j>(j: &'j Json, key: &str) -> &'j Json {
    match j {
        Json::Obj(m) => m.get(key).unwrap_or(&Json::Null),
        _ => &Json::Null,
    }
}
fn arr(j: &Json) -> Vec<Json> {
    match j { Json::Arr(v) => v.clone(), _ => Vec::new() }
}
fn num(j: &Json) -> f64 {
    match j { Json::Num(x) => *x, Json::Bool(b) => *b as i64 as f64, _ => f64::NAN }
}
fn nums(j: &Json) -> Vec<f64> {
    arr(j).iter().map(num).collect()
}
fn text(j: &Json) -> String {
    match j { Json::Str(s) => s.clone(), _ => String::new() }
}

/// One block of a request (f32/i64/i32 as the wire has them; WEIGHTS rows flattened, F wide).
struct Block { id: String, span: Vec<f32>, offsets: Vec<i64>, valid: Vec<i32>, weights: Option<Vec<f32>>,
               idx: Option<Vec<i32>>, speakers: Option<Vec<i32>>, padding: bool }

struct Segment { id: String, padding: bool, span_start: i64, span_length: i64, window_start: i64, windows: i64,
                 row_start: i64, rows: i64 }

struct Packed { span: Vec<f32>, offsets: Vec<i64>, valid: Vec<i32>, weights: Option<Vec<f32>>, idx: Option<Vec<i32>>,
                speakers: Option<Vec<i32>>, segments: Vec<Segment> }

/// DESIGN.md's packing: spans concatenated; OFFSETS shifted by the spans before, IDX by the windows
/// before; VALID, WEIGHTS, speakers concatenated (speakers only if every block has them); padding
/// blocks appended up to pad_to (no audio, VALID 0, no rows, offsets where their empty span starts).
fn pack(mut blocks: Vec<Block>, pad_to: Option<usize>, windows_per_block: usize, op: i64) -> Packed {
    let real = blocks.len();
    if let Some(k) = pad_to {
        for j in 0..k.saturating_sub(real) {
            blocks.push(Block { id: format!("<pad>{}", real + j), span: vec![], offsets: vec![0; windows_per_block],
                                valid: vec![0; windows_per_block], weights: (op != 0).then(Vec::new),
                                idx: (op != 0).then(Vec::new), speakers: (op != 0).then(Vec::new), padding: true });
        }
    }
    let mut p = Packed { span: vec![], offsets: vec![], valid: vec![], weights: (op != 0).then(Vec::new),
                         idx: (op != 0).then(Vec::new), speakers: None, segments: vec![] };
    let all_speakers = op != 0 && blocks.iter().all(|b| b.speakers.is_some());
    let mut speakers = Vec::new();
    let (mut span_at, mut window_at, mut row_at) = (0i64, 0i64, 0i64);
    for b in &blocks {
        let rows = b.idx.as_ref().map_or(0, |v| v.len()) as i64;
        p.segments.push(Segment { id: b.id.clone(), padding: b.padding, span_start: span_at,
                                  span_length: b.span.len() as i64, window_start: window_at,
                                  windows: b.offsets.len() as i64, row_start: row_at, rows });
        p.span.extend(&b.span);
        p.offsets.extend(b.offsets.iter().map(|o| o + span_at));
        p.valid.extend(&b.valid);
        if op != 0 {
            p.weights.as_mut().unwrap().extend(b.weights.as_ref().unwrap());
            p.idx.as_mut().unwrap().extend(b.idx.as_ref().unwrap().iter().map(|i| i + window_at as i32));
            if let Some(s) = &b.speakers { speakers.extend(s); }
        }
        span_at += b.span.len() as i64;
        window_at += b.offsets.len() as i64;
        row_at += rows;
    }
    if all_speakers { p.speakers = Some(speakers); }
    p
}

fn same_f32(got: &[f32], want: &Json) -> bool {
    let w = nums(want);
    got.len() == w.len() && got.iter().zip(&w).all(|(g, x)| g.to_bits() == (*x as f32).to_bits())
}
fn same_int<T: Copy + Into<i64>>(got: &[T], want: &Json) -> bool {
    let w = nums(want);
    got.len() == w.len() && got.iter().zip(&w).all(|(g, x)| (*g).into() as f64 == *x)
}
fn same_opt<T>(got: &Option<Vec<T>>, want: &Json, same: impl Fn(&[T], &Json) -> bool) -> bool {
    match got { None => *want == Json::Null, Some(v) => same(v, &Json::Arr(flatten(want))) }
}
fn flatten(j: &Json) -> Vec<Json> {
    arr(j).into_iter().flat_map(|x| match x { Json::Arr(v) => v, other => vec![other] }).collect()
}

fn check(v: &Json, windows_per_block: usize) -> Result<(), String> {
    let request = get(v, "request");
    let pad_to = match get(request, "pad_to") { Json::Num(k) => Some(*k as usize), _ => None };
    let blocks: Vec<Block> = arr(get(request, "blocks")).iter().map(|b| Block {
        id: text(get(b, "block_id")),
        span: nums(get(b, "SPAN")).iter().map(|x| *x as f32).collect(),
        offsets: nums(get(b, "OFFSETS")).iter().map(|x| *x as i64).collect(),
        valid: nums(get(b, "VALID")).iter().map(|x| *x as i32).collect(),
        weights: match get(b, "WEIGHTS") { Json::Null => None, w => Some(flatten(w).iter().map(|x| num(x) as f32).collect()) },
        idx: match get(b, "IDX") { Json::Null => None, w => Some(nums(w).iter().map(|x| *x as i32).collect()) },
        speakers: match get(b, "speakers") { Json::Null => None, w => Some(nums(w).iter().map(|x| *x as i32).collect()) },
        padding: false,
    }).collect();
    let want = get(v, "packed");
    let op = num(get(want, "OP")) as i64;
    let p = pack(blocks, pad_to, windows_per_block, op);
    let checks = [
        ("SPAN", same_f32(&p.span, get(want, "SPAN"))),
        ("OFFSETS", same_int(&p.offsets, get(want, "OFFSETS"))),
        ("VALID", same_int(&p.valid, get(want, "VALID"))),
        ("WEIGHTS", same_opt(&p.weights, get(want, "WEIGHTS"), same_f32)),
        ("IDX", same_opt(&p.idx, get(want, "IDX"), same_int)),
        ("speakers", same_opt(&p.speakers, get(want, "speakers"), same_int)),
        ("k", p.segments.len() as f64 == num(get(want, "k"))),
    ];
    for (name, ok) in checks {
        if !ok { return Err(format!("packed {} differs", name)); }
    }
    let segments = arr(get(want, "segments"));
    if segments.len() != p.segments.len() { return Err("segment count differs".into()); }
    for (s, w) in p.segments.iter().zip(&segments) {
        let fields = [s.span_start, s.span_length, s.window_start, s.windows, s.row_start, s.rows];
        let names = ["span_start", "span_length", "window_start", "windows", "row_start", "rows"];
        if s.id != text(get(w, "block_id")) || Json::Bool(s.padding) != *get(w, "padding")
            || fields.iter().zip(names).any(|(f, n)| *f as f64 != num(get(w, n))) {
            return Err(format!("segment {} differs", s.id));
        }
    }
    // Triton's ragged index over the blocks' spans
    let counts: Vec<i64> = p.segments.iter().map(|s| s.span_length).collect();
    let acc: Vec<i64> = counts.iter().scan(0, |a, c| { *a += c; Some(*a) }).collect();
    let ragged = get(want, "ragged_index");
    let mut with_zero = vec![0i64];
    with_zero.extend(&acc);
    let max = counts.iter().copied().max().unwrap_or(0) as usize;
    for (name, got) in [("BATCH_ELEMENT_COUNT", &counts), ("BATCH_ACCUMULATED_ELEMENT_COUNT", &acc),
                        ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", &with_zero), ("BATCH_ITEM_SHAPE", &counts),
                        ("BATCH_ITEM_SHAPE_FLATTEN", &counts), ("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", &vec![0; max])] {
        if !same_int(got, get(ragged, name)) { return Err(format!("ragged index {} differs", name)); }
    }
    // unpack: slice the given output by the layout, drop padding
    let u = get(v, "unpack");
    let data: Vec<f32> = nums(get(u, "data")).iter().map(|x| *x as f32).collect();
    let shape = nums(get(u, "shape"));
    let width: usize = shape[1..].iter().map(|d| *d as usize).product();
    let expected = arr(get(v, "unpacked"));
    let real: Vec<&Segment> = p.segments.iter().filter(|s| !s.padding).collect();
    if real.len() != expected.len() { return Err("unpacked block count differs".into()); }
    for (s, e) in real.iter().zip(&expected) {
        let (start, count) = if op == 0 { (s.window_start, s.windows) } else { (s.row_start, s.rows) };
        let part = &data[start as usize * width..(start + count) as usize * width];
        if s.id != text(get(e, "block_id")) || !same_f32(part, get(e, "data")) {
            return Err(format!("unpacked block {} differs", s.id));
        }
    }
    Ok(())
}

/// The packer's message loop (docs/packer-protocol.md, "Sessions"): the verb each message is answered with.
/// hello first and once; a request before it, a second hello, another version or another verb: error,
/// and the loop reads on; metadata keys it does not know are ignored.
struct Session {
    greeted: bool,
}

impl Session {
    fn answer(&mut self, meta: &Json) -> &'static str {
        let field = |key: &str| match get(meta, key) { Json::Str(s) => Some(s.clone()), _ => None };
        if field("version").as_deref() != Some("2") {
            return "error";
        }
        match (field("verb").as_deref(), self.greeted) {
            (Some("hello"), false) => { self.greeted = true; "hello" }
            (Some("pack"), true) => "packed",
            (Some("unpack"), true) => "unpacked",
            _ => "error",
        }
    }
}

/// Every session of sessions.json through a fresh `Session`; a served pack or unpack is the named vector's,
/// packed with the windows_per_block its own metadata gives.
fn check_session(case: &Json, read: &dyn Fn(&str) -> Json) -> Result<(), String> {
    let mut session = Session { greeted: false };
    for (i, step) in arr(get(case, "steps")).iter().enumerate() {
        let meta = get(step, "metadata");
        let got = session.answer(meta);
        let want = text(get(step, "answer"));
        if got != want {
            return Err(format!("step {} ({:?}): answered {}, expected {}", i, text(get(meta, "verb")), got, want));
        }
        if got == "packed" || got == "unpacked" {
            let windows_per_block = text(get(meta, "windows_per_block")).parse::<usize>()
                .map_err(|e| format!("step {}: metadata windows_per_block: {}", i, e))?;
            check(&read(&format!("{}.json", text(get(step, "vector")))), windows_per_block)
                .map_err(|e| format!("step {}: {}", i, e))?;
        }
    }
    Ok(())
}

fn main() {
    let dir = env::args().nth(1).unwrap_or_else(|| { eprintln!("usage: packer_vectors_check DIR"); process::exit(2) });
    let read = |name: &str| -> Json {
        let text = fs::read(format!("{}/{}", dir, name)).unwrap_or_else(|e| { eprintln!("{}: {}", name, e); process::exit(2) });
        Parser { s: &text, i: 0 }.value().unwrap_or_else(|e| { eprintln!("{}: {}", name, e); process::exit(2) })
    };
    let index = read("index.json");
    let mut failed = 0;
    let entries = arr(get(&index, "vectors"));
    for entry in &entries {
        let name = text(get(entry, "file"));
        let v = read(&name);
        let windows_per_block = num(get(get(&v, "geometry"), "windows_per_block")) as usize;
        match check(&v, windows_per_block) {
            Ok(()) => println!("ok   {}", name),
            Err(e) => { println!("FAIL {}: {}", name, e); failed += 1; }
        }
    }
    println!("{} of {} vectors pass", entries.len() - failed, entries.len());
    let sessions = arr(get(&read(&text(get(get(&index, "sessions"), "file"))), "sessions"));
    let mut failed_sessions = 0;
    for case in &sessions {
        let name = text(get(case, "name"));
        match check_session(case, &read) {
            Ok(()) => println!("ok   session {}", name),
            Err(e) => { println!("FAIL session {}: {}", name, e); failed_sessions += 1; }
        }
    }
    println!("{} of {} sessions pass", sessions.len() - failed_sessions, sessions.len());
    process::exit(if failed == 0 && failed_sessions == 0 { 0 } else { 1 });
}
