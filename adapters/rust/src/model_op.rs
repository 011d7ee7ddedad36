// SPDX-License-Identifier: MIT OR Apache-2.0
//! The `model` operation (docs/protocol-model.md): decode the request's
//! script against the crate's tiny model (`ssm_rollback::model`), run it
//! from empty sequences, and write one result per step, every logit as a
//! `float.hex` string. A request the page refuses is `bad-request`, named by
//! its path (`script[2].decode[0].tokens[1]`), and nothing of it is run.

use crate::json::Json;
use crate::{bad, field, Reply};
use ssm_rollback::model::{Engine, TinyModel, Way, SEQUENCES, VOCAB};
use ssm_rollback::replay::to_hex;
use std::collections::HashSet;
use std::sync::OnceLock;

/// The most steps of one script, tokens of one entry, tokens one rollback
/// takes back, and characters of a name (docs/protocol-model.md).
const MAX_STEPS: usize = 1024;
const MAX_TOKENS: usize = 64;
const MAX_ROLLBACK: u64 = 4096;
const MAX_NAME: usize = 64;

fn model() -> &'static TinyModel {
    static MODEL: OnceLock<TinyModel> = OnceLock::new();
    MODEL.get_or_init(TinyModel::new)
}

/// One step of the script, checked.
enum Step {
    Decode(Vec<(String, Vec<usize>)>),
    Rollback(String, usize),
    Finish(String),
}

fn name(value: &Json, place: &str) -> Result<String, Reply> {
    match value.as_str() {
        Some(text) if !text.is_empty() && text.chars().count() <= MAX_NAME => Ok(text.to_string()),
        _ => Err(bad(format!(
            "{place} must be a string of 1 to {MAX_NAME} characters"
        ))),
    }
}

fn tokens(value: &Json, place: &str) -> Result<Vec<usize>, Reply> {
    let Json::Array(items) = value else {
        return Err(bad(format!(
            "{place} must be a list of 1 to {MAX_TOKENS} tokens"
        )));
    };
    if items.is_empty() || items.len() > MAX_TOKENS {
        return Err(bad(format!(
            "{place} must be a list of 1 to {MAX_TOKENS} tokens"
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item.as_u64() {
            Some(token) if token < VOCAB as u64 => Ok(token as usize),
            _ => Err(bad(format!(
                "{place}[{index}] must be a token in [0, {}]",
                VOCAB - 1
            ))),
        })
        .collect()
}

fn decode_step(value: &Json, place: &str, live: &mut HashSet<String>) -> Result<Step, Reply> {
    let entries = match value {
        Json::Array(items) if !items.is_empty() && items.len() <= SEQUENCES => items,
        _ => {
            return Err(bad(format!(
                "{place} must be a list of 1 to {SEQUENCES} entries"
            )))
        }
    };
    let mut decoded: Vec<(String, Vec<usize>)> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let at = format!("{place}[{index}]");
        if !matches!(entry, Json::Object(_)) {
            return Err(bad(format!("{at} must be an object")));
        }
        let sequence = name(field(entry, "sequence")?, &format!("{at}.sequence"))?;
        if decoded.iter().any(|(seen, _)| *seen == sequence) {
            return Err(bad(format!(
                "{at}: sequence {sequence:?} is already in this step"
            )));
        }
        let appended = tokens(field(entry, "tokens")?, &format!("{at}.tokens"))?;
        decoded.push((sequence, appended));
    }
    live.extend(decoded.iter().map(|(sequence, _)| sequence.clone()));
    if live.len() > SEQUENCES {
        return Err(bad(format!(
            "{place}: {} sequences would be live, past the model's {SEQUENCES}",
            live.len()
        )));
    }
    Ok(Step::Decode(decoded))
}

fn live_name(value: &Json, place: &str, live: &HashSet<String>) -> Result<String, Reply> {
    let sequence = name(value, place)?;
    if !live.contains(&sequence) {
        return Err(bad(format!("{place}: sequence {sequence:?} is not live")));
    }
    Ok(sequence)
}

fn step(value: &Json, place: &str, live: &mut HashSet<String>) -> Result<Step, Reply> {
    let kinds: Vec<&str> = ["decode", "rollback", "finish"]
        .into_iter()
        .filter(|kind| value.get(kind).is_some())
        .collect();
    if !matches!(value, Json::Object(_)) || kinds.len() != 1 {
        return Err(bad(format!(
            "{place} must be an object with exactly one of decode, rollback and finish"
        )));
    }
    match kinds[0] {
        "decode" => decode_step(field(value, "decode")?, &format!("{place}.decode"), live),
        "rollback" => {
            let sequence = live_name(
                field(value, "rollback")?,
                &format!("{place}.rollback"),
                live,
            )?;
            match field(value, "tokens")?.as_u64() {
                Some(count) if (1..=MAX_ROLLBACK).contains(&count) => {
                    Ok(Step::Rollback(sequence, count as usize))
                }
                _ => Err(bad(format!(
                    "{place}.tokens must be an integer in [1, {MAX_ROLLBACK}]"
                ))),
            }
        }
        _ => {
            let sequence = live_name(field(value, "finish")?, &format!("{place}.finish"), live)?;
            live.remove(&sequence);
            Ok(Step::Finish(sequence))
        }
    }
}

fn write_rows(out: &mut String, rows: &[Vec<f64>]) {
    out.push('[');
    for (index, row) in rows.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push('[');
        for (column, value) in row.iter().enumerate() {
            if column > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(&to_hex(*value));
            out.push('"');
        }
        out.push(']');
    }
    out.push(']');
}

pub(crate) fn answer(request: &Json) -> Result<Reply, Reply> {
    let way = match field(request, "rollback")?.as_str() {
        Some("snapshot") => Way::Snapshot,
        Some("checkpoint") => Way::Checkpoint,
        _ => {
            return Err(bad(
                "field 'rollback' must be one of [\"snapshot\", \"checkpoint\"]".into(),
            ))
        }
    };
    let script = match field(request, "script")? {
        Json::Array(items) if !items.is_empty() && items.len() <= MAX_STEPS => items,
        _ => {
            return Err(bad(format!(
                "field 'script' must be a list of 1 to {MAX_STEPS} steps"
            )))
        }
    };
    let mut live = HashSet::new();
    let steps = script
        .iter()
        .enumerate()
        .map(|(index, item)| step(item, &format!("script[{index}]"), &mut live))
        .collect::<Result<Vec<_>, _>>()?;
    let mut engine = Engine::new(model(), way);
    let mut out = String::from("{\"results\":[");
    for (index, item) in steps.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        match item {
            Step::Decode(entries) => {
                out.push_str("{\"logits\":[");
                for (number, rows) in engine.decode(entries).iter().enumerate() {
                    if number > 0 {
                        out.push(',');
                    }
                    write_rows(&mut out, rows);
                }
                out.push_str("]}");
            }
            Step::Rollback(sequence, count) => {
                let accepted = engine.rollback(sequence, *count);
                out.push_str(&format!("{{\"accepted\":{accepted}}}"));
            }
            Step::Finish(sequence) => {
                engine.finish(sequence);
                out.push_str("{}");
            }
        }
    }
    out.push_str("]}");
    Ok(Reply::Ok(out))
}
