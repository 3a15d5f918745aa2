//! The fixed window counter: at most `L` per window, reset at each boundary.
//!
//! Two placements (see `docs/guide.md`):
//! - [`Placement::Aligned`]: window `k` is `[k·W, (k+1)·W)` on the caller's time axis;
//!   an instant exactly on a boundary belongs to the window that is starting. Every
//!   client's window turns over at the same instant.
//! - [`Placement::FirstRequest`]: a window opens at a client's first request after the
//!   previous window ended, and lasts `W` (Redis's `INCR` + `EXPIRE` on first use).
//!
//! Either way a client can get `2L` through in a span much shorter than `W` (`L` just
//! before a boundary and `L` just after); never more than `2L` in any span of `W`.
//!
//! # State: one `u64`
//!
//! ```text
//!  63                       n n-1                 0
//! +--------------------------+--------------------+
//! | window index             | admitted (n bits)  |      default
//! +--------------------------+----------+---------+
//! | window index             | admitted | excess  |      with `count_excess`: n/2 for excess
//! +--------------------------+----------+---------+
//! ```
//!
//! The index is whole, never truncated (see `window.rs`): it counts
//! units of `u` ns and gets the bits every index up to
//! [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) needs; the count gets the rest, `n = 64 −
//! bits(MAX_TIME / u)`. The layout depends on `W` and the placement alone, so changing
//! the limit at run time keeps every word's meaning.
//! - Aligned: `u = W` and the index is `⌊now / W⌋` (`n` = 30 bits at `W` = 1 s).
//! - First request: the index is the window's start in quanta `u = ⌈W / 2^k⌉` with
//!   `k = min(20, (64 − bits(MAX_TIME / W)) / 3)` (a thousandth of `W` at `W` = 1 s,
//!   `n` = 20 bits); the start is rounded down to a quantum and the window lasts
//!   `⌈W / u⌉·u ≥ W`. A window is open while `admitted > 0`.
//! - Indices are compared as plain differences. An index ahead of now (time went
//!   backwards) is treated as the current window, so going back can never reset the
//!   count; no idle gap in the supported range can alias an old window to a current
//!   one.
//! - Limits: `L < 2^n`, or `L < 2^(n − n/2)` with `count_excess`; `W ≤ 2^62` ns; a
//!   larger `L` is [`QuotaError::LimitTooLarge`]. The excess (rejected units this
//!   window) saturates at `2^(n/2) − 1` and never changes who is admitted: with it on,
//!   a rejection writes the excess.

use crate::admission::Admission;
use crate::algorithm::Algorithm;
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::{Quota, QuotaError};
use crate::window::{index_bits, index_delta, mask};
use crate::word::Transition;

/// At most `2^20` quanta per first-request window.
const MAX_QUANTA_BITS: u32 = 20;

/// Where windows start. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `[k·W, (k+1)·W)` on the time axis: the same boundaries for every client.
    Aligned,
    /// A window opens at the first request after the previous one closed.
    FirstRequest,
}

/// The fixed window counter over a [`Quota`]'s limit and period (its burst is unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    window: u64,
    placement: Placement,
    count_excess: bool,
    /// The index unit `u`: `W` when aligned, the quantum for first-request windows.
    quantum: u64,
    /// Quanta per window (1 when aligned).
    quanta: u64,
    /// Bits below the index (`n` in the module docs).
    low_bits: u32,
}

/// One decoded state word.
#[derive(Debug, Clone, Copy)]
struct Fields {
    tag: u64,
    admitted: u64,
    excess: u64,
}

impl FixedWindow {
    /// `quota.limit()` per `quota.period()`, windows aligned to the time axis.
    pub const fn new(quota: Quota) -> Result<Self, QuotaError> {
        Self::with_placement(quota, Placement::Aligned)
    }

