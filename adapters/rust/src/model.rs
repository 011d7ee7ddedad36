// SPDX-License-Identifier: MIT OR Apache-2.0
//! A tiny model of the crate's own, for the protocol's `model` operation
//! (docs/protocol-model.md): a fixed embedding of 48 tokens, one
//! attention-free layer (the crate's GDN port, `replay.rs`, in f64: the
//! causal conv and SiLU, then the gated delta rule) and a fixed read-out
//! onto the vocabulary. Every weight comes from a counter hashed with
//! SplitMix64, so the model is the same on every machine, with no file.
//!
//! Sequences live in the slots of one engine, as a runtime keeps them, and
//! roll back both ways the protocol names: `snapshot` keeps the state
//! before each of a sequence's last `SNAPSHOT_DEPTH` tokens and restores
//! the one n tokens back; `checkpoint` keeps the state before each decode
//! the sequence takes part in, restores it and decodes the window's kept
//! tokens again. Each token is decoded one after another, so a rolled-back
//! sequence's logits are a plain decode's bit for bit: the bound is 0.
//!
//! The self-test's wrong build, `--features model-rollback-one-short`, keeps
//! one token too many: a rollback of n restores the state n - 1 tokens back
//! (or, by checkpoint, decodes one more of the window's tokens again), while
//! the sequence's length moves back by n.

use crate::replay::{ordered_sum, Dims, Layer, L2NORM_EPS};

/// The vocabulary: a token is 0 to `VOCAB - 1`.
pub const VOCAB: usize = 48;
/// How many sequences the engine holds at once.
pub const SEQUENCES: usize = 4;
/// How many tokens back a snapshot reaches.
pub const SNAPSHOT_DEPTH: usize = 4;

const DIMS: Dims = Dims {
    num_key_heads: 1,
    key_head_dim: 4,
    num_value_heads: 2,
    value_head_dim: 4,
    conv_kernel: 4,
};

/// SplitMix64 of `counter`: the model's weights, the same on every machine.
fn splitmix64(counter: u64) -> u64 {
    let mut z = counter.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Weights in `[low, high)`, exact multiples of 2^-53 of the span, drawn from `stream`.
struct Draws {
    stream: u64,
    counter: u64,
}

impl Draws {
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        self.counter += 1;
        let bits = splitmix64(self.stream.wrapping_mul(1 << 32).wrapping_add(self.counter)) >> 11;
        low + (high - low) * (bits as f64 / (1u64 << 53) as f64)
    }

    fn many(&mut self, count: usize, low: f64, high: f64) -> Vec<f64> {
        (0..count).map(|_| self.uniform(low, high)).collect()
    }
}

/// One token's inputs to the layer: its pre-conv q, k and v, and its gates.
struct Embedded {
    qkv: Vec<f64>,
    g: Vec<f64>,
    beta: Vec<f64>,
}

/// A sequence's recurrent state: the conv's columns and the delta rule's h.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceState {
    conv: Vec<Vec<f64>>,
    h: Vec<f64>,
}

/// The fixed weights: the embedding, the layer and the read-out.
pub struct TinyModel {
    layer: Layer<f64>,
    embedding: Vec<Embedded>,
    /// `VOCAB` rows of `nv * dv` weights: the logits from the layer's output.
    output: Vec<Vec<f64>>,
}

impl Default for TinyModel {
    fn default() -> Self {
        Self::new()
    }
}

impl TinyModel {
    pub fn new() -> Self {
        let mut draws = Draws {
            stream: 44,
            counter: 0,
        };
        let weight = (0..DIMS.conv_dim())
            .map(|_| draws.many(DIMS.conv_kernel, -1.0, 1.0))
            .collect();
        let heads = DIMS.num_value_heads;
        let embedding = (0..VOCAB)
            .map(|_| Embedded {
                qkv: draws.many(DIMS.conv_dim(), -2.0, 2.0),
                // A decay of exp(g) in (0.37, 0.95): the state remembers a few tokens.
                g: draws.many(heads, -1.0, -0.05),
                beta: draws.many(heads, 0.2, 0.9),
            })
            .collect();
        let output = (0..VOCAB)
            .map(|_| draws.many(DIMS.value_dim(), -2.0, 2.0))
            .collect();
        TinyModel {
            layer: Layer { dims: DIMS, weight },
            embedding,
            output,
        }
    }

