// SPDX-License-Identifier: MIT OR Apache-2.0
//! An independent Rust implementation of the SSM verify-rollback contract
//! (SPEC.md), written against the clauses rather than copied from the
//! runtime module. Sizes are exact or `Overflow`, never wrapped.

pub mod model;
pub mod replay;

use std::fmt;
use std::str::FromStr;
#[cfg(not(feature = "racy-cell"))]
use std::sync::OnceLock;
#[cfg(feature = "racy-cell")]
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// How a partial accept rolls the recurrent state back (RB-MODE-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SsmRollbackMode {
    Snapshot = 0,
    Replay = 1,
}

impl SsmRollbackMode {
    pub fn name(self) -> &'static str {
        match self {
            SsmRollbackMode::Snapshot => "snapshot",
            SsmRollbackMode::Replay => "replay",
        }
    }
}

impl fmt::Display for SsmRollbackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The parse error's text is part of the contract (RB-PARSE-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown ssm-rollback-mode '{}' (valid: snapshot, replay)", self.0)
    }
}

impl FromStr for SsmRollbackMode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [SsmRollbackMode::Snapshot, SsmRollbackMode::Replay]
            .into_iter()
            .find(|mode| mode.name() == text)
            .ok_or_else(|| UnknownMode(text.to_owned()))
    }
}

/// A first-write-wins cell of a mode: the runtime's `OnceLock` (RB-CELL-1, RB-CELL-2).
#[cfg(not(feature = "racy-cell"))]
pub struct ModeCell(OnceLock<SsmRollbackMode>);

#[cfg(not(feature = "racy-cell"))]
impl ModeCell {
    pub const fn new() -> Self {
        ModeCell(OnceLock::new())
    }

    /// Store `mode` if the cell is empty; return the mode in force.
    pub fn set(&self, mode: SsmRollbackMode) -> SsmRollbackMode {
        *self.0.get_or_init(|| mode)
    }
}

/// The self-test's wrong cell, built only with `--features racy-cell`: a
/// check-then-set as a newcomer writes it, with no lock and no delay. Every
/// access is atomic, so the program is well defined; only the logic races.
#[cfg(feature = "racy-cell")]
pub struct ModeCell {
    written: AtomicBool,
    mode: AtomicU8,
}

#[cfg(feature = "racy-cell")]
impl ModeCell {
    pub const fn new() -> Self {
        ModeCell { written: AtomicBool::new(false), mode: AtomicU8::new(0) }
    }

    /// Wrong on purpose: two callers can both see the cell empty.
    pub fn set(&self, mode: SsmRollbackMode) -> SsmRollbackMode {
        if !self.written.load(Ordering::Relaxed) {
            self.mode.store(mode as u8, Ordering::Relaxed);
            self.written.store(true, Ordering::Relaxed);
        }
        match self.mode.load(Ordering::Relaxed) {
            0 => SsmRollbackMode::Snapshot,
            _ => SsmRollbackMode::Replay,
        }
    }
}

impl Default for ModeCell {
    fn default() -> Self {
        Self::new()
    }
}

static PUBLISHED: ModeCell = ModeCell::new();

/// Publish a mode; the first write of the process wins (RB-PUB-1).
pub fn set_ssm_rollback_mode(mode: SsmRollbackMode) -> SsmRollbackMode {
    PUBLISHED.set(mode)
}

/// The mode in force; a read before any write pins snapshot (RB-PUB-2).
pub fn ssm_rollback_mode() -> SsmRollbackMode {
    PUBLISHED.set(SsmRollbackMode::Snapshot)
}

/// A size whose exact value does not fit a 64-bit usize (RB-SIZE-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

/// Bytes of one replay row: BF16 qkvz values plus FP32 gate and beta per value head.
pub fn ssm_replay_row_bytes(qkvz_elems: u64, nv: u64) -> Result<u64, Overflow> {
    let qkvz = qkvz_elems.checked_mul(2).ok_or(Overflow)?;
    let gates = nv.checked_mul(8).ok_or(Overflow)?;
    qkvz.checked_add(gates).ok_or(Overflow)
}

/// Bytes of the replay ring: K-1 rows per slot and layer, K-1 never below zero.
pub fn ssm_replay_ring_bytes(
    num_ssm_layers: u64,
    row_bytes: u64,
    k_ceiling: u64,
    mtp_state_slots: u64,
) -> Result<u64, Overflow> {
    let factors = [mtp_state_slots, k_ceiling.saturating_sub(1), num_ssm_layers, row_bytes];
    // With a zero factor the exact product is zero, however large the others:
    // checking it first keeps an intermediate product from overflowing.
    if factors.contains(&0) {
        return Ok(0);
    }
    factors
        .iter()
        .try_fold(1u64, |product, &factor| product.checked_mul(factor).ok_or(Overflow))
}

/// Whether a speculative verify may enter: replay mode refuses (RB-VERIFY-2).
pub fn verify_entry_allowed(mode: SsmRollbackMode) -> bool {
    mode == SsmRollbackMode::Snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_is_exact() {
        assert_eq!("replay".parse(), Ok(SsmRollbackMode::Replay));
        assert_eq!(
            "Replay".parse::<SsmRollbackMode>().unwrap_err().to_string(),
            "unknown ssm-rollback-mode 'Replay' (valid: snapshot, replay)"
        );
    }

    #[test]
    fn sizes_are_exact_or_overflow() {
        assert_eq!(ssm_replay_ring_bytes(0, u64::MAX, u64::MAX, u64::MAX), Ok(0));
        assert_eq!(ssm_replay_ring_bytes(u64::MAX, 1, 2, 1), Ok(u64::MAX));
        assert_eq!(ssm_replay_ring_bytes(u64::MAX, 1, 3, 1), Err(Overflow));
        assert_eq!(ssm_replay_ring_bytes(5, 7, 0, 3), Ok(0));
        assert_eq!(ssm_replay_row_bytes(u64::MAX / 2, 0), Ok(u64::MAX - 1));
        assert_eq!(ssm_replay_row_bytes(u64::MAX / 2 + 1, 0), Err(Overflow));
    }
}
