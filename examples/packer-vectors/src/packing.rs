//! The packing of docs/models.md ("Packing"), as the engine does it: this module stands in for the engine's
//! packer. Spans are concatenated; each block's OFFSETS move by the samples of the spans before it and its
//! IDX by the windows before it; VALID, WEIGHTS and speakers are concatenated (speakers only where every
//! block has them); `pad_to` appends empty blocks (no samples, VALID 0, no rows, offsets where their empty
//! span starts) that `unpack` drops. A request off the contract is refused, never packed.

/// What packing needs of the geometry (the message's metadata, or a vector's `geometry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub windows_per_block: usize,
    pub weights_frames: usize,
}

/// One block of a request: the wire's types (f32 audio, i64 offsets, i32 VALID and IDX); WEIGHTS rows flat, F wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub id: String,
    pub span: Vec<f32>,
    pub offsets: Vec<i64>,
    pub valid: Vec<i32>,
    pub weights: Option<Vec<f32>>,
    pub idx: Option<Vec<i32>>,
    pub speakers: Option<Vec<i32>>,
}

/// A block's place in the packed request (docs/packer-protocol.md, `segments`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub block_id: String,
    pub padding: bool,
    pub span_start: i64,
    pub span_length: i64,
    pub window_start: i64,
    pub windows: i64,
    pub row_start: i64,
    pub rows: i64,
}

/// The packed request and its layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub op: i32,
    pub span: Vec<f32>,
    pub offsets: Vec<i64>,
    pub valid: Vec<i32>,
    pub weights: Option<Vec<f32>>,
    pub idx: Option<Vec<i32>>,
    pub speakers: Option<Vec<i32>>,
    pub segments: Vec<Segment>,
}

/// Pack `blocks` of one OP, padded to `pad_to` blocks; refused (Err, why) where the request is off the contract.
pub fn pack(op: i32, blocks: &[Block], pad_to: Option<usize>, g: Geometry) -> Result<Packed, String> {
    if !(0..=2).contains(&op) {
        return Err(format!("OP {} is not 0, 1 or 2", op));
    }
    if blocks.is_empty() {
        return Err("a pack of 0 blocks".into());
    }
    if let Some(k) = pad_to {
        if k < blocks.len() {
            return Err(format!("pad_to {} is smaller than the {} blocks", k, blocks.len()));
        }
    }
    for (i, b) in blocks.iter().enumerate() {
        check_block(op, b, g).map_err(|why| format!("block {:?}: {}", b.id, why))?;
        if blocks[..i].iter().any(|a| a.id == b.id) {
            return Err(format!("block id {:?} given twice", b.id));
        }
    }
    let voiceprint = op != 0;
    let mut p = Packed {
        op,
        span: Vec::new(),
        offsets: Vec::new(),
        valid: Vec::new(),
        weights: voiceprint.then(Vec::new),
        idx: voiceprint.then(Vec::new),
        speakers: None,
        segments: Vec::new(),
    };
    let mut speakers = Vec::new();
    let (mut span_at, mut window_at, mut row_at) = (0i64, 0i64, 0i64);
    for b in blocks {
        let rows = b.idx.as_ref().map_or(0, Vec::len) as i64;
        p.segments.push(Segment {
            block_id: b.id.clone(),
            padding: false,
            span_start: span_at,
            span_length: b.span.len() as i64,
            window_start: window_at,
            windows: b.offsets.len() as i64,
            row_start: row_at,
            rows,
        });
        p.span.extend_from_slice(&b.span);
        p.offsets.extend(b.offsets.iter().map(|o| o + span_at));
        p.valid.extend_from_slice(&b.valid);
        if voiceprint {
            p.weights
                .get_or_insert_with(Vec::new)
                .extend_from_slice(b.weights.as_deref().unwrap_or(&[]));
            let shift = window_at as i32;
            p.idx
                .get_or_insert_with(Vec::new)
                .extend(b.idx.iter().flatten().map(|i| i + shift));
            speakers.extend(b.speakers.iter().flatten());
        }
        span_at += b.span.len() as i64;
        window_at += b.offsets.len() as i64;
        row_at += rows;
    }
    let real = blocks.len();
    for j in real..pad_to.unwrap_or(real) {
        let n = g.windows_per_block;
        p.segments.push(Segment {
            block_id: format!("<pad>{}", j),
            padding: true,
            span_start: span_at,
            span_length: 0,
            window_start: window_at,
            windows: n as i64,
            row_start: row_at,
            rows: 0,
        });
        p.offsets.resize(p.offsets.len() + n, span_at);
        p.valid.resize(p.valid.len() + n, 0);
        window_at += n as i64;
    }
    if voiceprint && blocks.iter().all(|b| b.speakers.is_some()) {
        p.speakers = Some(speakers);
    }
    Ok(p)
}

