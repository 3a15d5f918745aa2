//! The fixed window counter: at most `L` per window, reset at each boundary.
//!
//! Two placements, as the seeds describe:
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
//!  63                      24 23                 0
//! +--------------------------+--------------------+
//! | window tag (40 bits)     | admitted (24 bits) |      default
//! +--------------------------+----------+---------+
//! | window tag (40 bits)     | admitted | excess  |      with `count_excess`: 12 + 12 bits
//! +--------------------------+----------+---------+
//! ```
//!
//! - Aligned: the tag is `⌊now / W⌋ mod 2^40`.
//! - First request: the tag is the window's start in quanta `q = ⌈W / 2^20⌉` ns,
//!   `mod 2^40`; the start is rounded down to a quantum and the window lasts
//!   `⌈W / q⌉·q ≥ W`. A window is open while `admitted > 0`.
//! - Tags are compared as signed 40-bit differences. A tag ahead of now (time went
//!   backwards) is treated as the current window, so going back can never reset the
//!   count. A tag can only alias after `2^39` idle windows, and aliasing makes an old
//!   count look current: it can only admit less, never more.
//! - Limits: `L ≤ 2^24 − 1` (16,777,215), or `L ≤ 4,095` with `count_excess`;
//!   `W ≤ 2^62` ns. The excess (rejected units this window) saturates at 4,095 and
//!   never changes who is admitted: with it on, a rejection writes the excess.

use crate::decision::check_range;
use crate::limiter::{Algorithm, Transition};
use crate::window::{tag, tag_delta};
use crate::{CheckError, Decision, Quota, QuotaError};

const TAG_BITS: u32 = 40;
const COUNT_BITS: u32 = 24;
const SPLIT_BITS: u32 = 12;
const QUANTA_PER_WINDOW_BITS: u32 = 20;

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
    quantum: u64,
    quanta: u64,
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
        let max = (1 << COUNT_BITS) - 1;
        if quota.limit() > max {
            return Err(QuotaError::LimitTooLarge {
                limit: quota.limit(),
                max,
            });
        }
        let window = quota.period_nanos();
        let quantum = window.div_ceil(1 << QUANTA_PER_WINDOW_BITS);
        Ok(Self {
            limit: quota.limit(),
            window,
            placement,
            count_excess: false,
            quantum,
            quanta: window.div_ceil(quantum),
        })
    }

    /// Also count rejected units, as an excess figure ([`excess_in`](Self::excess_in)).
    /// Needs `limit ≤ 4,095`.
    pub const fn count_excess(self) -> Result<Self, QuotaError> {
        let max = (1 << SPLIT_BITS) - 1;
        if self.limit > max {
            return Err(QuotaError::LimitTooLarge {
                limit: self.limit,
                max,
            });
        }
        Ok(Self {
            count_excess: true,
            ..self
        })
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
        let low = state & ((1 << COUNT_BITS) - 1);
        let (admitted, excess) = if self.count_excess {
            (low >> SPLIT_BITS, low & ((1 << SPLIT_BITS) - 1))
        } else {
            (low, 0)
        };
        Fields {
            tag: state >> COUNT_BITS,
            admitted,
            excess,
        }
    }

    fn encode(&self, f: Fields) -> u64 {
        let low = if self.count_excess {
            (f.admitted << SPLIT_BITS) | f.excess.min((1 << SPLIT_BITS) - 1)
        } else {
            f.admitted
        };
        (f.tag << COUNT_BITS) | low
    }

    /// The window that holds `now`: `(tag, whether it is the stored one, its end)`.
    /// `None` for an absent window in first-request mode (opened by this request).
    fn locate(&self, f: Fields, now: u64) -> Option<(u64, bool, u64)> {
        match self.placement {
            Placement::Aligned => {
                let index = now / self.window;
                let current = tag(index, TAG_BITS);
                let d = tag_delta(current, f.tag, TAG_BITS);
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
                let d = tag_delta(tag(q_now, TAG_BITS), f.tag, TAG_BITS);
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

fn clamp(end: i128) -> u64 {
    end.clamp(0, u64::MAX as i128) as u64
}

impl Algorithm for FixedWindow {
    /// Takes `cost` off the count if the window that admitted the request is still
    /// the stored one; after a rollover there is nothing to give back.
    fn refund(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        let f = self.decode(state);
        match self.locate(f, now) {
            Some((_, true, _)) => Some(self.encode(Fields {
                admitted: f.admitted.saturating_sub(cost),
                ..f
            })),
            _ => Some(state),
        }
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    #[inline]
    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        check_range(now, cost, self.limit)?;
        let f = self.decode(state);
        let (tag_now, same, end) = self.locate(f, now).unwrap_or_else(|| {
            let q_now = now / self.quantum;
            (
                tag(q_now, TAG_BITS),
                false,
                q_now * self.quantum + self.quanta * self.quantum,
            )
        });
        let (admitted, excess) = if same { (f.admitted, f.excess) } else { (0, 0) };
        let left = self.limit - admitted;
        if cost == 0 {
            let reset = if admitted > 0 { end - now } else { 0 };
            return Ok(Transition::keep(Decision::new(
                true, self.limit, left, 1, 0, reset,
            )));
        }
        if cost > left {
            // Only the next window can hold it; `end > now` because `same` holds here.
            let d = Decision::new(false, self.limit, left, 1, end - now, end - now);
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
        let d = Decision::new(true, self.limit, left - cost, 1, 0, end - now);
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
        // Seed 003: 1 at 0 s, 2 at 5 s, 2 at 15 s, 1 at 25 s (rejected), window 2 at 30 s.
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
        // The start is rounded down to a quantum q = ⌈W / 2^20⌉ (9,537 ns here).
        let r = w.decide(s, 12 * S, 1).unwrap().decision.retry_after_nanos();
        assert!(r.abs_diff(5 * S) < 9_537, "{r}");
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
        assert!(matches!(
            FixedWindow::new(Quota::per_second(5000).unwrap())
                .unwrap()
                .count_excess(),
            Err(QuotaError::LimitTooLarge { max: 4095, .. })
        ));
    }
}