    /// A sequence that has seen no token.
    pub fn empty(&self) -> SequenceState {
        SequenceState {
            conv: vec![vec![0.0; DIMS.conv_kernel - 1]; DIMS.conv_dim()],
            h: vec![0.0; DIMS.num_value_heads * DIMS.key_head_dim * DIMS.value_head_dim],
        }
    }

    /// One token decoded from `state`: the state after it and the logits for the next token.
    pub fn token(&self, state: &SequenceState, token: usize) -> (SequenceState, Vec<f64>) {
        let embedded = &self.embedding[token];
        let (conv, post) = self.layer.conv_step(&state.conv, &embedded.qkv);
        let key_dim = DIMS.key_dim();
        let h = self
            .layer
            .delta_rule_step(&state.h, &post[key_dim..], &embedded.g, &embedded.beta);
        // The read-out: each value head's h read with its key head's L2-normed q.
        let (dk, dv) = (DIMS.key_head_dim, DIMS.value_head_dim);
        let ratio = DIMS.num_value_heads / DIMS.num_key_heads;
        let mut out = Vec::with_capacity(DIMS.value_dim());
        for head in 0..DIMS.num_value_heads {
            let q = &post[(head / ratio) * dk..(head / ratio + 1) * dk];
            let norm = (ordered_sum(q.iter().map(|&v| v * v)) + L2NORM_EPS).sqrt();
            let base = head * dk * dv;
            for j in 0..dv {
                out.push(ordered_sum(
                    (0..dk).map(|i| q[i] / norm * h[base + i * dv + j]),
                ));
            }
        }
        let logits = self
            .output
            .iter()
            .map(|row| ordered_sum(row.iter().zip(&out).map(|(&w, &o)| w * o)))
            .collect();
        (SequenceState { conv, h }, logits)
    }
}

/// How this request's rollbacks take tokens back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Snapshot,
    Checkpoint,
}

/// One sequence in its slot, with what each way keeps to roll it back.
struct Sequence {
    state: SequenceState,
    /// The state before each of the last `SNAPSHOT_DEPTH` tokens, oldest first.
    snapshots: Vec<SequenceState>,
    /// The state before the sequence's last decode, and that decode's tokens kept since.
    checkpoint: SequenceState,
    window: Vec<usize>,
}

/// How many tokens a rollback of `tokens` takes back of the state: all of
/// them, or one fewer in the self-test's wrong build.
fn taken(tokens: usize) -> usize {
    if cfg!(feature = "model-rollback-one-short") {
        tokens - 1
    } else {
        tokens
    }
}

/// One request's engine: a pool of `SEQUENCES` slots, each sequence in the first free one.
pub struct Engine<'a> {
    model: &'a TinyModel,
    way: Way,
    slots: Vec<Option<(String, Sequence)>>,
}

impl<'a> Engine<'a> {
    pub fn new(model: &'a TinyModel, way: Way) -> Self {
        Engine {
            model,
            way,
            slots: (0..SEQUENCES).map(|_| None).collect(),
        }
    }

