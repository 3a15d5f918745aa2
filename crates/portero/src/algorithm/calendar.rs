//! Quotas over long calendar periods: "500,000 per day", "2 million per month".
//!
//! A quota is a separate check from the rate limit (stack them with
//! [`stack::check_all`](crate::keyed::stack::check_all)): a client that respects its rate the
//! whole time can still spend a day's quota early. At a steady 10 per second, 500,000
//! per day is used up after 50,000 s (13.9 hours) — tested.
//!
//! Periods are UTC days, UTC calendar months, or any fixed length; time is Unix time in
//! nanoseconds (use [`UnixClock`](crate::clock::UnixClock) or pass it explicitly). The
//! [`Decision`] carries the quota (`limit`), what is left (`remaining`), and the time to
//! the next period (`reset_after`; also `retry_after` once the quota is spent).
//!
//! # State: one `u64`
//!
//! ```text
//!  63                    u u-1                                  0
//! +-----------------------+--------------------------------------+
//! | period index          | used units (u bits)                  |
//! +-----------------------+--------------------------------------+
//! ```
//!
//! The index is the period's whole number since 1970 (days, months, or fixed periods),
//! never truncated (see `window.rs`): it gets the bits every index up to
//! [`MAX_TIME_NANOS`](crate::quota::MAX_TIME_NANOS) needs (17 for days and months, 34 for
//! fixed one-second periods), and `used` the rest (`u` = 47 for days and months).
//! A stored period ahead of now (time went backwards) still counts as the current one,
//! so going back never restores quota; no idle gap can alias an old period to a
//! current one. Limits: quota `< 2^u`.

use crate::admission::Admission;
use crate::algorithm::Algorithm;
use crate::decision::check_range;
use crate::decision::{CheckError, Decision};
use crate::quota::QuotaError;
use crate::window::{index_bits, index_delta, mask};
use crate::word::Transition;

const DAY: u64 = 86_400_000_000_000;

/// How long a quota period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// UTC days, from midnight to midnight.
    Day,
    /// UTC calendar months, from the 1st at midnight.
    Month,
    /// Fixed periods of this many nanoseconds from the Unix epoch.
    Fixed(u64),
}

/// A quota of `limit` units per calendar [`Period`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarQuota {
    limit: u64,
    period: Period,
    /// Bits of the used count (`u` in the module docs).
    used_bits: u32,
}

impl CalendarQuota {
    /// `limit` units per `period`.
    pub const fn new(limit: u64, period: Period) -> Result<Self, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroRate);
        }
        // Months are fewer than days, so a day's index bits cover both.
        let unit = match period {
            Period::Fixed(0) => return Err(QuotaError::ZeroPeriod),
            Period::Fixed(p) => p,
            Period::Day | Period::Month => DAY,
        };
        let used_bits = 64 - index_bits(unit);
        if limit > mask(used_bits) {
            return Err(QuotaError::LimitTooLarge {
                limit,
                max: mask(used_bits),
            });
        }
        Ok(Self {
            limit,
            period,
            used_bits,
        })
    }

    /// `limit` per UTC day.
    pub const fn per_day(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Period::Day)
    }

    /// `limit` per UTC calendar month.
    pub const fn per_month(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Period::Month)
    }

    /// The period holding `now`: `(index since 1970, start, end)` in Unix ns.
    pub fn period_at(&self, now: u64) -> (u64, u64, u64) {
        match self.period {
            Period::Day => {
                let i = now / DAY;
                (i, i * DAY, (i + 1) * DAY)
            }
            Period::Fixed(p) => {
                let i = now / p;
                (i, i * p, (i + 1) * p)
            }
            Period::Month => {
                let (y, m, _) = civil_from_days(now / DAY);
                let index = (y - 1970) as u64 * 12 + (m - 1) as u64;
                let start = days_from_civil(y, m, 1) * DAY;
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (index, start, days_from_civil(ny, nm, 1) * DAY)
            }
        }
    }

    /// Units used in the period holding `now`, for the state word `state`.
    pub fn used_in(&self, state: u64, now: u64) -> u64 {
        let (index, _, _) = self.period_at(now);
        if index_delta(index, state >> self.used_bits) <= 0 {
            state & mask(self.used_bits)
        } else {
            0
        }
    }
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic Gregorian.
/// (The standard era-based conversion: 400-year eras of 146,097 days.)
fn civil_from_days(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01, for dates from 1970 on.
fn days_from_civil(y: i64, m: u32, d: u32) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) as u64
}

