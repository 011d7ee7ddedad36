// SPDX-License-Identifier: MIT OR Apache-2.0
//! The protocol adapter (docs/protocol.md, version 1) over this crate's
//! implementation: one JSON request per stdin line, one reply per stdout line.

mod json;
mod model_op;
mod replay_op;

use std::io::{self, BufRead, BufWriter, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use json::{write_string, Json};
use ssm_rollback::{
    set_ssm_rollback_mode, ssm_replay_ring_bytes, ssm_replay_row_bytes, ssm_rollback_mode,
    verify_entry_allowed, Overflow, SsmRollbackMode,
};
#[cfg(not(feature = "no-race-cells"))]
use ssm_rollback::ModeCell;

/// A reply before it is written.
pub(crate) enum Reply {
    Ok(String),
    /// An `ok` value with its race's calls' spans beside it (docs/protocol-race-evidence.md).
    OkWithSpans(String, String),
    Error(&'static str, String),
}

pub(crate) fn bad(message: String) -> Reply {
    Reply::Error("bad-request", message)
}

pub(crate) fn field<'a>(request: &'a Json, name: &str) -> Result<&'a Json, Reply> {
    request.get(name).ok_or_else(|| bad(format!("missing field '{name}'")))
}

fn u64_field(request: &Json, name: &str) -> Result<u64, Reply> {
    field(request, name)?
        .as_u64()
        .ok_or_else(|| bad(format!("field '{name}' must be an integer in [0, {}]", u64::MAX)))
}

fn mode_field(object: &Json, place: &str) -> Result<SsmRollbackMode, Reply> {
    field(object, "mode")?
        .as_str()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| bad(format!("{place}field 'mode' must be \"snapshot\" or \"replay\"")))
}

#[derive(Clone, Copy)]
enum Event {
    Set(SsmRollbackMode),
    Get,
}

impl Event {
    fn run(self) -> SsmRollbackMode {
        match self {
            Event::Set(mode) => set_ssm_rollback_mode(mode),
            Event::Get => ssm_rollback_mode(),
        }
    }
}

/// The most events a trace or race may hold (docs/protocol.md).
const MAX_EVENTS: usize = 256;

/// The most rounds one `race_cells` request may ask for (docs/protocol.md).
#[cfg(not(feature = "no-race-cells"))]
const MAX_ROUNDS: u64 = 10_000;

/// How long after the last racer arrives a round is released: long enough
/// for every spinning racer to see the instant, so that all of them leave
/// within nanoseconds of each other, not one cache miss after the last.
const RELEASE_AHEAD_NANOS: u64 = 1_000;