    /// `quota.limit()` per `quota.period()` with the given placement.
    pub const fn with_placement(quota: Quota, placement: Placement) -> Result<Self, QuotaError> {
        let window = quota.period_nanos();
        let quantum = match placement {
            Placement::Aligned => window,
            Placement::FirstRequest => {
                // Split the bits the index does not need between a finer start (k) and
                // the count (the other two thirds).
                let spare = (64 - index_bits(window)) / 3;
                let k = if spare < MAX_QUANTA_BITS {
                    spare
                } else {
                    MAX_QUANTA_BITS
                };
                window.div_ceil(1 << k)
            }
        };
        Self {
            limit: quota.limit(),
            window,
            placement,
            count_excess: false,
            quantum,
            quanta: window.div_ceil(quantum),
            low_bits: 64 - index_bits(quantum),
        }
        .checked()
    }

    /// Bits of the admitted count, and of the excess.
    const fn split(&self) -> (u32, u32) {
        let excess = if self.count_excess {
            self.low_bits / 2
        } else {
            0
        };
        (self.low_bits - excess, excess)
    }

    /// `self` if its limit fits the admitted count's bits.
    const fn checked(self) -> Result<Self, QuotaError> {
        let max = mask(self.split().0);
        if self.limit > max {
            return Err(QuotaError::LimitTooLarge {
                limit: self.limit,
                max,
            });
        }
        Ok(self)
    }

    /// Also count rejected units, as an excess figure ([`excess_in`](Self::excess_in)).
    /// Takes half the count's bits (see the module docs for the limits).
    pub const fn count_excess(self) -> Result<Self, QuotaError> {
        Self {
            count_excess: true,
            ..self
        }
        .checked()
    }

    /// The window length in nanoseconds.
    pub const fn window_nanos(&self) -> u64 {
        self.window
    }

    /// The placement.
    pub const fn placement(&self) -> Placement {
        self.placement
    }

    /// Rejected units in the window that is current at `now` (0 unless
    /// [`count_excess`](Self::count_excess) is on).
    pub fn excess_in(&self, state: u64, now: u64) -> u64 {
        let f = self.decode(state);
        match self.locate(f, now) {
            Some((_, true, _)) => f.excess,
            _ => 0,
        }
    }

    fn decode(&self, state: u64) -> Fields {
        let (_, excess_bits) = self.split();
        let low = state & mask(self.low_bits);
        Fields {
            tag: state >> self.low_bits,
            admitted: low >> excess_bits,
            excess: low & mask(excess_bits),
        }
    }

    fn encode(&self, f: Fields) -> u64 {
        let (_, excess_bits) = self.split();
        let low = (f.admitted << excess_bits) | f.excess.min(mask(excess_bits));
        (f.tag << self.low_bits) | low
    }

    /// The window that holds `now`: `(tag, whether it is the stored one, its end)`.
    /// `None` for an absent window in first-request mode (opened by this request).
    fn locate(&self, f: Fields, now: u64) -> Option<(u64, bool, u64)> {
        match self.placement {
            Placement::Aligned => {
                let index = now / self.window;
                let current = index;
                let d = index_delta(current, f.tag);
                if d <= 0 && (f.admitted > 0 || f.excess > 0) {
                    // The stored window (or one ahead of us, if time went backwards).
                    let end = (index as i128 - d as i128 + 1) * self.window as i128;
                    Some((f.tag, true, clamp(end)))
                } else {
                    Some((current, false, (index + 1) * self.window))
                }
            }
            Placement::FirstRequest => {
                let q_now = now / self.quantum;
                let d = index_delta(q_now, f.tag);
                if f.admitted > 0 && d < self.quanta as i64 {
                    let start = (q_now as i128 - d as i128) * self.quantum as i128;
                    let end = start + (self.quanta * self.quantum) as i128;
                    Some((f.tag, true, clamp(end)))
                } else {
                    None
                }
            }
        }
    }
}

impl FixedWindow {
    /// The window current at `now` as `state` holds it: its tag, admitted and
    /// rejected counts (zero for a window not yet stored), and its end.
    #[inline]
    fn current(&self, state: u64, now: u64) -> (u64, u64, u64, u64) {
        let f = self.decode(state);
        let (tag_now, same, end) = self.locate(f, now).unwrap_or_else(|| {
            let q_now = now / self.quantum;
            (
                q_now,
                false,
                q_now * self.quantum + self.quanta * self.quantum,
            )
        });
        let (admitted, excess) = if same { (f.admitted, f.excess) } else { (0, 0) };
        (tag_now, admitted, excess, end)
    }
}

