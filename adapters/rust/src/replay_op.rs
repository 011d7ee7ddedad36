// SPDX-License-Identifier: MIT OR Apache-2.0
//! The `replay` operation (docs/protocol.md): decode the request, run the
//! crate's replay port (`ssm_rollback::replay`), write the state after each
//! round, every float as a `float.hex` string.

use crate::json::Json;
use crate::{bad, field, Reply};
use ssm_rollback::replay::{
    parse_hex, replay_batch, replay_post_conv, replay_rounds, to_hex, BatchEntry, Dims, Pipeline,
    Row, State,
};
use std::collections::{HashMap, HashSet};

/// The largest head count, head size or conv kernel a request may give.
const MAX_DIM: u64 = 4096;

/// The most slots a `replay_batch` pool may have, and the longest sequence name.
const MAX_SLOTS: u64 = 4096;
const MAX_NAME: usize = 64;

fn list<'a>(value: &'a Json, place: &str, length: usize) -> Result<&'a [Json], Reply> {
    match value {
        Json::Array(items) if items.len() == length => Ok(items),
        _ => Err(bad(format!("{place} must be a list of {length} items"))),
    }
}

fn floats(value: &Json, place: &str, length: usize) -> Result<Vec<f64>, Reply> {
    list(value, place, length)?
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.as_str().and_then(parse_hex).ok_or_else(|| {
                bad(format!(
                    "{place}[{index}] must be a finite float.hex string"
                ))
            })
        })
        .collect()
}

fn matrix(value: &Json, place: &str, rows: usize, columns: usize) -> Result<Vec<Vec<f64>>, Reply> {
    list(value, place, rows)?
        .iter()
        .enumerate()
        .map(|(index, row)| floats(row, &format!("{place}[{index}]"), columns))
        .collect()
}

fn dims(value: &Json) -> Result<Dims, Reply> {
    let number = |name: &str| -> Result<usize, Reply> {
        // A conv of one tap keeps no columns: its state would be empty.
        let least = if name == "conv_kernel" { 2 } else { 1 };
        match value.get(name).and_then(Json::as_u64) {
            Some(n) if (least..=MAX_DIM).contains(&n) => Ok(n as usize),
            _ => Err(bad(format!(
                "dims.{name} must be an integer in [{least}, {MAX_DIM}]"
            ))),
        }
    };
    let dims = Dims {
        num_key_heads: number("num_key_heads")?,
        key_head_dim: number("key_head_dim")?,
        num_value_heads: number("num_value_heads")?,
        value_head_dim: number("value_head_dim")?,
        conv_kernel: number("conv_kernel")?,
    };
    if dims.num_value_heads % dims.num_key_heads != 0 {
        return Err(bad(
            "dims.num_value_heads must be a multiple of dims.num_key_heads".into(),
        ));
    }
    Ok(dims)
}

fn state(value: &Json, place: &str, dims: Dims) -> Result<State, Reply> {
    let conv = matrix(
        field(value, "conv")?,
        &format!("{place}.conv"),
        dims.conv_dim(),
        dims.conv_kernel - 1,
    )?;
    let heads = list(
        field(value, "h")?,
        &format!("{place}.h"),
        dims.num_value_heads,
    )?;
    let mut h = Vec::new();
    for (index, head) in heads.iter().enumerate() {
        let place = format!("{place}.h[{index}]");
        for row in matrix(head, &place, dims.key_head_dim, dims.value_head_dim)? {
            h.extend(row);
        }
    }
    Ok(State { conv, h })
}

fn rows(
    value: &Json,
    place: &str,
    name: &str,
    width: usize,
    heads: usize,
) -> Result<Vec<Row>, Reply> {
    row_list(field(value, "rows")?, &format!("{place}.rows"), name, width, heads)
}

fn row_list(
    value: &Json,
    place: &str,
    name: &str,
    width: usize,
    heads: usize,
) -> Result<Vec<Row>, Reply> {
    let Json::Array(items) = value else {
        return Err(bad(format!("{place} must be a list")));
    };
    if items.is_empty() {
        return Err(bad(format!("{place} must not be empty")));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, row)| {
            let at = format!("{place}[{index}]");
            Ok(Row {
                values: floats(field(row, name)?, &format!("{at}.{name}"), width)?,
                g: floats(field(row, "g")?, &format!("{at}.g"), heads)?,
                beta: floats(field(row, "beta")?, &format!("{at}.beta"), heads)?,
            })
        })
        .collect()
}

fn accepted(value: &Json, place: &str, most: usize) -> Result<usize, Reply> {
    match field(value, "accepted")?.as_u64() {
        Some(n) if n >= 1 && n <= most as u64 => Ok(n as usize),
        _ => Err(bad(format!(
            "{place}.accepted must be an integer in [1, {most}]"
        ))),
    }
}