fn check_block(op: i32, b: &Block, g: Geometry) -> Result<(), String> {
    let n = g.windows_per_block;
    if b.offsets.len() != n || b.valid.len() != n {
        return Err(format!(
            "{} OFFSETS and {} VALID, expected {} windows",
            b.offsets.len(),
            b.valid.len(),
            n
        ));
    }
    let len = b.span.len() as i64;
    for w in 0..n {
        let (o, v) = (b.offsets[w], b.valid[w] as i64);
        if o < 0 || v < 0 || o + v > len || (w > 0 && o < b.offsets[w - 1]) {
            return Err(format!(
                "window {}: OFFSETS {} + VALID {} outside its span of {} samples",
                w, o, v, len
            ));
        }
    }
    if b.span.iter().any(|x| !x.is_finite()) {
        return Err("SPAN holds a non-finite sample".into());
    }
    match (op, &b.weights, &b.idx) {
        (0, None, None) => Ok(()),
        (0, _, _) => Err("OP 0 carries no WEIGHTS or IDX".into()),
        (_, Some(weights), Some(idx)) => {
            if weights.len() != idx.len() * g.weights_frames {
                return Err(format!(
                    "{} WEIGHTS values for {} rows of {}",
                    weights.len(),
                    idx.len(),
                    g.weights_frames
                ));
            }
            if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= n) {
                return Err(format!("IDX {} is not one of its {} windows", bad, n));
            }
            if b.speakers.as_ref().is_some_and(|s| s.len() != idx.len()) {
                return Err("speakers and IDX differ in length".into());
            }
            Ok(())
        }
        _ => Err(format!("OP {} needs WEIGHTS and IDX", op)),
    }
}

/// Triton's ragged-batching index tensors over SPAN, one item per segment (padding an item of 0 samples),
/// flattened: the names and values of docs/packer-protocol.md, "The index-tensor convention".
pub fn ragged_index(p: &Packed) -> Vec<(&'static str, Vec<i64>)> {
    let counts: Vec<i64> = p.segments.iter().map(|s| s.span_length).collect();
    let ends: Vec<i64> = counts
        .iter()
        .scan(0, |sum, c| {
            *sum += c;
            Some(*sum)
        })
        .collect();
    let mut with_zero = vec![0];
    with_zero.extend_from_slice(&ends);
    let longest = counts.iter().copied().max().unwrap_or(0).max(0) as usize;
    vec![
        ("BATCH_ELEMENT_COUNT", counts.clone()),
        ("BATCH_ACCUMULATED_ELEMENT_COUNT", ends),
        ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", with_zero),
        ("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", vec![0; longest]),
        ("BATCH_ITEM_SHAPE", counts.clone()),
        ("BATCH_ITEM_SHAPE_FLATTEN", counts),
    ]
}

/// One real block's part of the network's output: its id, shape and values (flat, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub block_id: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Cut the output of a packed request (`data` of `shape`: `[windows, ...]` for OP 0, `[rows, ...]` for OP 1/2)
/// into the real blocks' parts, by the layout; padding is dropped. An output that answers another request
/// (its leading dimension is not the request's) is refused, never sliced.
pub fn unpack(p: &Packed, data: &[f32], shape: &[usize]) -> Result<Vec<Part>, String> {
    let lead = if p.op == 0 {
        p.valid.len()
    } else {
        p.idx.as_ref().map_or(0, Vec::len)
    };
    let width: usize = shape.iter().skip(1).product();
    if shape.first() != Some(&lead) || data.len() != lead * width {
        return Err(format!(
            "output of shape {:?} ({} values) for a request of {} {}",
            shape,
            data.len(),
            lead,
            if p.op == 0 { "windows" } else { "rows" }
        ));
    }
    Ok(p.segments
        .iter()
        .filter(|s| !s.padding)
        .map(|s| {
            let (start, count) = if p.op == 0 {
                (s.window_start, s.windows)
            } else {
                (s.row_start, s.rows)
            };
            let (start, count) = (start as usize, count as usize);
            let mut part_shape = vec![count];
            part_shape.extend_from_slice(&shape[1..]);
            Part {
                block_id: s.block_id.clone(),
                shape: part_shape,
                data: data[start * width..(start + count) * width].to_vec(),
            }
        })
        .collect())
}
