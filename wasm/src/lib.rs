//! WebAssembly bindings for CDN edge workers.
//!
//! A thin layer: it turns JavaScript numbers into portero's integer units, checks them,
//! and hands back the same `Decision` every portero limiter gives. No algorithm logic
//! lives here. The npm package (`js/index.js`) wraps these raw classes in a friendlier
//! API with option objects and response headers.
//!
//! Every input from JavaScript is validated here, because a panic in wasm traps and
//! kills the whole isolate: NaN, ±Infinity, negative or fractional costs, missing
//! arguments (which arrive as NaN) and absurd quotas all become a thrown `Error` with a
//! clear message (a check's bad `now` or `cost` a refusal whose outcome names it, which
//! the JS wrapper throws for).
//!
//! Time always comes from the caller, in milliseconds (`Date.now()`, or
//! `performance.now()`: fractions are kept to the nanosecond). Workers freeze the clock
//! during a request, so a limiter must never read time itself.
#![deny(missing_docs)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use portero::algorithm::kept::KeptPlaces;
use portero::keyed::RandomState;
use portero::{
    Admission, AlgorithmName, AnyAlgorithm, AnyAlgorithmError, CheckError, Decision, Fingerprint,
    KeyedError, KeyedLimiter, ManualClock, Overflow, Quota, QuotaError, SlotHint, MAX_TIME_NANOS,
};
use wasm_bindgen::prelude::*;

mod held;
mod single;
use held::Held;
use single::Single;

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

// Every message is a static string: formatting machinery (numbers, padding) would add
// kilobytes to the module. The JS wrapper adds the offending value to the message.
fn err(msg: &'static str) -> JsError {
    JsError::new(msg)
}

fn quota_err(e: QuotaError) -> JsError {
    err(match e {
        QuotaError::ZeroRate => "limit must be at least 1 per period",
        QuotaError::ZeroPeriod => "periodMs must be longer than 0",
        QuotaError::ZeroBurst => "burst must be at least 1",
        QuotaError::RateTooHigh { .. } => "more than one request per nanosecond: rate too high",
        QuotaError::SpanTooLong => "burst x period spans more than 146 years: too large",
        QuotaError::LimitTooLarge { .. } => "limit too large for this algorithm's state word",
        _ => "invalid quota",
    })
}

/// A whole, non-negative JavaScript number (≤ 2^53 − 1).
fn whole_of(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_SAFE).then_some(v as u64)
}

/// [`whole_of`], or an Error: `msg` names the argument.
fn whole(msg: &'static str, v: f64) -> Result<u64, JsError> {
    whole_of(v).ok_or_else(|| err(msg))
}

/// The first nanosecond past portero's time range, 2^63: exact as an `f64`, where
/// `MAX_TIME_NANOS` is not (it rounds up to this very number).
const PAST_TIME_RANGE: f64 = (MAX_TIME_NANOS + 1) as f64;

/// Milliseconds → nanoseconds (to the nearest, ties to even: one wasm instruction),
/// within portero's time range. NaN fails both comparisons.
fn nanos_of(ms: f64) -> Option<u64> {
    let ns = (ms * 1e6).round_ties_even();
    (ms >= 0.0 && ns < PAST_TIME_RANGE).then_some(ns as u64)
}

/// [`nanos_of`], or an Error: `msg` names the argument.
fn nanos(msg: &'static str, ms: f64) -> Result<u64, JsError> {
    nanos_of(ms).ok_or_else(|| err(msg))
}

/// The most keys one `Keyed` table may hold: 1,048,576, a table of about 32 MiB (≈ 31
/// bytes a key). A Worker has 128 MB and wasm memory never shrinks, so a larger table
/// would leave too little for everything else; the JS wrapper reads this cap.
const MAX_KEYS: u32 = 1 << 20;

/// The most keys a `Keyed` table may hold (see the `MAX_KEYS` budget).
#[wasm_bindgen(js_name = maxKeys)]
pub fn max_keys() -> u32 {
    MAX_KEYS
}