fn write_state(out: &mut String, state: &State, dims: Dims) {
    let row = |values: &[f64]| -> String {
        let items: Vec<String> = values
            .iter()
            .map(|&v| format!("\"{}\"", to_hex(v)))
            .collect();
        format!("[{}]", items.join(","))
    };
    let conv: Vec<String> = state.conv.iter().map(|c| row(c)).collect();
    let (dk, dv) = (dims.key_head_dim, dims.value_head_dim);
    let heads: Vec<String> = state
        .h
        .chunks(dk * dv)
        .map(|head| {
            let rows: Vec<String> = head.chunks(dv).map(row).collect();
            format!("[{}]", rows.join(","))
        })
        .collect();
    out.push_str(&format!(
        "{{\"conv\":[{}],\"h\":[{}]}}",
        conv.join(","),
        heads.join(",")
    ));
}

fn pipeline(request: &Json) -> Result<Pipeline, Reply> {
    match field(request, "pipeline")?.as_str() {
        Some("float64") => Ok(Pipeline::Float64),
        // The old name stays an alias while the protocol is version 2 (docs/protocol.md).
        Some("transformers-bf16" | "bf16-rows-fp32-state") => Ok(Pipeline::TransformersBf16),
        _ => Err(bad(
            "field 'pipeline' must be \"float64\" or \"transformers-bf16\"".into(),
        )),
    }
}

fn write_states(states: &[State], dims: Dims) -> Reply {
    let mut out = String::from("{\"states\":[");
    for (index, state) in states.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        write_state(&mut out, state, dims);
    }
    out.push_str("]}");
    Reply::Ok(out)
}

pub(crate) fn answer(request: &Json) -> Result<Reply, Reply> {
    let pipeline = pipeline(request)?;
    let post_conv = match field(request, "layout")?.as_str() {
        Some("pre-conv") => false,
        Some("post-conv") => true,
        _ => {
            return Err(bad(
                "field 'layout' must be \"pre-conv\" or \"post-conv\"".into()
            ))
        }
    };
    let dims = dims(field(request, "dims")?)?;
    let weight = matrix(
        field(request, "conv_weight")?,
        "conv_weight",
        dims.conv_dim(),
        dims.conv_kernel,
    )?;
    let checkpoint = state(field(request, "checkpoint")?, "checkpoint", dims)?;
    let Json::Array(rounds) = field(request, "rounds")? else {
        return Err(bad("field 'rounds' must be a list".into()));
    };
    if rounds.is_empty() {
        return Err(bad("field 'rounds' must not be empty".into()));
    }
    let heads = dims.num_value_heads;
    let states = if post_conv {
        // A post-conv trace: each round from the state the one before left.
        let mut states = Vec::new();
        let mut current = checkpoint;
        for (index, item) in rounds.iter().enumerate() {
            let place = format!("rounds[{index}]");
            let width = dims.key_dim() + dims.value_dim();
            let window_rows = rows(item, &place, "k_and_v", width, heads)?;
            let count = accepted(item, &place, window_rows.len())?;
            let window = matrix(
                field(item, "conv_window")?,
                &format!("{place}.conv_window"),
                dims.conv_dim(),
                window_rows.len(),
            )?;
            current = replay_post_conv(pipeline, dims, &current, &window_rows, &window, count);
            states.push(current.clone());
        }
        states
    } else {
        let mut decoded = Vec::new();
        for (index, item) in rounds.iter().enumerate() {
            let place = format!("rounds[{index}]");
            let window_rows = rows(item, &place, "qkv", dims.conv_dim(), heads)?;
            let count = accepted(item, &place, window_rows.len())?;
            decoded.push((window_rows, count));
        }
        replay_rounds(pipeline, dims, &weight, &checkpoint, &decoded)
    };
    Ok(write_states(&states, dims))
}

/// Who holds which slot as a `replay_batch` request goes on, and who finished.
struct Bookkeeping {
    slots: usize,
    holders: HashMap<usize, String>,
    running: HashMap<String, usize>,
    finished: HashSet<String>,
}