fn clamp(end: i128) -> u64 {
    end.clamp(0, u64::MAX as i128) as u64
}

impl Algorithm for FixedWindow {
    /// Takes the admission's units off the count while the window that counted them
    /// is still the stored one; after a rollover there is nothing to give back.
    ///
    /// A request that opened its window gives nothing back once others came since:
    /// a first-request window lies where that request put it (taking the request
    /// back cannot move it to where the next one would have), and an aligned window
    /// opened over the previous window's counts made checks dated back into that
    /// window count in this one (time going backwards), which the twin that never saw
    /// the request would have counted in the previous one. Short by at most one
    /// request's units per window; exact otherwise.
    fn refund(&self, state: u64, admission: &Admission, _now: u64) -> Option<u64> {
        let (Some(before), Some(after)) = (admission.before(), admission.after()) else {
            // Without the word, which window counted the units is unknown.
            return Some(state);
        };
        let (f, b, counted) = (
            self.decode(state),
            self.decode(before),
            self.decode(after).tag,
        );
        // Nothing while the word may have been reset or replaced since (the ledger
        // says everything went back), or its count saturated (a charge past what the
        // count holds: it no longer tells what is counted).
        let saturated = f.admitted >= mask(self.split().0);
        if f.tag != counted || f.admitted == 0 || admission.moved_since().is_none() || saturated {
            return Some(state);
        }
        // A part of a request that stays (a settlement) leaves the window where it
        // is: the opener rule does not apply.
        let opened = !admission.keeps_request()
            && match self.placement {
                Placement::FirstRequest => b.tag != counted || b.admitted == 0,
                Placement::Aligned => b.tag != counted && b.admitted > 0,
            };
        if opened {
            return Some(state);
        }
        Some(self.encode(Fields {
            admitted: f.admitted - f.admitted.min(admission.cost()),
            ..f
        }))
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    /// Counts the units in the window current at `now`, past the limit (up to what
    /// the count's bits hold): the window refuses until its end, and its debt ends
    /// with it. A window placed by its first request is never opened by a charge:
    /// the admission the charge follows opened one, and once that window has ended
    /// its units are gone with it — as for a twin charged them at the start; a
    /// window opened here would lie earlier than that twin's next one.
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        if self.placement == Placement::FirstRequest
            && self.locate(self.decode(state), now).is_none()
        {
            return Some(state);
        }
        let (tag, admitted, excess, _) = self.current(state, now);
        let admitted = admitted.saturating_add(cost).min(mask(self.split().0));
        Some(self.encode(Fields {
            tag,
            admitted,
            excess,
        }))
    }