fn quota(limit: f64, period_ms: f64, burst: f64) -> Result<Quota, JsError> {
    let limit = whole("limit must be a whole number from 1 to 2^53 - 1", limit)?;
    let period = nanos(
        "periodMs must be a finite, positive number of milliseconds",
        period_ms,
    )?;
    let burst = whole("burst must be a whole number from 1 to 2^53 - 1", burst)?;
    Quota::from_nanos(limit, period)
        .and_then(|q| q.with_burst(burst))
        .map_err(quota_err)
}

/// The algorithms this binding offers: every one-word algorithm that admits at once
/// (the leaky queue's delays have no place in the JS decision).
const EDGE: [AlgorithmName; 5] = [
    AlgorithmName::Gcra,
    AlgorithmName::TokenBucket,
    AlgorithmName::FixedWindow,
    AlgorithmName::SlidingWindowCounter,
    AlgorithmName::LeakyMeter,
];

/// The names of the algorithms this binding offers, comma-separated, spelled as the
/// core spells them (the JS wrapper's list comes from here).
#[wasm_bindgen(js_name = algorithmNames)]
pub fn algorithm_names() -> String {
    EDGE.map(AlgorithmName::as_str).join(",")
}

const UNKNOWN_ALGORITHM: &str =
    "unknown algorithm: use gcra, token-bucket, fixed-window, sliding-window-counter or leaky-meter";

/// The algorithm `name` for `q`, if this binding offers it.
fn algorithm_for(name: &str, q: Quota) -> Result<AnyAlgorithm, JsError> {
    let name = AlgorithmName::parse(name)
        .filter(|n| EDGE.contains(n))
        .ok_or_else(|| err(UNKNOWN_ALGORITHM))?;
    AnyAlgorithm::new(name, q).map_err(|e| match e {
        AnyAlgorithmError::Quota(e) => quota_err(e),
        _ => err("not a one-word algorithm"),
    })
}

/// The last decision, in a buffer of linear memory the JS wrapper reads through a
/// `Float64Array` right after each call: `[limit, remaining, retry-after ms,
/// reset-after ms, outcome]` (`Field` below; the outcome one of the `OUTCOME_*`
/// codes), each an `f64`'s bits. No objects are built, no getter is called (four calls
/// into wasm cost more than the check itself), and no exception is thrown through wasm
/// (which would skip the glue that frees a key string). The view must be made again
/// when memory grows (its buffer is then detached: the wrapper checks its length).
/// `AtomicU64`, so no `unsafe` is needed for a static; single-threaded, so `Relaxed`.
///
/// Limit and outcome are written by every call; remaining, retry-after and reset-after
/// (a division each) only by calls asked for the `detail` (the decision object's
/// `check`), not by the boolean `allow`.
static DECISION: [AtomicU64; 5] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// The fields of the decision buffer, in its order.
#[derive(Clone, Copy)]
enum Field {
    Limit,
    Remaining,
    RetryAfterMs,
    ResetAfterMs,
    Outcome,
}

/// Where the decision buffer lies in linear memory: its byte offset (8-aligned), then
/// the number of `f64`s in it, then the indices of limit, remaining, retry-after ms,
/// reset-after ms and outcome (the JS wrapper's view and indices come from here).
#[wasm_bindgen(js_name = decisionLayout)]
pub fn decision_layout() -> Vec<u32> {
    use Field::*;
    let fields = [Limit, Remaining, RetryAfterMs, ResetAfterMs, Outcome].map(|f| f as usize);
    let buffer = [DECISION.as_ptr() as usize, DECISION.len()];
    buffer.into_iter().chain(fields).map(|n| n as u32).collect()
}

const OUTCOME_DECIDED: f64 = 0.0;
const OUTCOME_TABLE_FULL: f64 = 1.0;
const OUTCOME_COST_EXCEEDS_CAPACITY: f64 = 2.0;
const OUTCOME_TIME_OUT_OF_RANGE: f64 = 3.0;
const OUTCOME_BAD_NOW: f64 = 4.0;
const OUTCOME_BAD_COST: f64 = 5.0;