impl Bookkeeping {
    /// The entry's slot, checked: a joiner takes a free slot, a running
    /// sequence keeps the one it holds.
    fn enter(&mut self, entry: &Json, place: &str, joins: bool) -> Result<(String, usize), Reply> {
        let sequence = match field(entry, "sequence")?.as_str() {
            Some(name) if !name.is_empty() && name.chars().count() <= MAX_NAME => name.to_string(),
            _ => {
                return Err(bad(format!(
                    "{place}.sequence must be a string of 1 to {MAX_NAME} characters"
                )))
            }
        };
        let slot = match field(entry, "slot")?.as_u64() {
            Some(n) if n < self.slots as u64 => n as usize,
            _ => {
                return Err(bad(format!(
                    "{place}.slot must be an integer in [0, {}]",
                    self.slots - 1
                )))
            }
        };
        if self.finished.contains(&sequence) {
            return Err(bad(format!("{place}: sequence {sequence:?} has finished")));
        }
        if joins {
            if self.running.contains_key(&sequence) {
                return Err(bad(format!(
                    "{place}.checkpoint: sequence {sequence:?} has already joined"
                )));
            }
            if let Some(holder) = self.holders.get(&slot) {
                return Err(bad(format!(
                    "{place}.slot: slot {slot} is held by sequence {holder:?}"
                )));
            }
            self.holders.insert(slot, sequence.clone());
            self.running.insert(sequence.clone(), slot);
        } else {
            match self.running.get(&sequence) {
                None => {
                    return Err(bad(format!(
                        "{place}.checkpoint is required: sequence {sequence:?} joins here"
                    )))
                }
                Some(&held) if held != slot => {
                    return Err(bad(format!(
                        "{place}.slot must be {held}, the slot sequence {sequence:?} holds"
                    )))
                }
                Some(_) => {}
            }
        }
        Ok((sequence, slot))
    }

    fn leave(&mut self, sequence: &str) {
        if let Some(slot) = self.running.remove(sequence) {
            self.holders.remove(&slot);
        }
        self.finished.insert(sequence.to_string());
    }
}

/// The `replay_batch` operation: steps of batches on a pool of slots, each
/// entry's state after its step, step by step in the request's order.
pub(crate) fn answer_batch(request: &Json) -> Result<Reply, Reply> {
    let pipeline = pipeline(request)?;
    let dims = dims(field(request, "dims")?)?;
    let weight = matrix(
        field(request, "conv_weight")?,
        "conv_weight",
        dims.conv_dim(),
        dims.conv_kernel,
    )?;
    let slots = match field(request, "slots")?.as_u64() {
        Some(n) if (1..=MAX_SLOTS).contains(&n) => n as usize,
        _ => {
            return Err(bad(format!(
                "field 'slots' must be an integer in [1, {MAX_SLOTS}]"
            )))
        }
    };
    let Json::Array(steps) = field(request, "steps")? else {
        return Err(bad("field 'steps' must be a list".into()));
    };
    if steps.is_empty() {
        return Err(bad("field 'steps' must not be empty".into()));
    }
    let (width, heads) = (dims.conv_dim(), dims.num_value_heads);
    let mut book = Bookkeeping {
        slots,
        holders: HashMap::new(),
        running: HashMap::new(),
        finished: HashSet::new(),
    };
    let mut decoded = Vec::with_capacity(steps.len());
    for (number, step) in steps.iter().enumerate() {
        let place = format!("steps[{number}]");
        let batch = match step.get("batch") {
            Some(Json::Array(items)) if !items.is_empty() => items,
            _ => {
                return Err(bad(format!(
                    "{place} must be an object whose batch is a non-empty list"
                )))
            }
        };
        let mut seen = HashSet::new();
        let mut entries = Vec::with_capacity(batch.len());
        let mut finishing = Vec::new();
        for (index, item) in batch.iter().enumerate() {
            let at = format!("{place}.batch[{index}]");
            if !matches!(item, Json::Object(_)) {
                return Err(bad(format!("{at} must be an object")));
            }
            let joins = item.get("checkpoint").is_some();
            let (sequence, slot) = book.enter(item, &at, joins)?;
            if !seen.insert(sequence.clone()) {
                return Err(bad(format!(
                    "{at}: sequence {sequence:?} is already in this step"
                )));
            }
            let window = rows(item, &at, "qkv", width, heads)?;
            let count = accepted(item, &at, window.len())?;
            let (checkpoint, prefill) = if joins {
                let from = state(field(item, "checkpoint")?, &format!("{at}.checkpoint"), dims)?;
                let prefill = match item.get("prefill") {
                    Some(value) => row_list(value, &format!("{at}.prefill"), "qkv", width, heads)?,
                    None => Vec::new(),
                };
                (Some(from), prefill)
            } else if item.get("prefill").is_some() {
                return Err(bad(format!(
                    "{at}.prefill is only for a sequence's first entry"
                )));
            } else {
                (None, Vec::new())
            };
            match item.get("finish") {
                None | Some(Json::Bool(false)) => {}
                Some(Json::Bool(true)) => finishing.push(sequence),
                Some(_) => return Err(bad(format!("{at}.finish must be true or false"))),
            }
            entries.push(BatchEntry {
                slot,
                rows: window,
                accepted: count,
                checkpoint,
                prefill,
            });
        }
        for sequence in &finishing {
            book.leave(sequence);
        }
        decoded.push(entries);
    }
    let states = replay_batch(pipeline, dims, &weight, slots, &decoded);
    Ok(write_states(&states, dims))
}
