//! Leases: an instance borrows a batch of a key's units from Redis in one script call
//! and spends them locally, so a hot key costs one round trip per batch instead of
//! one per request.
//!
//! Pick leases for hot keys with a high limit (a tenant's 10,000 per minute across a
//! fleet): the saving is a factor of the batch. For small limits (logins, 5 per
//! minute) a batch would strand most of the limit on one instance: check each request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use portero::Decision;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::call::{LeaseTag, Mode};
use crate::limiter::RedisLimiter;
use crate::outcome::{RedisCheckError, ServedBy, Verdict};

/// A [`RedisLimiter`] that leases up to `batch` units per key in one script call and
/// spends them locally. Pick it for hot keys with large limits.
///
/// # Bounds
///
/// - **Admissions.** A unit is charged in Redis, atomically with every other
///   instance's checks and leases, when it is leased; here it is spent at most once,
///   and only until its lease expires. A lease's `lease_for` is counted from when the
///   lease request was **sent**, which is before Redis charged it, so across all
///   instances never more is admitted than the limit allows, counted over any window
///   lengthened by `lease_for`.
/// - **Resets.** [`reset`](Self::reset) drops this instance's lease and the
///   key in Redis, and a lease request in flight when it runs is not kept. Other
///   instances' leases are theirs until they expire: after a
///   reset at most the units they hold unspent then
///   ([`leased_units`](Self::leased_units), summed over the instances) are
///   admitted on top of the fresh limit, and none after `lease_for`.
/// - **Loss.** Units leased and not spent are never returned: they are lost when their
///   lease expires. A lease replaced by a new one for the same key (it ran short)
///   keeps what it has left, and what its admissions give back, spendable until its
///   own expiry (spent before the newer lease's units), for up to four replaced
///   leases a key.
/// - **Settlements** ([`settle`](Self::settle)). Units an admission did not use go
///   back to the very lease it was spent from while that lease lives, replaced or not
///   (never to one leased after it, nor past what the lease was granted): the instance
///   is then as if the request had cost its real cost from the start. Units above the estimate are
///   taken from that lease while it has them, and the rest charged in Redis past the
///   limit (debt the key's later requests wait out, on every instance). What an
///   admission of an ended lease did not use is lost with the lease, at most its
///   estimate.
/// - **Waiting.** No lock shared between keys is held across I/O: concurrent requests
///   for one key wait for that key's one lease request (instead of each leasing a
///   batch and stranding the rest), requests for other keys go on. No check waits for
///   Redis longer than the limiter's timeout in all: waiting for another request's
///   lease and asking Redis share one budget, and a lease Redis does not answer in
///   time is answered by the outage policy at once, not asked again.
///
/// Cloning is cheap and shares the leases (and the Redis connection).
#[derive(Debug, Clone)]
pub struct LeasedLimiter {
    limiter: RedisLimiter,
    batch: u64,
    lease_for: Duration,
    max_keys: usize,
    leases: Arc<Mutex<Leases>>,
}

#[derive(Debug, Default)]
struct Leases {
    live: HashMap<String, Lease>,
    // This instance's resets so far: a lease asked for before one is not kept.
    resets: u64,
    // Keys with a lease request in flight, and how to tell its waiters it is done.
    leasing: HashMap<String, Arc<Notify>>,
}

#[derive(Debug)]
struct Lease {
    /// Who the lease is, for the admissions it answered (see [`LeaseTag`]).
    tag: Arc<LeaseTag>,
    left: u64,
    expires: Instant,
    /// When the shared key is full again, as Redis said when it granted the lease
    /// (what a check the lease answers advertises; other instances can only make it
    /// later).
    full_at: Instant,
    /// The key's leases this one replaced, oldest first, each until its own expiry:
    /// what they have left is spent first, and their admissions give back to them.
    earlier: Vec<Earlier>,
}

/// A replaced lease of a key, still within its own lifetime.
#[derive(Debug)]
struct Earlier {
    tag: Arc<LeaseTag>,
    left: u64,
    expires: Instant,
}

/// The most replaced leases a key keeps (a lease replaced beyond them loses what it
/// had left and what its admissions would give back, at most a batch each).
const EARLIER_LEASES: usize = 4;

