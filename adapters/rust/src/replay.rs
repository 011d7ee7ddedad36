// SPDX-License-Identifier: MIT OR Apache-2.0
//! A port of the replay model's step (`spec/replay/layer.py`, docs/replay-model.md):
//! the causal depthwise conv and SiLU, the L2 norm, and the gated delta rule,
//! in f64 or in f32 with BF16 rounding where the model rounds, every sum left
//! to right, no fused multiply-add (Rust does not contract).
//!
//! One difference from the model, stated: the model's `exp` is correctly
//! rounded. Here f32's `exp` is f64's `exp` rounded once to f32, which is the
//! correctly rounded f32 value unless f64's result lies within one f64 ulp of
//! an f32 rounding boundary (about one argument in 2^28); f64's `exp` is the
//! platform's libm, not correctly rounded, so a float64 replay may differ in
//! the last bits. The replay corpus's per-pipeline bound (docs/replay-corpus.md,
//! "Judging a runtime's replay") covers both.

/// Where the arithmetic runs and where it rounds to BF16.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pipeline {
    Float64,
    TransformersBf16,
}

/// A layer's head shapes and conv kernel.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub num_key_heads: usize,
    pub key_head_dim: usize,
    pub num_value_heads: usize,
    pub value_head_dim: usize,
    pub conv_kernel: usize,
}

impl Dims {
    pub fn key_dim(&self) -> usize {
        self.num_key_heads * self.key_head_dim
    }
    pub fn value_dim(&self) -> usize {
        self.num_value_heads * self.value_head_dim
    }
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }
}

/// A (conv, h) state: `conv[c]` holds `conv_kernel - 1` columns, oldest
/// first; `h` is `nv x dk x dv`, flat, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub conv: Vec<Vec<f64>>,
    pub h: Vec<f64>,
}

/// One ring row: `values` is the pre-conv q, k, v (or post-conv k then v);
/// `g` and `beta` per value head.
#[derive(Clone, Debug)]
pub struct Row {
    pub values: Vec<f64>,
    pub g: Vec<f64>,
    pub beta: Vec<f64>,
}

/// The L2 norm's epsilon (transformers' `l2norm`).
pub(crate) const L2NORM_EPS: f64 = 1e-6;

/// Round an f32 to the nearest BF16 value, ties to even, held in f32.
pub fn bf16_round(value: f32) -> f32 {
    let bits = value.to_bits() as u64;
    let rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF_0000;
    f32::from_bits(rounded as u32)
}

/// The pipeline's arithmetic type.
pub(crate) trait Real:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    fn of(value: f64) -> Self;
    fn wide(self) -> f64;
    fn exp(self) -> Self;
    fn sqrt(self) -> Self;
    /// As a module of the pipeline holds it: BF16 in f32, unchanged in f64.
    fn held(self) -> Self;
}

impl Real for f64 {
    fn of(value: f64) -> Self {
        value
    }
    fn wide(self) -> f64 {
        self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn held(self) -> Self {
        self
    }
}

impl Real for f32 {
    fn of(value: f64) -> Self {
        value as f32
    }
    fn wide(self) -> f64 {
        self as f64
    }
    fn exp(self) -> Self {
        (self as f64).exp() as f32
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn held(self) -> Self {
        bf16_round(self)
    }
}

/// A sum left to right, starting from the first term.
pub(crate) fn ordered_sum<F: Real>(terms: impl Iterator<Item = F>) -> F {
    let mut terms = terms;
    let first = terms.next().expect("the model never sums nothing");
    terms.fold(first, |total, term| total + term)
}

pub(crate) struct Layer<F> {
    pub(crate) dims: Dims,
    pub(crate) weight: Vec<Vec<F>>,
}

impl<F: Real> Layer<F> {
    /// One token through the conv and the SiLU: the new conv columns and the post-conv q, k, v.
    pub(crate) fn conv_step(&self, conv: &[Vec<F>], qkv: &[F]) -> (Vec<Vec<F>>, Vec<F>) {
        let mut columns = Vec::with_capacity(conv.len());
        let mut post = Vec::with_capacity(conv.len());
        for (channel, kept) in conv.iter().enumerate() {
            let window: Vec<F> = kept.iter().copied().chain([qkv[channel]]).collect();
            let taps = &self.weight[channel];
            let mixed = ordered_sum(window.iter().zip(taps).map(|(&x, &w)| x * w)).held();
            let silu = (mixed / (F::of(1.0) + (-mixed).exp())).held();
            post.push(silu);
            columns.push(window[1..].to_vec());
        }
        (columns, post)
    }