    #[inline]
    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        check_range(now, cost, self.limit)?;
        let (tag_now, admitted, excess, end) = self.current(state, now);
        // Saturating: a limit lowered at run time may sit below what was admitted.
        let left = self.limit.saturating_sub(admitted);
        if cost == 0 {
            let reset = if admitted > 0 { end - now } else { 0 };
            return Ok(Transition::keep(Decision::admitted(
                self.limit, left, reset,
            )));
        }
        if cost > left {
            // Only the next window can hold it; `end > now` because `same` holds here.
            let d = Decision::rejected(self.limit, left, end - now, end - now);
            if self.count_excess {
                let next = Fields {
                    tag: tag_now,
                    admitted,
                    excess: excess.saturating_add(cost),
                };
                return Ok(Transition::write(d, self.encode(next)));
            }
            return Ok(Transition::keep(d));
        }
        let next = Fields {
            tag: tag_now,
            admitted: admitted + cost,
            excess,
        };
        let d = Decision::admitted(self.limit, left - cost, end - now);
        Ok(Transition::write(d, self.encode(next)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn run(w: &FixedWindow, times: &[u64]) -> (u64, Vec<bool>) {
        let mut state = w.initial_state();
        let out = times
            .iter()
            .map(|&t| {
                let tr = w.decide(state, t, 1).unwrap();
                if let Some(n) = tr.next {
                    state = n;
                }
                tr.decision.is_allowed()
            })
            .collect();
        (state, out)
    }

    #[test]
    fn seed_table_five_per_thirty_seconds() {
        // A parking lot of five: 1 at 0 s, 2 at 5 s, 2 at 15 s, 1 at 25 s (rejected), window 2 at 30 s.
        let w = FixedWindow::new(Quota::from_nanos(5, 30 * S).unwrap()).unwrap();
        let (_, got) = run(&w, &[0, 5 * S, 5 * S, 15 * S, 15 * S, 25 * S, 30 * S]);
        assert_eq!(got, [true, true, true, true, true, false, true]);
    }

    #[test]
    fn boundary_belongs_to_the_new_window_and_retry_points_at_it() {
        let w = FixedWindow::new(Quota::from_nanos(1, 10 * S).unwrap()).unwrap();
        let t = w.decide(0, 3 * S, 1).unwrap();
        let s = t.next.unwrap();
        let r = w.decide(s, 9 * S, 1).unwrap();
        assert!(!r.decision.is_allowed());
        assert_eq!(r.decision.retry_after_nanos(), S);
        assert!(w.decide(s, 10 * S, 1).unwrap().decision.is_allowed());
        assert!(!w.decide(s, 10 * S - 1, 1).unwrap().decision.is_allowed());
    }

    #[test]
    fn first_request_placement_starts_at_the_first_request() {
        let q = Quota::from_nanos(2, 10 * S).unwrap();
        let w = FixedWindow::with_placement(q, Placement::FirstRequest).unwrap();
        let (s, got) = run(&w, &[7 * S, 8 * S, 12 * S]);
        assert_eq!(got, [true, true, false], "window [7 s, 17 s)");
        // The start is rounded down to a quantum q = ⌈W / 2^11⌉ (4,882,813 ns here).
        let r = w.decide(s, 12 * S, 1).unwrap().decision.retry_after_nanos();
        assert!(r.abs_diff(5 * S) < 4_882_813, "{r}");
        assert!(w.decide(s, 12 * S + r, 1).unwrap().decision.is_allowed());
        assert!(!w
            .decide(s, 12 * S + r - 1, 1)
            .unwrap()
            .decision
            .is_allowed());
    }

    #[test]
    fn time_going_backwards_never_resets_the_count() {
        let w = FixedWindow::new(Quota::from_nanos(2, 10 * S).unwrap()).unwrap();
        let (s, got) = run(&w, &[25 * S, 26 * S]);
        assert_eq!(got, [true, true]);
        for back in [19 * S, 5 * S, 0] {
            let d = w.decide(s, back, 1).unwrap().decision;
            assert!(!d.is_allowed());
            assert_eq!(back + d.retry_after_nanos(), 30 * S);
        }
    }

    #[test]
    fn excess_counts_rejections_without_changing_admissions() {
        let q = Quota::from_nanos(3, 10 * S).unwrap();
        let plain = FixedWindow::new(q).unwrap();
        let counting = plain.count_excess().unwrap();
        let times = [0, 1, 2, 3, 4, 5, 10 * S, 10 * S + 1];
        let (_, a) = run(&plain, &times);
        let (s, b) = run(&counting, &times);
        assert_eq!(a, b);
        let (s6, _) = run(&counting, &times[..6]);
        assert_eq!(counting.excess_in(s6, 5), 3);
        assert_eq!(counting.excess_in(s, 10 * S + 1), 0);
        // W = 1 s: 30 bits below the index, 15 of them for the excess.
        assert!(matches!(
            FixedWindow::new(Quota::per_second(40_000).unwrap())
                .unwrap()
                .count_excess(),
            Err(QuotaError::LimitTooLarge { max: 32_767, .. })
        ));
    }
}