/// The outcome codes the decision buffer reports: `[decided, table full, cost exceeds
/// capacity, time out of range, now not a time, cost not a cost]` (the JS wrapper's
/// constants come from here).
#[wasm_bindgen(js_name = outcomeCodes)]
pub fn outcome_codes() -> Vec<f64> {
    vec![
        OUTCOME_DECIDED,
        OUTCOME_TABLE_FULL,
        OUTCOME_COST_EXCEEDS_CAPACITY,
        OUTCOME_TIME_OUT_OF_RANGE,
        OUTCOME_BAD_NOW,
        OUTCOME_BAD_COST,
    ]
}

/// Below this, an integer is exact as an `f64`, and so is the floor of the correctly
/// rounded quotient of two such integers: `f64` division, where an `i64.div_u` costs
/// more in V8.
const EXACT: u64 = 1 << 52;

/// `slack / unit`, rounded down (`Decision::remaining`).
fn remaining(slack: u64, unit: u64) -> f64 {
    if slack < EXACT && unit < EXACT {
        (slack as f64 / unit as f64).floor()
    } else {
        (slack / unit) as f64
    }
}

/// Nanoseconds → milliseconds, rounded up: `f64` division below 2^52, where the
/// quotient is below 2^33 and, unless whole, at least 10^-6 from a whole number, more
/// than half an ulp, so its ceiling is exact.
fn ceil_ms(ns: u64) -> f64 {
    if ns < EXACT {
        (ns as f64 / 1e6).ceil()
    } else {
        ns.div_ceil(1_000_000) as f64
    }
}

fn put(field: Field, v: f64) {
    DECISION[field as usize].store(v.to_bits(), Ordering::Relaxed);
}

// Limit and outcome always (a refusal's error message names the limit); the rest only
// for a decision object.
fn publish(d: &Decision, outcome: f64, detail: bool) {
    put(Field::Limit, d.limit() as f64);
    put(Field::Outcome, outcome);
    if detail {
        let (slack, unit) = d.remaining_fraction();
        publish_detail(slack, unit, d.retry_after_nanos(), d.reset_after_nanos());
    }
}

fn publish_detail(slack: u64, unit: u64, retry_after: u64, reset_after: u64) {
    put(Field::Remaining, remaining(slack, unit));
    put(Field::RetryAfterMs, ceil_ms(retry_after));
    put(Field::ResetAfterMs, ceil_ms(reset_after));
}

/// A check's decision and outcome code: a refusal that is an error becomes a denial
/// whose outcome names it (the wrapper throws for it).
fn outcome(r: Result<Decision, CheckError>) -> (Decision, f64) {
    match r {
        Ok(d) => (d, OUTCOME_DECIDED),
        Err(CheckError::CostExceedsCapacity { capacity, .. }) => (
            Decision::rejected(capacity, 0, 0, 0),
            OUTCOME_COST_EXCEEDS_CAPACITY,
        ),
        Err(_) => (Decision::rejected(0, 0, 0, 0), OUTCOME_TIME_OUT_OF_RANGE),
    }
}

/// Publishes a check's outcome and returns whether it was admitted.
fn answer(r: Result<Decision, CheckError>, detail: bool) -> bool {
    publish_answer(outcome(r), detail)
}

/// Publishes `(decision, outcome)` and returns whether it was admitted: the one place
/// every check path publishes from, so the keyed hot function holds one copy of
/// `publish`, not one per outcome.
fn publish_answer((d, outcome): (Decision, f64), detail: bool) -> bool {
    publish(&d, outcome, detail);
    d.is_allowed()
}

/// One limiter (one client, or one global limit).
#[wasm_bindgen]
pub struct Limiter {
    inner: Single,
}