    /// One token of the gated delta rule on every value head: the new h.
    pub(crate) fn delta_rule_step(&self, h: &[F], k_and_v: &[F], g: &[F], beta: &[F]) -> Vec<F> {
        let d = self.dims;
        let (dk, dv) = (d.key_head_dim, d.value_head_dim);
        let keys: Vec<Vec<F>> = (0..d.num_key_heads)
            .map(|head| {
                let x = &k_and_v[head * dk..(head + 1) * dk];
                let norm = (ordered_sum(x.iter().map(|&v| v * v)) + F::of(L2NORM_EPS)).sqrt();
                x.iter().map(|&v| v / norm).collect()
            })
            .collect();
        let ratio = d.num_value_heads / d.num_key_heads;
        let mut out = vec![F::of(0.0); h.len()];
        for head in 0..d.num_value_heads {
            let k = &keys[head / ratio];
            let v = &k_and_v[d.key_dim() + head * dv..d.key_dim() + (head + 1) * dv];
            let decay = g[head].exp();
            let base = head * dk * dv;
            let decayed: Vec<F> = h[base..base + dk * dv].iter().map(|&s| s * decay).collect();
            for j in 0..dv {
                let remembered = ordered_sum((0..dk).map(|i| decayed[i * dv + j] * k[i]));
                let u = (v[j] - remembered) * beta[head];
                for i in 0..dk {
                    out[base + i * dv + j] = decayed[i * dv + j] + k[i] * u;
                }
            }
        }
        out
    }
}

/// A layer's (conv, h) state in the pipeline's type.
type Held<F> = (Vec<Vec<F>>, Vec<F>);

impl<F: Real> Layer<F> {
    /// One pre-conv row through the conv and the gated delta rule, with the
    /// gates `g` and `beta` the caller gathered for it.
    fn token(&self, state: &Held<F>, row: &Row, g: &[F], beta: &[F]) -> Held<F> {
        let (columns, post) = self.conv_step(&state.0, &narrow::<F>(&row.values));
        let h = self.delta_rule_step(&state.1, &post[self.dims.key_dim()..], g, beta);
        (columns, h)
    }
}

fn narrow<F: Real>(values: &[f64]) -> Vec<F> {
    values.iter().map(|&v| F::of(v)).collect()
}

fn widen<F: Real>(values: &[F]) -> Vec<f64> {
    values.iter().map(|&v| v.wide()).collect()
}

/// A replay ring across verify rounds: the checkpoint it restores, and the
/// rows each round writes. The wrong builds (cargo features) are the
/// self-test's: `replay-one-short` replays one row fewer than accepted;
/// `replay-stale-rows` does not rewind the ring's write cursor after a round
/// it accepted whole, so the next round's replay reads the earlier round's rows.
struct Ring<F> {
    layer: Layer<F>,
    checkpoint: (Vec<Vec<F>>, Vec<F>),
    rows: Vec<Row>,
    cursor: usize,
}

impl<F: Real> Ring<F> {
    fn round(&mut self, rows: &[Row], accepted: usize) {
        for (index, row) in rows.iter().enumerate() {
            let slot = self.cursor + index;
            if slot < self.rows.len() {
                self.rows[slot] = row.clone();
            } else {
                self.rows.push(row.clone());
            }
        }
        let replayed = if cfg!(feature = "replay-one-short") {
            accepted - 1
        } else {
            accepted
        };
        let mut state = self.checkpoint.clone();
        for row in &self.rows[..replayed] {
            state = self.layer.token(&state, row, &narrow::<F>(&row.g), &narrow::<F>(&row.beta));
        }
        self.checkpoint = state;
        let stale = cfg!(feature = "replay-stale-rows") && accepted == rows.len();
        self.cursor = if stale { self.cursor + rows.len() } else { 0 };
    }
}

/// Replay pre-conv rounds from `checkpoint`: the state after each round.
pub fn replay_rounds(
    pipeline: Pipeline,
    dims: Dims,
    weight: &[Vec<f64>],
    checkpoint: &State,
    rounds: &[(Vec<Row>, usize)],
) -> Vec<State> {
    match pipeline {
        Pipeline::Float64 => replay_in::<f64>(dims, weight, checkpoint, rounds),
        Pipeline::TransformersBf16 => replay_in::<f32>(dims, weight, checkpoint, rounds),
    }
}

fn replay_in<F: Real>(
    dims: Dims,
    weight: &[Vec<f64>],
    checkpoint: &State,
    rounds: &[(Vec<Row>, usize)],
) -> Vec<State> {
    let layer = held_layer::<F>(dims, weight);
    let conv = checkpoint.conv.iter().map(|c| narrow::<F>(c)).collect();
    let mut ring = Ring {
        layer,
        checkpoint: (conv, narrow::<F>(&checkpoint.h)),
        rows: Vec::new(),
        cursor: 0,
    };
    rounds
        .iter()
        .map(|(rows, accepted)| {
            ring.round(rows, *accepted);
            let (conv, h) = &ring.checkpoint;
            State {
                conv: conv.iter().map(|c| widen(c)).collect(),
                h: widen(h),
            }
        })
        .collect()
}

/// Replay one post-conv window: h from the post-conv k and v rows, the conv
/// state from the checkpoint's columns followed by `conv_window`'s.
pub fn replay_post_conv(
    pipeline: Pipeline,
    dims: Dims,
    checkpoint: &State,
    rows: &[Row],
    conv_window: &[Vec<f64>],
    accepted: usize,
) -> State {
    match pipeline {
        Pipeline::Float64 => post_conv_in::<f64>(dims, checkpoint, rows, conv_window, accepted),
        Pipeline::TransformersBf16 => {
            post_conv_in::<f32>(dims, checkpoint, rows, conv_window, accepted)
        }
    }
}

fn post_conv_in<F: Real>(
    dims: Dims,
    checkpoint: &State,
    rows: &[Row],
    conv_window: &[Vec<f64>],
    accepted: usize,
) -> State {
    let layer: Layer<F> = Layer {
        dims,
        weight: Vec::new(),
    };
    let replayed = if cfg!(feature = "replay-one-short") {
        accepted - 1
    } else {
        accepted
    };
    let mut h = narrow::<F>(&checkpoint.h);
    for row in &rows[..replayed] {
        h = layer.delta_rule_step(
            &h,
            &narrow::<F>(&row.values),
            &narrow::<F>(&row.g),
            &narrow::<F>(&row.beta),
        );
    }
    let keep = dims.conv_kernel - 1;
    let conv = checkpoint
        .conv
        .iter()
        .zip(conv_window)
        .map(|(kept, window)| {
            let joined: Vec<F> = narrow::<F>(kept)
                .into_iter()
                .chain(narrow::<F>(window))
                .collect();
            widen(&joined[replayed..replayed + keep])
        })
        .collect();
    State { conv, h: widen(&h) }
}

/// One sequence's part of a batch step (docs/protocol-replay-batch.md):
/// its slot, its window's pre-conv rows and how many it accepted; on its
/// first entry the checkpoint it joins from and the prefill rows run first.
#[derive(Clone, Debug)]
pub struct BatchEntry {
    pub slot: usize,
    pub rows: Vec<Row>,
    pub accepted: usize,
    pub checkpoint: Option<State>,
    pub prefill: Vec<Row>,
}

/// One slot of the pool: the state a verify reads and a commit writes, the
/// checkpoint the last verify started from, and its ring of the window's
/// first K - 1 rows (gates as the verify gathered them), which outlives the
/// steps that write it.
struct PoolSlot<F> {
    state: Held<F>,
    checkpoint: Held<F>,
    ring: Vec<(Row, Vec<F>, Vec<F>)>,
    cursor: usize,
}

/// A slot pool verifying flat batches. Slots are allocated when a sequence
/// first takes them, so a large pool costs nothing until used.
struct Pool<F> {
    layer: Layer<F>,
    slots: Vec<Option<PoolSlot<F>>>,
}

impl<F: Real> Pool<F> {
    fn admit(&mut self, entry: &BatchEntry) {
        let Some(checkpoint) = &entry.checkpoint else {
            return;
        };
        let mut state: Held<F> = (
            checkpoint.conv.iter().map(|c| narrow::<F>(c)).collect(),
            narrow::<F>(&checkpoint.h),
        );
        for row in &entry.prefill {
            state = self.layer.token(&state, row, &narrow::<F>(&row.g), &narrow::<F>(&row.beta));
        }
        // A new occupant keeps the ring the slot's last one left; its cursor is reset by its verify.
        let ring = match self.slots[entry.slot].take() {
            Some(slot) => slot.ring,
            None => Vec::new(),
        };
        self.slots[entry.slot] = Some(PoolSlot {
            checkpoint: state.clone(),
            state,
            ring,
            cursor: 0,
        });
    }