impl Lease {
    /// This lease's replaced ones that still live at `now`, and itself, oldest first:
    /// (tag, units left, expiry).
    fn pools(&mut self) -> impl Iterator<Item = (&Arc<LeaseTag>, &mut u64, Instant)> {
        self.earlier
            .iter_mut()
            .map(|e| (&e.tag, &mut e.left, e.expires))
            .chain(std::iter::once((&self.tag, &mut self.left, self.expires)))
    }
}

/// Where a settlement of a lease's admission ended.
pub(crate) enum InLease {
    /// Settled in the lease: what it has left, and how long until the shared key is
    /// full again.
    Settled(u64, Duration),
    /// These units above the estimate are still to be charged, in Redis.
    Owed(u64),
}

/// What a request finds when it needs a lease.
enum Turn<'a> {
    Lead(LeadGuard<'a>),
    Wait(OwnedNotified),
}

/// Held by the one request leasing for a key: done or dropped (cancelled), it lets
/// the key's waiters go.
struct LeadGuard<'a> {
    key: String,
    notify: Arc<Notify>,
    owner: &'a LeasedLimiter,
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        self.owner.lock().leasing.remove(&self.key);
        self.notify.notify_waiters();
    }
}

impl LeasedLimiter {
    /// Leases up to `batch` units at a time for each key, each lease spendable for
    /// `lease_for` from when it was asked for, for at most `max_keys` keys at once
    /// (beyond that, keys are checked one request at a time). Combine with
    /// [`blocked_key_cache`](RedisLimiter::blocked_key_cache) so that a key with
    /// nothing left costs no round trip either.
    pub fn new(limiter: RedisLimiter, batch: u64, lease_for: Duration, max_keys: usize) -> Self {
        Self {
            limiter,
            batch: batch.max(1),
            lease_for,
            max_keys,
            leases: Arc::default(),
        }
    }

    /// The shared limiter the leases come from.
    pub(crate) fn limiter(&self) -> &RedisLimiter {
        &self.limiter
    }

