//! A limiter's circuit breakers: one for a server; for a Cluster, one per node, so that
//! a dead primary's checks stop waiting while the other nodes' keys are still decided
//! by Redis (one breaker for the whole Cluster stayed closed on the live nodes'
//! successes, and every check on the dead node's keys waited the full timeout).
//!
//! Invariant: a check goes through the breaker of the node that owns its keys' slot in
//! the latest `CLUSTER SLOTS` this limiter read. The map is read again (one read at a
//! time, at most every [`REFRESH`]) when a check finds its slot unknown or its node's
//! breaker open, so the replica a failover promotes is found within about `REFRESH`
//! of its promotion and its slots are decided by Redis again.
//!
//! Bound, for a Cluster: while one node is away, at most `failures_in_a_row` checks of
//! its keys (plus those in flight when its breaker trips) wait the full timeout, then
//! one probe per `open_for`; the other nodes' checks are unaffected. (Redis's own
//! full-coverage rule can still stop them: with `cluster-require-full-coverage yes`,
//! Redis's default, every node answers `CLUSTERDOWN` while any slot has no live
//! primary, and each node's breaker counts those answers as failures.)

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portero::{BreakerError, CircuitBreaker};
use redis::Value;

/// Slots of a Redis Cluster.
const SLOTS: usize = 16_384;
/// The most nodes told apart; more share the last breaker.
const MAX_NODES: usize = 64;
/// A slot whose node is not known yet.
const UNKNOWN: u8 = u8::MAX;
/// The shortest time between two reads of the slot map.
pub(crate) const REFRESH: Duration = Duration::from_millis(100);

/// The breakers of one limiter (shared by clones).
pub(crate) enum Breakers {
    /// A server: one breaker.
    One(Arc<CircuitBreaker>),
    /// A Cluster: a breaker per node.
    PerNode(Nodes),
}

/// A Cluster's breakers, and which node owns which slot.
pub(crate) struct Nodes {
    /// Breaker `i` is node `i`'s; the last one also serves slots not mapped yet.
    breakers: Box<[Arc<CircuitBreaker>]>,
    /// Each slot's node (`UNKNOWN` until the first map is read).
    slots: Box<[AtomicU8]>,
    /// Each node's address, by index.
    names: Mutex<Vec<String>>,
    /// When the map was last asked for (ms after `started`), and whether a read is on.
    asked_at: AtomicU64,
    reading: AtomicBool,
    started: Instant,
}

impl Breakers {
    /// One breaker, or one per node for a Cluster, each tripping after
    /// `failures_in_a_row` failures and open for `open_for`; a probe waits at most
    /// `probe_timeout`.
    pub(crate) fn new(
        cluster: bool,
        failures_in_a_row: u32,
        open_for: Duration,
        probe_timeout: Duration,
    ) -> Result<Self, BreakerError> {
        let make = || {
            CircuitBreaker::new(failures_in_a_row, open_for)?
                .with_probe_timeout(probe_timeout)
                .map(Arc::new)
        };
        if !cluster {
            return Ok(Self::One(make()?));
        }
        Ok(Self::PerNode(Nodes {
            breakers: (0..MAX_NODES).map(|_| make()).collect::<Result<_, _>>()?,
            slots: (0..SLOTS).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            names: Mutex::new(Vec::new()),
            asked_at: AtomicU64::new(0),
            reading: AtomicBool::new(false),
            started: Instant::now(),
        }))
    }

    /// The breaker a call on `key` goes through, and the Cluster's map when it
    /// should be read again now (the caller reads `CLUSTER SLOTS` and hands the answer
    /// to [`Nodes::learn`]).
    pub(crate) fn of(&self, key: &str) -> (&Arc<CircuitBreaker>, Option<&Nodes>) {
        match self {
            Self::One(b) => (b, None),
            Self::PerNode(nodes) => {
                let (breaker, read) = nodes.of(key);
                (breaker, read.then_some(nodes))
            }
        }
    }
}

impl Nodes {
    fn of(&self, key: &str) -> (&Arc<CircuitBreaker>, bool) {
        let node = self.slots[slot_of(key.as_bytes())].load(Ordering::Relaxed);
        let known = node != UNKNOWN;
        let breaker = &self.breakers[usize::from(node).min(MAX_NODES - 1)];
        let stale = !known || !breaker.allows_call_at(portero::Clock::now(breaker.clock()));
        (breaker, stale && self.due())
    }

    /// Whether a read of the map may start now (one at a time, at most one every
    /// `REFRESH`), taking the turn if so: the caller then hands the answer to
    /// [`learn`](Self::learn).
    fn due(&self) -> bool {
        let now = u64::try_from(self.started.elapsed().as_millis()).map_or(u64::MAX, |ms| ms + 1);
        let last = self.asked_at.load(Ordering::Relaxed);
        let every = u64::try_from(REFRESH.as_millis()).unwrap_or(u64::MAX);
        if last != 0 && now < last.saturating_add(every) {
            return false;
        }
        if self.reading.swap(true, Ordering::Acquire) {
            return false;
        }
        self.asked_at.store(now, Ordering::Relaxed);
        true
    }

    /// Maps every slot to its primary from a `CLUSTER SLOTS` answer (an error, or an
    /// answer of another shape, changes nothing), and ends the read turn.
    pub(crate) fn learn(&self, answer: Result<Value, redis::RedisError>) {
        if let Ok(Value::Array(ranges)) = answer {
            for range in ranges {
                if let Some((start, end, name)) = primary_of(&range) {
                    let node = self.index_of(name);
                    for slot in start..=end.min(SLOTS - 1) {
                        self.slots[slot].store(node, Ordering::Relaxed);
                    }
                }
            }
        }
        self.reading.store(false, Ordering::Release);
    }

    /// The index of node `name`, given one on first sight.
    fn index_of(&self, name: String) -> u8 {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let i = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name);
                names.len() - 1
            }
        };
        i.min(MAX_NODES - 1) as u8
    }
}

/// `(first slot, last slot, "host:port")` of one `CLUSTER SLOTS` entry's primary.
fn primary_of(range: &Value) -> Option<(usize, usize, String)> {
    let Value::Array(parts) = range else {
        return None;
    };
    let number = |v: &Value| match v {
        Value::Int(n) => usize::try_from(*n).ok(),
        _ => None,
    };
    let (start, end) = (number(parts.first()?)?, number(parts.get(1)?)?);
    let Value::Array(primary) = parts.get(2)? else {
        return None;
    };
    let host = match primary.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let port = number(primary.get(1)?)?;
    Some((start, end, format!("{host}:{port}")))
}

/// The Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the
/// first `{` and the next `}`, if not empty) or of the whole key, modulo 16,384.
pub(crate) fn slot_of(key: &[u8]) -> usize {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    let bytes = tagged.unwrap_or(key);
    usize::from(crc16::State::<crc16::XMODEM>::calculate(bytes)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_redis_hash_tags() {
        // Redis's own answers (CLUSTER KEYSLOT).
        assert_eq!(slot_of(b"foo"), 12_182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"{}x"), slot_of(b"{}x"));
        assert_ne!(slot_of(b"{}x"), slot_of(b"x"));
        assert_eq!(slot_of(b"123456789"), 0x31C3); // CRC16-XMODEM check value
    }
}