fn nanos_since(origin: &Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Spin until the release instant, in nanoseconds since `origin`; a racer
/// that saw the go late leaves at once.
fn wait_for_release(origin: &Instant, release: &AtomicU64) {
    let at = release.load(Ordering::Relaxed);
    while nanos_since(origin) < at {
        std::hint::spin_loop();
    }
}

/// Race `events` on a fresh cell, `rounds` times, with one thread per event
/// for the whole run. Each round, the threads spin until a shared counter
/// says go, then until the instant the last to arrive set, so they leave
/// together, within nanoseconds rather than the microseconds a sleeping
/// barrier takes to wake each one.
#[cfg(not(feature = "no-race-cells"))]
fn race_fresh_cells(events: &[Event], rounds: usize) -> Vec<Vec<(SsmRollbackMode, Span)>> {
    let origin = Instant::now();
    let cells: Vec<ModeCell> = (0..rounds).map(|_| ModeCell::new()).collect();
    let arrived = AtomicUsize::new(0);
    let go = AtomicUsize::new(0);
    let release = AtomicU64::new(0);
    let threads = events.len();
    let per_thread: Vec<Vec<(SsmRollbackMode, Span)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = events
            .iter()
            .map(|&event| {
                let (cells, arrived, go, origin) = (&cells, &arrived, &go, &origin);
                let release = &release;
                scope.spawn(move || {
                    let mut returned = Vec::with_capacity(rounds);
                    for (round, cell) in cells.iter().enumerate() {
                        // The last thread to arrive opens round `round`.
                        if arrived.fetch_add(1, Ordering::AcqRel) + 1 == threads * (round + 1) {
                            release.store(nanos_since(origin) + RELEASE_AHEAD_NANOS, Ordering::Relaxed);
                            go.store(round + 1, Ordering::Release);
                        }
                        // Spin, but give the core away now and then: with more
                        // threads than cores, a late thread must get to arrive.
                        let mut spins = 0u32;
                        while go.load(Ordering::Acquire) <= round {
                            spins = spins.wrapping_add(1);
                            if spins % 1024 == 0 {
                                std::thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                        }
                        wait_for_release(origin, release);
                        returned.push(timed(origin, || match event {
                            Event::Set(mode) => cell.set(mode),
                            Event::Get => cell.set(SsmRollbackMode::Snapshot),
                        }));
                    }
                    returned
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("cell thread")).collect()
    });
    (0..rounds).map(|round| per_thread.iter().map(|thread| thread[round]).collect()).collect()
}

/// Race `events` on the published mode, one thread per event, released as
/// `race_fresh_cells` releases a round: the last thread to arrive sets the
/// instant and opens it, the others spin, so they leave together
/// (docs/protocol.md). A sleeping
/// barrier (`std::sync::Barrier`) wakes them one after another instead, and
/// a narrow check-then-set is never caught that way (BENCHMARKS.md).
fn race_published(events: &[Event]) -> Vec<(SsmRollbackMode, Span)> {
    let origin = Instant::now();
    let arrived = AtomicUsize::new(0);
    let go = AtomicUsize::new(0);
    let release = AtomicU64::new(0);
    let threads = events.len();
    std::thread::scope(|scope| {
        let handles: Vec<_> = events
            .iter()
            .map(|&event| {
                let (arrived, go, origin, release) = (&arrived, &go, &origin, &release);
                scope.spawn(move || {
                    if arrived.fetch_add(1, Ordering::AcqRel) + 1 == threads {
                        release.store(nanos_since(origin) + RELEASE_AHEAD_NANOS, Ordering::Relaxed);
                        go.store(1, Ordering::Release);
                    }
                    let mut spins = 0u32;
                    while go.load(Ordering::Acquire) == 0 {
                        spins = spins.wrapping_add(1);
                        if spins % 1024 == 0 {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    wait_for_release(origin, release);
                    timed(origin, || event.run())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("event thread")).collect()
    })
}

/// One call's start and end, in nanoseconds since the race's origin, on the
/// monotonic clock `Instant` reads.
type Span = (u64, u64);

/// Run `call`, reading the clock around it: what it returned and its span.
fn timed(origin: &Instant, call: impl FnOnce() -> SsmRollbackMode) -> (SsmRollbackMode, Span) {
    let nanos = |at: Instant| u64::try_from(at.duration_since(*origin).as_nanos()).unwrap_or(u64::MAX);
    let start = Instant::now();
    let returned = call();
    (returned, (nanos(start), nanos(Instant::now())))
}

/// Whether the request asks for its calls' spans (`"spans": true`).
fn spans_asked(request: &Json) -> Result<bool, Reply> {
    match request.get("spans") {
        None => Ok(false),
        Some(Json::Bool(asked)) => Ok(*asked),
        Some(_) => Err(bad("field 'spans' must be true or false".into())),
    }
}

/// What a race's calls returned, with their spans beside when asked.
fn race_reply(rounds: &[Vec<(SsmRollbackMode, Span)>], one: bool, spans: bool) -> Reply {
    let modes: Vec<String> = rounds
        .iter()
        .map(|round| mode_list(&round.iter().map(|(mode, _)| *mode).collect::<Vec<_>>()))
        .collect();
    let times: Vec<String> = rounds
        .iter()
        .map(|round| {
            let each: Vec<String> = round.iter().map(|(_, (s, e))| format!("[{s},{e}]")).collect();
            format!("[{}]", each.join(","))
        })
        .collect();
    let (value, times) = if one {
        (modes.concat(), times.concat())
    } else {
        (format!("[{}]", modes.join(",")), format!("[{}]", times.join(",")))
    };
    if spans {
        Reply::OkWithSpans(value, times)
    } else {
        Reply::Ok(value)
    }
}

fn events(request: &Json) -> Result<Vec<Event>, Reply> {
    let Json::Array(items) = field(request, "events")? else {
        return Err(bad("field 'events' must be a list".into()));
    };
    if items.len() > MAX_EVENTS {
        return Err(bad(format!(
            "field 'events' holds {} events, more than {MAX_EVENTS}",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let place = format!("events[{index}] ");
            match item.get("op").and_then(Json::as_str) {
                Some("set") if matches!(item, Json::Object(_)) => Ok(Event::Set(mode_field(item, &place)?)),
                Some("get") if matches!(item, Json::Object(_)) => Ok(Event::Get),
                _ => Err(bad(format!("{place}must be an object with 'op' \"set\" or \"get\""))),
            }
        })
        .collect()
}

fn mode_list(modes: &[SsmRollbackMode]) -> String {
    let names: Vec<String> = modes.iter().map(|m| format!("\"{}\"", m.name())).collect();
    format!("[{}]", names.join(","))
}

fn size(result: Result<u64, Overflow>, call: String) -> Reply {
    match result {
        Ok(bytes) => Reply::Ok(bytes.to_string()),
        Err(Overflow) => Reply::Error("overflow", format!("{call} exceeds usize max {}", u64::MAX)),
    }
}

/// Who this adapter is, what its `replay` computes (docs/protocol-replay.md): the
/// model's two pipelines, both layouts, and the
/// designs whose states are the model's per-token step (replay.rs ports it); and
/// the tiny model its `model` operation decodes (model.rs; docs/protocol-model.md).
const DESCRIBE: &str = concat!(
    r#"{"name":"ssm-rollback-adapter (Rust)","usize_bits":64,"replay":{"#,
    r#""pipelines":["float64","transformers-bf16"],"layouts":["pre-conv","post-conv"],"#,
    r#""designs":["seed-row","minimal-pre-conv","replayssm","post-conv-with-conv-window"]},"#,
    r#""model":{"name":"tiny-gdn-48 (adapters/rust/src/model.rs)","vocab":48,"sequences":4,"#,
    r#""rollback":["snapshot","checkpoint"],"snapshot_depth":4,"bound":"0x0.0p+0"}}"#
);

fn answer(line: &str) -> Result<Reply, Reply> {
    let request = json::parse(line).map_err(|e| bad(format!("not a JSON line: {e}")))?;
    if !matches!(request, Json::Object(_)) {
        return Err(bad("a request must be a JSON object".into()));
    }
    let op = field(&request, "op")?
        .as_str()
        .ok_or_else(|| bad("field 'op' must be a string".into()))?;
    Ok(match op {
        "describe" => Reply::Ok(DESCRIBE.into()),
        "parse" => {
            let text = field(&request, "text")?
                .as_str()
                .ok_or_else(|| bad("field 'text' must be a string".into()))?;
            match text.parse::<SsmRollbackMode>() {
                Ok(mode) => Reply::Ok(format!("\"{}\"", mode.name())),
                Err(error) => Reply::Error("unknown-mode", error.to_string()),
            }
        }
        "row_bytes" => {
            let (q, nv) = (u64_field(&request, "qkvz_elems")?, u64_field(&request, "nv")?);
            size(ssm_replay_row_bytes(q, nv), format!("ssm_replay_row_bytes({q}, {nv})"))
        }
        "ring_bytes" => {
            let layers = u64_field(&request, "num_ssm_layers")?;
            let row = u64_field(&request, "row_bytes")?;
            let k = u64_field(&request, "k_ceiling")?;
            let slots = u64_field(&request, "mtp_state_slots")?;
            size(
                ssm_replay_ring_bytes(layers, row, k, slots),
                format!("ssm_replay_ring_bytes({layers}, {row}, {k}, {slots})"),
            )
        }
        "verify_entry" => {
            let mode = mode_field(&request, "")?;
            if verify_entry_allowed(mode) {
                Reply::Ok("null".into())
            } else {
                Reply::Error(
                    "unsupported",
                    format!("speculative verify refused in ssm-rollback-mode '{mode}'"),
                )
            }
        }
        "trace" => {
            let returned: Vec<_> = events(&request)?.into_iter().map(Event::run).collect();
            Reply::Ok(mode_list(&returned))
        }
        "race" => {
            let events = events(&request)?;
            let spans = spans_asked(&request)?;
            race_reply(&[race_published(&events)], true, spans)
        }
        #[cfg(not(feature = "no-race-cells"))]
        "race_cells" => {
            let events = events(&request)?;
            let rounds = u64_field(&request, "rounds")?;
            if rounds == 0 || rounds > MAX_ROUNDS {
                return Err(bad(format!("field 'rounds' must be in [1, {MAX_ROUNDS}]")));
            }
            let spans = spans_asked(&request)?;
            race_reply(&race_fresh_cells(&events, rounds as usize), false, spans)
        }
        "replay" => replay_op::answer(&request)?,
        "replay_batch" => replay_op::answer_batch(&request)?,
        "model" => model_op::answer(&request)?,
        other => {
            let mut shown = String::new();
            write_string(&mut shown, other);
            Reply::Error("unknown-op", format!("unknown op {shown}"))
        }
    })
}

fn encode(reply: Reply) -> String {
    match reply {
        Reply::Ok(value) => format!("{{\"ok\":{value}}}"),
        Reply::OkWithSpans(value, spans) => format!("{{\"ok\":{value},\"spans\":{spans}}}"),
        Reply::Error(kind, message) => {
            let mut out = format!("{{\"error\":{{\"kind\":\"{kind}\",\"message\":");
            write_string(&mut out, &message);
            out.push_str("}}");
            out
        }
    }
}

fn main() {
    let stdin = io::stdin();
    let mut input = io::BufReader::new(stdin.lock());
    let mut output = BufWriter::new(io::stdout().lock());
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match input.read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                eprintln!("ssm-rollback-adapter: cannot read stdin: {error}");
                std::process::exit(1);
            }
        }
        if raw.last() == Some(&b'\n') {
            raw.pop();
        }
        let reply = match std::str::from_utf8(&raw) {
            Ok(line) => answer(line).unwrap_or_else(|error| error),
            Err(error) => bad(format!("not UTF-8: {error}")),
        };
        let written = writeln!(output, "{}", encode(reply));
        // Flush only when no further request is already waiting, so that a
        // pipelined batch is answered in few writes.
        let flushed = if input.buffer().is_empty() { output.flush() } else { Ok(()) };
        if written.and(flushed).is_err() {
            std::process::exit(1);
        }
    }
    if output.flush().is_err() {
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssm_rollback::model::{SEQUENCES, SNAPSHOT_DEPTH, VOCAB};

    #[test]
    fn describe_states_the_model_the_operation_decodes() {
        let member = format!(
            r#""model":{{"name":"tiny-gdn-48 (adapters/rust/src/model.rs)","vocab":{VOCAB},"sequences":{SEQUENCES},"rollback":["snapshot","checkpoint"],"snapshot_depth":{SNAPSHOT_DEPTH},"#
        );
        assert!(DESCRIBE.contains(&member), "{DESCRIBE}");
        assert!(json::parse(DESCRIBE).is_ok());
    }
}