impl Algorithm for CalendarQuota {
    fn capacity(&self) -> u64 {
        self.limit
    }

    /// Takes the admission's units off the count while the period that counted them
    /// is still the stored one; after a rollover there is nothing to give back. As
    /// for an aligned [`FixedWindow`](crate::algorithm::fixed_window::FixedWindow), a request that opened its
    /// period over the previous period's count gives nothing back once others came
    /// since (short by at most one request's units per period).
    fn refund(&self, state: u64, admission: &Admission, _now: u64) -> Option<u64> {
        let (Some(before), Some(after)) = (admission.before(), admission.after()) else {
            return Some(state);
        };
        let counted = after >> self.used_bits;
        // A part of a request that stays (a settlement): the opener rule does not apply.
        let opened = !admission.keeps_request()
            && before >> self.used_bits != counted
            && before & mask(self.used_bits) > 0;
        // Nothing while the word may have been reset or replaced since (the ledger
        // says everything went back), or its count saturated (a charge past what the
        // count holds: it no longer tells what is counted).
        let used = state & mask(self.used_bits);
        let kept = admission.moved_since().is_none() || used >= mask(self.used_bits);
        if !opened && !kept && counted == state >> self.used_bits {
            Some(state - used.min(admission.cost()))
        } else {
            Some(state)
        }
    }

    /// Counts the units in the period current at `now`, past the quota (up to what
    /// the count's bits hold): the period refuses until its end.
    fn charge(&self, state: u64, now: u64, cost: u64) -> Option<u64> {
        let (t, used, _) = self.counting(state, now);
        Some((t << self.used_bits) | used.saturating_add(cost).min(mask(self.used_bits)))
    }

    fn decide(&self, state: u64, now: u64, cost: u64) -> Result<Transition, CheckError> {
        check_range(now, cost, self.limit)?;
        let (t, used, end) = self.counting(state, now);
        // Saturating: a quota lowered at run time may sit below what was used.
        let left = self.limit.saturating_sub(used);
        let to_end = end - now;
        let reset = if used > 0 { to_end } else { 0 };
        if cost == 0 {
            return Ok(Transition::keep(Decision::admitted(
                self.limit, left, reset,
            )));
        }
        if cost > left {
            let d = Decision::rejected(self.limit, left, to_end, to_end);
            return Ok(Transition::keep(d));
        }
        let d = Decision::admitted(self.limit, left - cost, to_end);
        Ok(Transition::write(d, (t << self.used_bits) | (used + cost)))
    }
}

impl CalendarQuota {
    /// The period that counts at `now` as `state` holds it: its index, what it used
    /// (zero for one not yet stored), and its end.
    fn counting(&self, state: u64, now: u64) -> (u64, u64, u64) {
        let (index, _, end) = self.period_at(now);
        let (stored, used) = (state >> self.used_bits, state & mask(self.used_bits));
        let d = index_delta(index, stored);
        let counting = used > 0 && d <= 0;
        if counting && d < 0 {
            // Time went backwards into an earlier period: keep counting the stored one
            // until its end (computed from its index).
            (stored, used, self.end_of(stored))
        } else if counting {
            (stored, used, end)
        } else {
            (index, 0, end)
        }
    }

    fn end_of(&self, index: u64) -> u64 {
        match self.period {
            Period::Day => (index + 1).saturating_mul(DAY),
            Period::Fixed(p) => (index + 1).saturating_mul(p),
            Period::Month => {
                let next = index + 1;
                let (y, m) = (1970 + (next / 12) as i64, (next % 12) as u32 + 1);
                days_from_civil(y, m, 1).saturating_mul(DAY)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        for days in [0, 59, 60, 365, 10_957, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(2026, 11, 30), 20_787);
    }

    #[test]
    fn months_have_their_real_lengths() {
        let q = CalendarQuota::per_month(10).unwrap();
        let feb_2028 = days_from_civil(2028, 2, 10) * DAY;
        let (_, start, end) = q.period_at(feb_2028);
        assert_eq!((end - start) / DAY, 29);
        let (_, start, end) = q.period_at(days_from_civil(2026, 12, 31) * DAY + 1);
        assert_eq!(start, days_from_civil(2026, 12, 1) * DAY);
        assert_eq!(end, days_from_civil(2027, 1, 1) * DAY);
    }
}