#[wasm_bindgen]
impl Limiter {
    /// `algorithm`: one of [`algorithm_names`]; `limit` per `periodMs`, bursts of
    /// `burst`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        algorithm: &str,
        limit: f64,
        period_ms: f64,
        burst: f64,
    ) -> Result<Limiter, JsError> {
        let kind = algorithm_for(algorithm, quota(limit, period_ms, burst)?)?;
        Ok(Self {
            inner: Single::new(kind).ok_or_else(|| err(UNKNOWN_ALGORITHM))?,
        })
    }

    /// Checks `cost` units at `nowMs`, taking them if admitted. The decision is in
    /// the decision buffer until the next call (remaining, retry-after and reset-after
    /// only if `detail`).
    pub fn check(&self, now_ms: f64, cost: f64, detail: bool) -> bool {
        let Some((now, cost)) = args(now_ms, cost) else {
            return false;
        };
        answer(self.inner.check_at(now, cost), detail)
    }

    /// What `check` would answer, taking nothing.
    pub fn peek(&self, now_ms: f64, cost: f64) -> bool {
        let Some((now, cost)) = args(now_ms, cost) else {
            return false;
        };
        answer(self.inner.peek_at(now, cost), true)
    }

    /// Forgets everything admitted.
    pub fn reset(&self) {
        self.inner.reset();
    }
}