    fn slot(&self, name: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|held| held.as_ref().is_some_and(|(n, _)| n == name))
    }

    /// Whether `name` holds a slot.
    pub fn is_live(&self, name: &str) -> bool {
        self.slot(name).is_some()
    }

    /// How many slots are held.
    pub fn live(&self) -> usize {
        self.slots.iter().filter(|held| held.is_some()).count()
    }

    /// Decode a batch: each entry's tokens appended to its sequence, a new
    /// name in the first free slot; each token's logits, entry by entry.
    /// The caller has checked that the slots suffice.
    pub fn decode(&mut self, entries: &[(String, Vec<usize>)]) -> Vec<Vec<Vec<f64>>> {
        let mut logits = Vec::with_capacity(entries.len());
        for (name, tokens) in entries {
            let index = match self.slot(name) {
                Some(index) => index,
                None => {
                    let free = self
                        .slots
                        .iter()
                        .position(Option::is_none)
                        .expect("a free slot");
                    let empty = self.model.empty();
                    let fresh = Sequence {
                        state: empty.clone(),
                        snapshots: Vec::new(),
                        checkpoint: empty,
                        window: Vec::new(),
                    };
                    self.slots[free] = Some((name.clone(), fresh));
                    free
                }
            };
            let (_, sequence) = self.slots[index].as_mut().expect("a held slot");
            sequence.checkpoint = sequence.state.clone();
            sequence.window = tokens.clone();
            let mut rows = Vec::with_capacity(tokens.len());
            for &token in tokens {
                sequence.snapshots.push(sequence.state.clone());
                if sequence.snapshots.len() > SNAPSHOT_DEPTH {
                    sequence.snapshots.remove(0);
                }
                let (state, row) = self.model.token(&sequence.state, token);
                sequence.state = state;
                rows.push(row);
            }
            logits.push(rows);
        }
        logits
    }

    /// Take the last `tokens` tokens back from live sequence `name`, the
    /// engine's way; false when the way cannot reach that far (nothing changes).
    pub fn rollback(&mut self, name: &str, tokens: usize) -> bool {
        let index = self.slot(name).expect("a live sequence");
        let model = self.model;
        let (_, sequence) = self.slots[index].as_mut().expect("a held slot");
        match self.way {
            Way::Snapshot => {
                let kept = sequence.snapshots.len();
                if tokens > kept {
                    return false;
                }
                let back = taken(tokens);
                if back > 0 {
                    sequence.state = sequence.snapshots[kept - back].clone();
                }
                sequence.snapshots.truncate(kept - tokens);
            }
            Way::Checkpoint => {
                let decoded = sequence.window.len();
                if tokens > decoded {
                    return false;
                }
                let mut state = sequence.checkpoint.clone();
                for &token in &sequence.window[..decoded - taken(tokens)] {
                    state = model.token(&state, token).0;
                }
                sequence.state = state;
                sequence.window.truncate(decoded - tokens);
            }
        }
        true
    }

    /// End live sequence `name`: its slot is free.
    pub fn finish(&mut self, name: &str) {
        if let Some(index) = self.slot(name) {
            self.slots[index] = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_logits(model: &TinyModel, tokens: &[usize]) -> Vec<f64> {
        let mut state = model.empty();
        let mut logits = Vec::new();
        for &token in tokens {
            (state, logits) = model.token(&state, token);
        }
        logits
    }

    fn apart(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_logits_move_with_the_state() {
        let model = TinyModel::new();
        // The same last token after another history, or one token short.
        let after = last_logits(&model, &[1, 2, 3, 4, 5]);
        assert!(apart(&after, &last_logits(&model, &[9, 2, 3, 4, 5])) > 0.1);
        assert!(apart(&after, &last_logits(&model, &[1, 2, 3, 5])) > 0.1);
        assert_eq!(after.len(), VOCAB);
    }

    #[test]
    fn a_rollback_either_way_decodes_as_the_kept_tokens_alone() {
        let model = TinyModel::new();
        for way in [Way::Snapshot, Way::Checkpoint] {
            let mut engine = Engine::new(&model, way);
            engine.decode(&[("a".into(), vec![1, 2]), ("b".into(), vec![7])]);
            engine.decode(&[("b".into(), vec![8, 9]), ("a".into(), vec![3, 4, 5])]);
            assert!(engine.rollback("a", 2));
            let rows = engine.decode(&[("a".into(), vec![6])]);
            let plain = last_logits(&model, &[1, 2, 3, 6]);
            let wrong = cfg!(feature = "model-rollback-one-short");
            assert_eq!(rows[0][0] == plain, !wrong);
            // Past the window (checkpoint) or the depth (snapshot): refused.
            assert!(!engine.rollback("a", 5));
        }
    }
}