    fn slot(&mut self, index: usize) -> &mut PoolSlot<F> {
        self.slots[index]
            .as_mut()
            .expect("the request's bookkeeping was checked: a running sequence's slot is taken")
    }

    /// Verify every entry of a step from the state its slot holds, then commit every one.
    fn step(&mut self, batch: &[BatchEntry]) -> Vec<State> {
        for entry in batch {
            self.admit(entry);
        }
        // The batch as a kernel takes it: tokens one window after another,
        // each entry's first token at starts[i], its gates gathered there.
        let mut starts = Vec::with_capacity(batch.len());
        let mut gates: Vec<(Vec<F>, Vec<F>)> = Vec::new();
        for entry in batch {
            starts.push(gates.len());
            for row in &entry.rows {
                gates.push((narrow::<F>(&row.g), narrow::<F>(&row.beta)));
            }
        }
        let state_indices: Vec<usize> = batch.iter().map(|entry| entry.slot).collect();
        // Every verify reads its slot before any commit writes one.
        let mut lives = Vec::with_capacity(batch.len());
        for (index, entry) in batch.iter().enumerate() {
            let window = entry.rows.len();
            // The self-test's wrong build reads slot 0 for a decode with no drafts (vLLM #39273).
            let wrong = cfg!(feature = "replay-batch-slot-zero") && window == 1;
            let read = if wrong && self.slots[0].is_some() {
                0
            } else {
                state_indices[index]
            };
            let mut live = self.slot(read).state.clone();
            let mut captured = Vec::with_capacity(window - 1);
            for (token, row) in entry.rows.iter().enumerate() {
                let (g, beta) = &gates[starts[index] + token];
                live = self.layer.token(&live, row, g, beta);
                if token + 1 < window {
                    captured.push((row.clone(), g.clone(), beta.clone()));
                }
            }
            let slot = self.slot(state_indices[index]);
            slot.checkpoint = slot.state.clone();
            slot.cursor = 0;
            for record in captured {
                if slot.cursor < slot.ring.len() {
                    slot.ring[slot.cursor] = record;
                } else {
                    slot.ring.push(record);
                }
                slot.cursor += 1;
            }
            lives.push(live);
        }
        for (index, live) in lives.into_iter().enumerate() {
            let accepted = batch[index].accepted;
            let layer = &self.layer;
            let slot = self.slots[state_indices[index]].as_mut().expect("taken above");
            if accepted == batch[index].rows.len() {
                slot.state = live;
            } else {
                let replayed = if cfg!(feature = "replay-one-short") {
                    accepted - 1
                } else {
                    accepted
                };
                let mut state = slot.checkpoint.clone();
                for (row, g, beta) in &slot.ring[..replayed] {
                    state = layer.token(&state, row, g, beta);
                }
                slot.state = state;
            }
        }
        state_indices
            .iter()
            .map(|&index| {
                let (conv, h) = &self.slot(index).state;
                State {
                    conv: conv.iter().map(|c| widen(c)).collect(),
                    h: widen(h),
                }
            })
            .collect()
    }
}

/// Verify a replay batch's steps on a pool of `slots` slots: each entry's state after its step.
pub fn replay_batch(
    pipeline: Pipeline,
    dims: Dims,
    weight: &[Vec<f64>],
    slots: usize,
    steps: &[Vec<BatchEntry>],
) -> Vec<State> {
    match pipeline {
        Pipeline::Float64 => batch_in::<f64>(dims, weight, slots, steps),
        Pipeline::TransformersBf16 => batch_in::<f32>(dims, weight, slots, steps),
    }
}

fn batch_in<F: Real>(
    dims: Dims,
    weight: &[Vec<f64>],
    slots: usize,
    steps: &[Vec<BatchEntry>],
) -> Vec<State> {
    let mut pool = Pool {
        layer: held_layer::<F>(dims, weight),
        slots: (0..slots).map(|_| None).collect(),
    };
    steps.iter().flat_map(|batch| pool.step(batch)).collect()
}

fn held_layer<F: Real>(dims: Dims, weight: &[Vec<f64>]) -> Layer<F> {
    Layer {
        dims,
        weight: weight
            .iter()
            .map(|taps| narrow::<F>(taps).iter().map(|&w| w.held()).collect())
            .collect(),
    }
}

/// Parse a `float.hex` string (`[+-]0xH[.H]p[+-]D`) exactly; None if it is not one.
pub fn parse_hex(text: &str) -> Option<f64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))?;
    let (mantissa_text, exponent_text) = rest.split_once(['p', 'P'])?;
    let (whole, fraction) = mantissa_text.split_once('.').unwrap_or((mantissa_text, ""));
    if whole.is_empty() || whole.len() + fraction.len() > 30 {
        return None;
    }
    let mut mantissa: u128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        mantissa = mantissa * 16 + c.to_digit(16)? as u128;
    }
    let digits = exponent_text
        .strip_prefix(['+', '-'])
        .unwrap_or(exponent_text);
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut exponent: i64 = exponent_text.parse().ok()?;
    exponent -= 4 * fraction.len() as i64;
    let mut value = 0.0f64;
    if mantissa != 0 {
        // Round the mantissa to 53 bits, to nearest, ties to even.
        let bits = 128 - mantissa.leading_zeros() as i64;
        if bits > 53 {
            let shift = (bits - 53) as u32;
            let half = 1u128 << (shift - 1);
            let dropped = mantissa & ((1u128 << shift) - 1);
            mantissa >>= shift;
            if dropped > half || (dropped == half && mantissa & 1 == 1) {
                mantissa += 1;
            }
            exponent += shift as i64;
        }
        value = mantissa as f64;
        // Scale by 2^exponent in steps that stay exact while in range.
        while exponent > 0 {
            let step = exponent.min(1000);
            value *= 2f64.powi(step as i32);
            exponent -= step;
        }
        while exponent < 0 {
            let step = (-exponent).min(1000);
            value /= 2f64.powi(step as i32);
            exponent += step;
        }
    }
    if !value.is_finite() {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// An f64 as Python's `float.hex` writes it.
pub fn to_hex(value: f64) -> String {
    let sign = if value.is_sign_negative() { "-" } else { "" };
    let bits = value.to_bits();
    let exponent = ((bits >> 52) & 0x7FF) as i64;
    let fraction = bits & ((1u64 << 52) - 1);
    if exponent == 0 && fraction == 0 {
        return format!("{sign}0x0.0p+0");
    }
    let (lead, power) = if exponent == 0 {
        (0, -1022)
    } else {
        (1, exponent - 1023)
    };
    let power_sign = if power < 0 { "-" } else { "+" };
    format!("{sign}0x{lead}.{fraction:013x}p{power_sign}{}", power.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_as_python_writes_it() {
        for value in [
            0.0,
            -0.0,
            1.0,
            0.1,
            -2.5e-300,
            1.7976931348623157e308,
            5e-324,
        ] {
            assert_eq!(parse_hex(&to_hex(value)), Some(value));
        }
        assert_eq!(to_hex(0.1), "0x1.999999999999ap-4");
        assert_eq!(parse_hex("0x1p-1"), Some(0.5));
        assert_eq!(parse_hex("0.5"), None);
    }

    #[test]
    fn bf16_rounds_to_nearest_ties_to_even() {
        assert_eq!(
            bf16_round(f32::from_bits(0x3F80_8000)),
            f32::from_bits(0x3F80_0000)
        );
        assert_eq!(
            bf16_round(f32::from_bits(0x3F81_8000)),
            f32::from_bits(0x3F82_0000)
        );
    }
}