    /// Admits `cost` units of `key` from its local lease, or leases a new batch.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        let started = Instant::now();
        let budget = self.limiter.timeout_of();
        loop {
            if let Some(verdict) = self.spend_from_lease(key, cost) {
                return Ok(verdict);
            }
            if cost > self.batch || !self.room_for(key) {
                return self.limiter.check(key, cost).await;
            }
            let left = budget.saturating_sub(started.elapsed());
            match self.turn(key) {
                Turn::Lead(guard) => {
                    let verdict = self.lease(key, cost, left).await;
                    drop(guard);
                    return verdict;
                }
                Turn::Wait(done) => {
                    if tokio::time::timeout(left, done).await.is_err() {
                        // The other request's lease did not come in time: the budget
                        // is spent, so the outage policy answers.
                        let algorithm = *self.limiter.algorithm();
                        return self.limiter.fallback(key, cost, &algorithm);
                    }
                    // A lease arrived (or its request ended): look again.
                }
            }
        }
    }

    /// Waits until `cost` units of `key` are admitted, from the lease or from Redis,
    /// at most `max_wait` in all. Between tries it sleeps the refusal's own
    /// `retry_after` (Redis's, or the blocked-key cache's; at least a millisecond),
    /// never polling faster than the limit can admit, and each try takes nothing
    /// unless admitted, so a dropped wait takes nothing. The last verdict is returned,
    /// admitted or not (refused: the next try would come after `max_wait`); an answer
    /// of the outage policy ends the wait too (`served_by` says so), and a cost above
    /// the capacity is an error at once. There is no order among waiters: each retries.
    pub async fn until_ready(
        &self,
        key: &str,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Verdict, RedisCheckError> {
        let capacity = self.limiter.capacity();
        if cost > capacity {
            return Err(portero::CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        crate::outcome::retry_until_admitted(max_wait, || self.check(key, cost)).await
    }

    /// This request's turn for `key`: lead the lease request, or wait for the one in
    /// flight (registered before the lock is let go, so its end cannot be missed).
    fn turn(&self, key: &str) -> Turn<'_> {
        let mut leases = self.lock();
        if let Some(notify) = leases.leasing.get(key) {
            // `notify_waiters` wakes every `Notified` made before it, polled or not.
            return Turn::Wait(notify.clone().notified_owned());
        }
        let notify = Arc::new(Notify::new());
        leases.leasing.insert(key.to_owned(), notify.clone());
        Turn::Lead(LeadGuard {
            key: key.to_owned(),
            notify,
            owner: self,
        })
    }

    /// Asks Redis for a batch of `key` within `budget`, and answers this request.
    async fn lease(
        &self,
        key: &str,
        cost: u64,
        budget: Duration,
    ) -> Result<Verdict, RedisCheckError> {
        let call = self.limiter.default_call(key, self.batch)?;
        let capacity = self.limiter.capacity();
        if let Some(wait) = self.limiter.cached_refusal(&call.keys[0], cost) {
            return Ok(Verdict::new(
                Decision::rejected(capacity, 0, wait, wait),
                ServedBy::Cache,
            ));
        }
        let sent = self.limiter.cache_now();
        let resets = self.lock().resets;
        let asked = Instant::now();
        let decided = self
            .limiter
            .run_within(std::slice::from_ref(&call), Mode::Lease, 0, budget)
            .await?;
        let Some(decided) = decided else {
            // Redis away: its policy decides now, without a second wait.
            let algorithm = *self.limiter.algorithm();
            return self.limiter.fallback(key, cost, &algorithm);
        };
        let (decision, taken) = (decided[0].decision, decided[0].taken);
        if taken == 0 {
            let retry = decision.retry_after_nanos();
            self.limiter.remember_refusal(&call.keys[0], 1, retry, sent);
            return Ok(Verdict::new(decision, ServedBy::Redis));
        }
        let fits = taken >= cost;
        let left = if fits { taken - cost } else { taken };
        // From the send: Redis charged the units after it. A `lease_for` beyond the
        // clock's range means "as long as the process lives" (30 years).
        let expires = asked
            .checked_add(self.lease_for)
            .or_else(|| asked.checked_add(Duration::from_secs(30 * 365 * 86_400)));
        let mut leases = self.lock();
        // A reset since the send: Redis may have forgotten the key before or after it
        // charged these units; keeping them could admit a batch on top of the fresh
        // limit, dropping them only strands it.
        let full_at = asked.checked_add(decision.reset_after()).unwrap_or(asked);
        let mut answered = None;
        if let (Some(expires), true) = (expires, leases.resets == resets) {
            let tag = Arc::new(LeaseTag::new(key, taken, &call));
            let now = Instant::now();
            // The lease this one replaces, and those it replaced, while they live.
            let mut earlier = Vec::new();
            if let Some(old) = leases.live.remove(key) {
                earlier = old.earlier;
                earlier.push(Earlier {
                    tag: old.tag,
                    left: old.left,
                    expires: old.expires,
                });
                earlier.retain(|e| e.expires > now);
                let beyond = earlier.len().saturating_sub(EARLIER_LEASES);
                earlier.drain(..beyond);
            }
            let lease = Lease {
                tag: tag.clone(),
                left,
                expires,
                full_at,
                earlier,
            };
            if fits {
                answered = Some(tag);
            }
            leases.live.insert(key.to_owned(), lease);
        }
        drop(leases);
        let decision = if fits {
            Decision::admitted(capacity, left, decision.reset_after_nanos())
        } else {
            // Fewer units than this request needs were left: keep them for smaller
            // requests and say so, and refuse this one until the key in Redis is whole
            // again (the one time it surely fits: before, the units it lacks may be in
            // other instances' leases).
            let whole = decision.reset_after_nanos().max(1);
            Decision::rejected(capacity, left, whole, whole)
        };
        let algorithm = *self.limiter.algorithm();
        Ok(Verdict {
            // A lease not kept (a reset since) still charged this request's units in
            // Redis: settling them there, past the limit only, keeps them counted.
            taken: answered
                .or_else(|| fits.then(|| Arc::new(LeaseTag::new(key, 0, &call))))
                .map(|tag| crate::call::Taken::from_lease(algorithm, cost, tag)),
            ..Verdict::new(decision, ServedBy::Redis)
        })
    }

    /// Forgets `key`: this instance's lease and the key in Redis (see the module
    /// docs for other instances' leases).
    pub async fn reset(&self, key: &str) -> Result<(), redis::RedisError> {
        {
            let mut leases = self.lock();
            leases.resets += 1;
            leases.live.remove(key);
        }
        self.limiter.reset(key).await
    }

    /// Units this instance holds leased and unspent now (what a reset elsewhere
    /// leaves spendable here until the leases expire).
    pub fn leased_units(&self) -> u64 {
        let now = Instant::now();
        let leases = self.lock();
        let earlier = leases.live.values().flat_map(|l| &l.earlier);
        let live = leases.live.values().map(|l| (l.left, l.expires));
        earlier
            .map(|e| (e.left, e.expires))
            .chain(live)
            .filter(|&(_, expires)| expires > now)
            .map(|(left, _)| left)
            .sum()
    }

    pub(crate) fn spend_from_lease(&self, key: &str, cost: u64) -> Option<Verdict> {
        let (left, full_in, tag) = self.spend(key, cost)?;
        let algorithm = *self.limiter.algorithm();
        Some(Verdict {
            taken: Some(crate::call::Taken::from_lease(algorithm, cost, tag)),
            ..Verdict::new(self.admitted(left, full_in), ServedBy::Lease)
        })
    }

    /// An admission with `left` units left, the shared key full again in `full_in`.
    pub(crate) fn admitted(&self, left: u64, full_in: Duration) -> Decision {
        let full_in = u64::try_from(full_in.as_nanos()).unwrap_or(u64::MAX);
        Decision::admitted(self.limiter.capacity(), left, full_in)
    }

    /// Moves an admission of `cost` units that the lease `tag` answered to its real
    /// cost `real`, in that lease while it lives (see the type's bounds).
    pub(crate) fn settle_in_lease(&self, tag: &Arc<LeaseTag>, cost: u64, real: u64) -> InLease {
        let now = Instant::now();
        let mut leases = self.lock();
        let Some(lease) = leases.live.get_mut(&tag.key) else {
            return InLease::Owed(real.saturating_sub(cost));
        };
        let full_in = lease.full_at.saturating_duration_since(now);
        let Some((_, left, _)) = lease
            .pools()
            .find(|&(t, _, expires)| Arc::ptr_eq(t, tag) && expires > now)
        else {
            return InLease::Owed(real.saturating_sub(cost));
        };
        if real <= cost {
            *left = left.saturating_add(cost - real).min(tag.granted);
        } else {
            let extra = real - cost;
            let spent = extra.min(*left);
            *left -= spent;
            if spent < extra {
                return InLease::Owed(extra - spent);
            }
        }
        InLease::Settled(*left, full_in)
    }

    /// Script calls this instance's limiter sent (leases, refusals, plain checks).
    pub fn round_trips(&self) -> u64 {
        self.limiter.round_trips()
    }

    /// Takes `cost` from `key`'s live lease; what is left, how long until the shared
    /// key is full again and the lease's tag, or `None`.
    fn spend(&self, key: &str, cost: u64) -> Option<(u64, Duration, Arc<LeaseTag>)> {
        let now = Instant::now();
        let mut leases = self.lock();
        let lease = leases.live.get_mut(key)?;
        if lease.expires <= now {
            leases.live.remove(key);
            return None;
        }
        let full_in = lease.full_at.saturating_duration_since(now);
        // The oldest pool that lives and holds the cost: replaced leases' units first,
        // since they expire first.
        let (tag, left, _) = lease
            .pools()
            .find(|(_, left, expires)| *expires > now && **left >= cost)?;
        *left -= cost;
        let spent_from = tag.clone();
        // What the key has left: every living pool's units.
        let held = lease
            .pools()
            .filter(|&(_, _, expires)| expires > now)
            .map(|(_, left, _)| *left)
            .sum();
        Some((held, full_in, spent_from))
    }

    /// Whether `key` may hold a lease (dropping expired ones when the map is full).
    fn room_for(&self, key: &str) -> bool {
        let mut leases = self.lock();
        if leases.live.len() < self.max_keys || leases.live.contains_key(key) {
            return true;
        }
        let now = Instant::now();
        leases.live.retain(|_, l| l.expires > now);
        leases.live.len() < self.max_keys
    }

    // Each update is one insert, removal or subtraction: a poisoned lock is still
    // consistent. Never held across an await.
    fn lock(&self) -> MutexGuard<'_, Leases> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