// What a call leaves for the JS wrapper to read right after it, as the decision
// buffer does: a static each, and its getter (single-threaded, so `Relaxed`).
macro_rules! left_for_js {
    ($($(#[$doc:meta])* $js:ident: fn $getter:ident() -> $t:ty = $cell:ident: $atomic:ty;)*) => {$(
        static $cell: $atomic = <$atomic>::new(0);

        $(#[$doc])*
        #[wasm_bindgen(js_name = $js)]
        pub fn $getter() -> $t {
            $cell.load(Ordering::Relaxed)
        }
    )*};
}

left_for_js! {
    /// The state after the last `Rule.decide` (a BigInt): what to store for the key
    /// (its input if nothing changed).
    lastState: fn last_state() -> u64 = LAST_STATE: AtomicU64;
    /// The refund ledger after the last `Rule.settle` (a BigInt): what to store beside
    /// the state (its input if nothing moved the word back).
    lastLedger: fn last_ledger() -> u64 = LAST_LEDGER: AtomicU64;
    /// The low 32 bits of the fingerprint the last `fingerprint` call returned.
    lastFingerprintLow: fn last_fingerprint_low() -> u32 = LAST_FINGERPRINT_LOW: AtomicU32;
}

/// An algorithm and quota without state: the caller keeps each key's state word (a
/// BigInt) and hands it in, so it can persist it (a Durable Object's storage) and give
/// it back after a restart. Decisions are exactly the keyed and single limiters'.
#[wasm_bindgen]
pub struct Rule {
    inner: AnyAlgorithm,
}

#[wasm_bindgen]
impl Rule {
    /// Like [`Limiter::new`].
    #[wasm_bindgen(constructor)]
    pub fn new(algorithm: &str, limit: f64, period_ms: f64, burst: f64) -> Result<Rule, JsError> {
        Ok(Self {
            inner: algorithm_for(algorithm, quota(limit, period_ms, burst)?)?,
        })
    }

    /// The state of a key that has used nothing.
    #[wasm_bindgen(js_name = initialState)]
    pub fn initial_state(&self) -> u64 {
        portero::Algorithm::initial_state(&self.inner)
    }

    /// Decides `cost` units at `nowMs` for a key in `state`; the decision in the
    /// decision buffer, the state to keep in `lastState` (unchanged by a rejection or a peek).
    pub fn decide(&self, state: u64, now_ms: f64, cost: f64, take: bool) -> bool {
        LAST_STATE.store(state, Ordering::Relaxed);
        let Some((now, cost)) = args(now_ms, cost) else {
            return false;
        };
        let t = portero::Algorithm::decide(&self.inner, state, now, cost);
        let next = match &t {
            Ok(t) if take => t.next.unwrap_or(state),
            _ => state,
        };
        LAST_STATE.store(next, Ordering::Relaxed);
        answer(t.map(|t| t.decision), true)
    }

    /// Settles at its real cost `real`, at `nowMs`, an admission of this rule that took
    /// `cost` units at `atMs` and turned the word `before` into `after` while its
    /// ledger stood at `noted`, on a key whose word is now `state` with ledger
    /// `ledger` and log of places `places` (a cost of 0: `real` units charged at
    /// `nowMs`, past the limit). The state, ledger and places to keep in `lastState`,
    /// `lastLedger` and `lastPlaces` (unchanged on an error); how the key stands for
    /// one unit in the decision buffer. Places that are not a log's (a damaged
    /// record) are read as none: a settlement then gives back less, never more.
    #[allow(clippy::too_many_arguments)]
    pub fn settle(
        &self,
        state: u64,
        ledger: u64,
        places: &[u64],
        at_ms: f64,
        cost: f64,
        before: u64,
        after: u64,
        noted: u64,
        real: f64,
        now_ms: f64,
    ) -> bool {
        LAST_STATE.store(state, Ordering::Relaxed);
        LAST_LEDGER.store(ledger, Ordering::Relaxed);
        LAST_PLACES.with(|last| places.clone_into(&mut last.borrow_mut()));
        let (Some((now, real)), Some((at, cost))) = (args(now_ms, real), args(at_ms, cost)) else {
            return false;
        };
        let admission = portero::Admission::of_word(at, cost, before, after, noted.into());
        let mut word = portero::algorithm::kept::KeptWord {
            state,
            ledger: ledger.into(),
        };
        let mut kept = KeptPlaces::from_words(places).unwrap_or_default();
        let settled = word.settle_placed(&mut kept, &self.inner, admission, real, now);
        LAST_PLACES.with(|last| *last.borrow_mut() = kept.to_words().collect());
        LAST_STATE.store(word.state, Ordering::Relaxed);
        LAST_LEDGER.store(
            u64::try_from(word.ledger).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        answer(settled, true)
    }
}

std::thread_local! {
    /// The log of places after the last `Rule.settle`.
    static LAST_PLACES: core::cell::RefCell<Vec<u64>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// The log of places after the last `Rule.settle` (a `BigUint64Array`, five words a
/// run: `KeptPlaces::to_words`): what to store beside the state and ledger (its input
/// if nothing was given back).
#[wasm_bindgen(js_name = lastPlaces)]
pub fn last_places() -> Vec<u64> {
    LAST_PLACES.with(|last| last.borrow().clone())
}

/// A check's `now` and `cost` in portero's units, or `None` with the refusal that
/// names the bad one published (the JS wrapper throws for it, with the value). Checked
/// here alone, and never thrown from wasm: a throw out of a method leaves its object
/// borrowed (it can never be freed) and a key string passed in unfreed.
fn args(now_ms: f64, cost: f64) -> Option<(u64, u64)> {
    let bad = match (nanos_of(now_ms), whole_of(cost)) {
        (Some(now), Some(cost)) => return Some((now, cost)),
        (None, _) => OUTCOME_BAD_NOW,
        (_, None) => OUTCOME_BAD_COST,
    };
    publish(&Decision::rejected(0, 0, 0, 0), bad, true);
    None
}

/// A limiter per string key (client address, API key…) in a bounded table.
#[wasm_bindgen]
pub struct Keyed {
    inner: KeyedLimiter<str, AnyAlgorithm, ManualClock>,
    held: Held,
}

impl Keyed {
    /// Both `check` forms: one copy of the table's hot path in the module. Looks in
    /// the slot `hint` names first; returns `hint' * 2 + admitted`, where `hint'` is
    /// where the key is held now.
    #[inline(never)]
    fn check_key(&self, f: Fingerprint, hint: u32, now_ms: f64, cost: f64, detail: bool) -> u32 {
        let mut hint = SlotHint::from_bits(hint);
        let Some((now, cost)) = args(now_ms, cost) else {
            return hint.to_bits() << 1;
        };
        let admitted = self.answer(self.inner.check_hinted_at(f, &mut hint, now, cost), detail);
        (hint.to_bits() << 1) | u32::from(admitted)
    }

    /// [`answer`], with the table's own decision for a full table (denied, the
    /// limit, retry after one second).
    fn answer(&self, r: Result<Decision, KeyedError>, detail: bool) -> bool {
        let decided = match r {
            Ok(d) => (d, OUTCOME_DECIDED),
            Err(KeyedError::Check(e)) => outcome(Err(e)),
            Err(_) => (self.inner.full_table(), OUTCOME_TABLE_FULL),
        };
        publish_answer(decided, detail)
    }
}

#[wasm_bindgen]
impl Keyed {
    /// Like [`Limiter::new`], for up to `maxKeys` keys. `hash_seeds` (four 32-bit words from
    /// `crypto.getRandomValues`) seed the key hash, so clients cannot aim for
    /// collisions. `evict`: when every key is active, evict the key closest to full
    /// instead of refusing new keys.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        algorithm: &str,
        limit: f64,
        period_ms: f64,
        burst: f64,
        max_keys: f64,
        hash_seeds: &[u32],
        evict: bool,
    ) -> Result<Keyed, JsError> {
        let kind = algorithm_for(algorithm, quota(limit, period_ms, burst)?)?;
        let max_keys = whole("maxKeys must be a whole number from 1 to 1048576", max_keys)?;
        if !(1..=u64::from(MAX_KEYS)).contains(&max_keys) {
            return Err(err(
                "maxKeys must be from 1 to 1048576 (a table of at most 32 MiB)",
            ));
        }
        if hash_seeds.len() < 4 {
            return Err(err("hashSeeds must hold four 32-bit random words"));
        }
        let seed = |i: usize| (u64::from(hash_seeds[i]) << 32) | u64::from(hash_seeds[(i + 1) % 4]);
        let hasher = RandomState::with_seeds(seed(0), seed(1), seed(2), seed(3));
        let overflow = if evict {
            Overflow::EvictSoonestFull
        } else {
            Overflow::RejectNewKeys
        };
        // Fallible: an allocation failure would abort, and an abort traps the isolate.
        let table =
            KeyedLimiter::try_with_hasher(kind, max_keys as usize, ManualClock::new(), hasher)
                .map_err(|_| {
                    err("not enough memory for a table of maxKeys keys (about 31 bytes each)")
                })?;
        Ok(Self {
            inner: table.overflow(overflow),
            held: Held::default(),
        })
    }

    /// `check`, holding what an admission took so that [`settle`](Self::settle) can
    /// move it to its real cost later: the admission's handle (a whole number), or −1
    /// when refused (nothing taken). An admission of no units is held too: its
    /// settlement charges the real cost (an estimate of 0 is "charge me later", never
    /// a way around the limit). The decision in the decision buffer, whole. Of the
    /// admissions held, the last 65,536 can be settled; an older one keeps its units.
    pub fn acquire(&self, key: &str, now_ms: f64, cost: f64) -> f64 {
        let Some((now, cost)) = args(now_ms, cost) else {
            return -1.0;
        };
        let f = self.inner.fingerprint_of(key);
        match self.inner.acquire_at(key, now, cost) {
            Ok(acquired) => {
                let admitted = self.answer(Ok(acquired.decision), true);
                match acquired.admission {
                    Some(admission) if admitted => self.held.hold(f, admission) as f64,
                    // Admitted for no units: nothing to give back, all of the real
                    // cost to charge.
                    None if admitted => self.held.hold(f, Admission::new(now, 0)) as f64,
                    _ => -1.0,
                }
            }
            Err(e) => {
                self.answer(Err(e), true);
                -1.0
            }
        }
    }

    /// Moves the admission `handle` names to its real cost `real` at `nowMs`: units
    /// not used go back by portero's refund rule, units above the estimate are
    /// charged into debt. Returns whether the handle named a held admission (once
    /// settled, or too old, it names none and nothing is done). A bad `real` or
    /// `nowMs` settles nothing and is an Error.
    pub fn settle(&self, handle: f64, real: f64, now_ms: f64) -> Result<bool, JsError> {
        let now = nanos(
            "nowMs must be a time in milliseconds within portero's range",
            now_ms,
        )?;
        let real = whole("real must be a whole number of units", real)?;
        let Some(handle) = whole_of(handle) else {
            return Ok(false);
        };
        let Some((key, admission)) = self.held.take(handle) else {
            return Ok(false);
        };
        // A settlement the table cannot make (the key's word taken over since) keeps
        // the units: never more than a table that saw the request.
        let _ = self.inner.settle_fingerprint_at(key, admission, real, now);
        Ok(true)
    }

    /// Checks `cost` units for `key` at `nowMs`; the decision in the decision buffer
    /// (all of it only if `detail`).
    pub fn check(&self, key: &str, now_ms: f64, cost: f64, detail: bool) -> bool {
        let f = self.inner.fingerprint_of(key);
        self.check_key(f, SlotHint::NONE.to_bits(), now_ms, cost, detail) & 1 == 1
    }

    /// `key`'s fingerprint under this table's seed: its high 32 bits, the low 32 in
    /// `lastFingerprintLow`. The JS wrapper keeps it for hot keys, with the slot hint
    /// `checkFingerprint` returns, so checking them again copies and hashes nothing
    /// and looks nothing up.
    pub fn fingerprint(&self, key: &str) -> u32 {
        let bits = self.inner.fingerprint_of(key).to_bits();
        LAST_FINGERPRINT_LOW.store(bits as u32, Ordering::Relaxed);
        (bits >> 32) as u32
    }

    /// `check` for the key whose fingerprint is `high`:`low`, looking first in the
    /// slot `hint` names (any value is safe: a wrong one costs a lookup). Returns
    /// `hint' * 2 + admitted`, where `hint'` is the hint for the next check (where the
    /// key is held now; `0x7FFF_FFFF` if nowhere): one number, so an admitted check
    /// makes no other call. `detail` as for `check`.
    #[wasm_bindgen(js_name = checkFingerprint)]
    #[allow(clippy::too_many_arguments)]
    pub fn check_fingerprint(
        &self,
        high: u32,
        low: u32,
        hint: u32,
        now_ms: f64,
        cost: f64,
        detail: bool,
    ) -> u32 {
        let f = Fingerprint::from_bits((u64::from(high) << 32) | u64::from(low));
        self.check_key(f, hint, now_ms, cost, detail)
    }

    /// What `check` would answer for `key`, taking nothing.
    pub fn peek(&self, key: &str, now_ms: f64, cost: f64) -> bool {
        let Some((now, cost)) = args(now_ms, cost) else {
            return false;
        };
        answer(self.inner.peek_at(key, now, cost), true)
    }

    /// Forgets `key`.
    pub fn reset(&self, key: &str) {
        self.inner.reset(key);
    }

    /// Drops keys that are full again at `nowMs` (they carry no information); returns
    /// how many, or −1 for a `nowMs` outside the time range (the wrapper throws, as
    /// for a check's).
    pub fn sweep(&self, now_ms: f64) -> f64 {
        nanos_of(now_ms).map_or(-1.0, |now| self.inner.sweep_at(now) as f64)
    }

    /// Keys held.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.inner.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::{ceil_ms, remaining, EXACT};

    /// The `f64` shortcuts against integer arithmetic, at the edges of each millisecond
    /// and quotient and across the whole range.
    #[test]
    fn conversions_are_exact() {
        let mut ns: Vec<u64> = vec![
            0,
            1,
            999_999,
            1_000_000,
            1_000_001,
            EXACT - 1,
            EXACT,
            EXACT + 1,
            u64::MAX,
        ];
        for k in [
            1u64,
            2,
            3,
            999,
            1_000,
            123_456_789,
            (EXACT / 1_000_000) - 1,
            EXACT / 1_000_000,
        ] {
            for d in [-1i64, 0, 1] {
                ns.push((k * 1_000_000).wrapping_add_signed(d));
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ns.push(x >> (x % 64));
        }
        for &n in &ns {
            assert_eq!(ceil_ms(n), n.div_ceil(1_000_000) as f64, "{n} ns");
            for unit in [
                1u64,
                3,
                1_000_000,
                999_999_937,
                EXACT - 1,
                EXACT + 3,
                u64::MAX,
            ] {
                assert_eq!(remaining(n, unit), (n / unit) as f64, "{n} / {unit}");
            }
        }
    }
}
