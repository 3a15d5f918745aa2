//! `portero-lab planet`: one limit per key for a service served from `L` locations with
//! `I` isolates each, and what each way of keeping it costs — over-admission against
//! latency — as `L` and `I` grow.
//!
//! Traffic is a seeded Poisson stream whose keys (Zipf, `s` = 1.1: a few hot keys) and
//! locations (Zipf, `s` = 1: the first locations busiest) are skewed; an isolate is
//! drawn uniformly within its location. The rule is GCRA, `limit` per minute with a
//! burst of `burst`, decided by portero's own [`Gcra`] (the core's pure transition) in
//! whichever place the topology decides: each isolate, or the one object at location 0
//! (where the busiest traffic is; an object is created near its first user), reached
//! over the round trip of [`places`]. The topologies are those of the edge package:
//!
//! - **per isolate**: every isolate its own limit (no call, no coordination);
//! - **exact object**: every check a call to the object (`EdgeLimiter` without its
//!   local stages);
//! - **object + refusals**: the object, with the refusals an isolate remembers answered
//!   locally until their retry-after (what `EdgeLimiter` does);
//! - **leases of `b`**: the same, and a call takes up to `b` units the isolate then
//!   spends locally for the lease's life (`EdgeLimiter`'s `lease` option);
//! - **leases of `b` + prefetch**: the same, and once a lease holds half of `b` or
//!   less, a call off the request's path fetches the next one, which takes over when
//!   the one held runs dry: a key an isolate keeps using waits on no round trip. An
//!   isolate then holds up to `2b − 1` units of a key (the next lease, and what is
//!   left of the one held). And a key the object last found at its limit (a refusal,
//!   or a lease of fewer units than asked) is refused in the isolate while it holds
//!   none, and asked again off the path: a key over its limit waits on no round trip
//!   either, at the price of refusing for up to one round trip after room came back.
//!
//! With leases, a lease that ends with units unspent gives them back to the object
//! (the edge client does the same), by the admission that granted it and portero's
//! refund rule ([`KeptWord`]): what is still ahead of now. Here that is little — a
//! lease lives 10 s and the rule's burst refills in 2 s — so the figures barely move.
//!
//! Simulated time, so the figures are the same on every machine. What the model leaves
//! out: queueing at the object (one object serves every call at once), the local stage
//! of an isolate's own count (which the real client also runs: with few isolates it
//! refuses a hot key's requests without a call, so the real calls are fewer than the
//! model's), and requests cancelled in flight. Admissions are counted when the isolate
//! answers, up to a round trip after the object decided: so even the exact object can
//! seem over its rule in a span by what the rule admits in one round trip.

pub mod places;
pub mod report;

use std::collections::{HashMap, HashSet};

use portero::algorithm::kept::KeptWord;
use portero::{Admission, Algorithm, Decision, Gcra, Quota};
use rand::Rng;
use rand_distr::{Distribution, Zipf};

use crate::overload::{poisson, rng, Events, SEC};

/// The span over-admission is measured in: one period of the rule.
pub const SPAN: u64 = 60 * SEC;

const MS: u64 = 1_000_000;

/// How a limit is kept across the planet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// A limit in every isolate.
    PerIsolate,
    /// Every check a call to the one object.
    Exact,
    /// The object, and the refusals an isolate remembers answered locally.
    Remembered,
    /// The object with remembered refusals and leases of `batch` units.
    Leases {
        /// Units a lease takes at most.
        batch: u64,
    },
    /// Leases of `batch` units, the next fetched off the request's path once the one
    /// held is down to half.
    Prefetch {
        /// Units a lease takes at most.
        batch: u64,
    },
}

impl Topology {
    /// The row label.
    pub fn name(self) -> String {
        match self {
            Self::PerIsolate => "per isolate".into(),
            Self::Exact => "exact object".into(),
            Self::Remembered => "object + refusals".into(),
            Self::Leases { batch } => format!("leases of {batch}"),
            Self::Prefetch { batch } => format!("leases of {batch} + prefetch"),
        }
    }
}

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Locations (1 to 300 in the sweep).
    pub locations: usize,
    /// Isolates per location.
    pub isolates: usize,
    /// Keys in play.
    pub keys: u64,
    /// Requests per second, all locations together.
    pub rate: f64,
    /// Simulated seconds (three periods of the rule in the sweep).
    pub seconds: u64,
    /// The rule: this many per minute per key...
    pub limit: u64,
    /// ...with this burst.
    pub burst: u64,
    /// How long a lease may be spent (ms).
    pub lease_ms: u64,
    /// The arrivals' seed.
    pub seed: u64,
}

impl Setup {
    /// The sweep's run at `locations` × `isolates`: 600 requests per second for 180 s
    /// over 100 keys, 3,000 per minute per key with a burst of 100, leases of 10 s.
    pub fn at(locations: usize, isolates: usize, seed: u64) -> Self {
        Self {
            locations,
            isolates,
            keys: 100,
            rate: 600.0,
            seconds: 180,
            limit: 3_000,
            burst: 100,
            lease_ms: 10_000,
            seed,
        }
    }

    /// The most one key may be admitted in a run of `span_ns`: GCRA's `B + ⌊t / T⌋`.
    pub fn allowance(&self, span_ns: u64) -> u64 {
        let quota = self.quota();
        quota
            .burst()
            .saturating_add(span_ns / quota.interval_nanos())
    }

    fn quota(&self) -> Quota {
        let quota = Quota::per_minute(self.limit).expect("a positive limit");
        quota.with_burst(self.burst).expect("a positive burst")
    }
}

/// What one topology did in one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The topology.
    pub topology: Topology,
    /// When each key's admissions were answered (ns), per key, in order.
    pub admitted: Vec<Vec<u64>>,
    /// Isolates that received a request for the key, per key.
    pub seen_by: Vec<u64>,
    /// Isolates that were granted a lease of the key, per key.
    pub lease_holders: Vec<u64>,
    /// Decision latency of every request (ms): 0 when answered in the isolate.
    pub latency_ms: Vec<f64>,
    /// The key of every request (the hottest is 0).
    pub keys: Vec<u64>,
    /// Calls made to the object.
    pub calls: u64,
    /// The oldest a lease was when one of its units was spent (ns since its call left).
    pub oldest_spend_ns: u64,
    /// Units of leases that ended unspent, given back to the object (by the refund
    /// rule, which gives back only what is still ahead of now).
    pub given_back: u64,
}

impl Outcome {
    /// The `q` quantile of the decision latency (ms).
    pub fn latency_at(&self, q: f64) -> f64 {
        if self.latency_ms.is_empty() {
            return 0.0;
        }
        let mut sorted = self.latency_ms.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }

    /// The `q` quantile of the decision latency of `key`'s requests (ms).
    pub fn latency_of(&self, key: u64, q: f64) -> f64 {
        let mut sorted: Vec<f64> = self
            .latency_ms
            .iter()
            .zip(&self.keys)
            .filter(|(_, &k)| k == key)
            .map(|(&ms, _)| ms)
            .collect();
        if sorted.is_empty() {
            return 0.0;
        }
        sorted.sort_by(f64::total_cmp);
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }

    /// The share of requests that waited on a round trip to the object.
    pub fn waited(&self) -> f64 {
        let waited = self.latency_ms.iter().filter(|&&ms| ms > 0.0).count();
        waited as f64 / self.latency_ms.len().max(1) as f64
    }

    /// The most admissions of `key` answered within any closed span of `span` ns.
    pub fn most_in(&self, key: usize, span: u64) -> u64 {
        let times = &self.admitted[key];
        let mut most = 0;
        let mut first = 0;
        for (i, &t) in times.iter().enumerate() {
            while times[first] + span < t {
                first += 1;
            }
            most = most.max(i - first + 1);
        }
        most as u64
    }

    /// Admissions in all, every key.
    pub fn total(&self) -> u64 {
        self.admitted.iter().map(|a| a.len() as u64).sum()
    }
}

/// One request: when, where, which key.
#[derive(Debug, Clone, Copy)]
struct Request {
    at: u64,
    isolate: usize,
    location: usize,
    key: u64,
}

/// The requests of a run (the same for every topology of it).
fn requests(setup: &Setup) -> Vec<Request> {
    let mut rng = rng(setup.seed);
    let keys = Zipf::new(setup.keys as f64, 1.1).expect("valid Zipf parameters");
    let places = Zipf::new(setup.locations as f64, 1.0).expect("valid Zipf parameters");
    poisson(setup.rate, setup.seconds, &mut rng)
        .into_iter()
        .map(|at| {
            let location = places.sample(&mut rng) as usize - 1;
            let isolate = location * setup.isolates + rng.random_range(0..setup.isolates);
            let key = keys.sample(&mut rng) as u64 - 1;
            Request {
                at,
                isolate,
                location,
                key,
            }
        })
        .collect()
}

/// What an isolate keeps between requests.
#[derive(Debug, Default)]
struct Isolate {
    /// Its own limit's states (per isolate).
    own: HashMap<u64, u64>,
    /// The object's last refusal of a key: until when it stands.
    refused: HashMap<u64, u64>,
    /// Its lease of a key.
    leases: HashMap<u64, Lease>,
    /// The next lease of a key, fetched ahead: it takes over when the one held ends.
    next: HashMap<u64, Lease>,
    /// Keys with a lease request of this isolate in flight.
    leasing: HashSet<u64>,
    /// Keys at their limit, as the object last answered (a refusal, or a lease of
    /// fewer units than asked): with prefetch, refused here while none are held.
    at_limit: HashSet<u64>,
}

/// Units an isolate holds of a key, leased from the object.
#[derive(Debug)]
struct Lease {
    /// Units left.
    left: u64,
    /// When its call left.
    sent: u64,
    /// Until when it may be spent.
    until: u64,
    /// The object's admission that granted it, to give back what ends unspent.
    admission: Admission,
}

enum Event {
    Arrive(usize),
    /// A lease ended with units unspent: they go back to the object.
    GiveBack {
        key: u64,
        admission: Admission,
        real: u64,
    },
    AtObject {
        request: usize,
        ask: u64,
        /// A lease fetched ahead, off the request's path (the request was answered).
        ahead: bool,
    },
    Reply {
        request: usize,
        decision: Decision,
        granted: u64,
        ask: u64,
        ahead: bool,
        admission: Option<Admission>,
    },
}

/// Runs `topology` over `setup`'s requests.
pub fn run(setup: &Setup, topology: Topology) -> Outcome {
    let requests = requests(setup);
    let gcra = Gcra::new(setup.quota());
    let trips: Vec<u64> = (0..setup.locations)
        .map(|i| (places::round_trip_ms(i) * MS as f64) as u64)
        .collect();
    let mut isolates: Vec<Isolate> = (0..setup.locations * setup.isolates)
        .map(|_| Isolate::default())
        .collect();
    let mut object: HashMap<u64, KeptWord> = HashMap::new();
    let keys = setup.keys as usize;
    let mut out = Outcome {
        topology,
        admitted: vec![Vec::new(); keys],
        seen_by: vec![0; keys],
        lease_holders: vec![0; keys],
        latency_ms: vec![0.0; requests.len()],
        keys: requests.iter().map(|r| r.key).collect(),
        calls: 0,
        oldest_spend_ns: 0,
        given_back: 0,
    };
    let mut seen: HashSet<(usize, u64)> = HashSet::new();
    let mut held: HashSet<(usize, u64)> = HashSet::new();
    let mut events = Events::default();
    for (i, r) in requests.iter().enumerate() {
        events.push(r.at, Event::Arrive(i));
    }
    let decide = |state: Option<&u64>, now: u64, cost: u64| {
        let state = state.copied().unwrap_or(gcra.initial_state());
        gcra.decide(state, now, cost)
            .expect("costs within the burst, times in range")
    };
    let word = |object: &mut HashMap<u64, KeptWord>, key: u64| {
        *object.entry(key).or_insert_with(|| KeptWord::new(&gcra))
    };
    while let Some((now, event)) = events.pop_until(u64::MAX) {
        match event {
            Event::Arrive(i) => {
                let r = requests[i];
                let iso = &mut isolates[r.isolate];
                if seen.insert((r.isolate, r.key)) {
                    out.seen_by[r.key as usize] += 1;
                }
                let half = trips[r.location] / 2;
                match topology {
                    Topology::PerIsolate => {
                        let t = decide(iso.own.get(&r.key), now, 1);
                        if let Some(next) = t.next {
                            iso.own.insert(r.key, next);
                        }
                        if t.decision.is_allowed() {
                            out.admitted[r.key as usize].push(now);
                        }
                    }
                    Topology::Exact => {
                        out.calls += 1;
                        events.push(
                            now.saturating_add(half),
                            Event::AtObject {
                                request: i,
                                ask: 1,
                                ahead: false,
                            },
                        );
                    }
                    Topology::Remembered | Topology::Leases { .. } | Topology::Prefetch { .. } => {
                        // The lease fetched ahead takes over once the one held is gone.
                        if !iso.leases.contains_key(&r.key) {
                            if let Some(next) = iso.next.remove(&r.key) {
                                iso.leases.insert(r.key, next);
                            }
                        }
                        if let Some(lease) = iso.leases.get_mut(&r.key) {
                            if now < lease.until {
                                out.oldest_spend_ns = out.oldest_spend_ns.max(now - lease.sent);
                                lease.left -= 1;
                                let left = lease.left;
                                if left == 0 {
                                    iso.leases.remove(&r.key);
                                }
                                out.admitted[r.key as usize].push(now);
                                if let Topology::Prefetch { batch } = topology {
                                    let low = left * 2 <= batch;
                                    if low
                                        && batch > 1
                                        && !iso.next.contains_key(&r.key)
                                        && iso.leasing.insert(r.key)
                                    {
                                        ask_ahead(&mut events, &mut out, now + half, i, batch);
                                    }
                                }
                                continue;
                            }
                            // Ended with units unspent: they go back to the object.
                            if let Some(ended) = iso.leases.remove(&r.key) {
                                if ended.left > 0 {
                                    out.given_back += ended.left;
                                    let real = ended.admission.cost() - ended.left;
                                    events.push(
                                        now.saturating_add(half),
                                        Event::GiveBack {
                                            key: r.key,
                                            admission: ended.admission,
                                            real,
                                        },
                                    );
                                }
                            }
                        }
                        if iso.refused.get(&r.key).is_some_and(|&until| now < until) {
                            continue; // refused in the isolate, at no latency
                        }
                        // With prefetch, a key the object last found at its limit is
                        // asked again off the request's path, and refused here until
                        // the answer lands (a lease, or a new refusal).
                        if let Topology::Prefetch { batch } = topology {
                            if iso.at_limit.contains(&r.key) {
                                if iso.leasing.insert(r.key) {
                                    ask_ahead(&mut events, &mut out, now + half, i, batch);
                                }
                                continue;
                            }
                        }
                        let ask = match topology {
                            Topology::Leases { batch } | Topology::Prefetch { batch }
                                if batch > 1 && iso.leasing.insert(r.key) =>
                            {
                                batch
                            }
                            _ => 1,
                        };
                        out.calls += 1;
                        events.push(
                            now.saturating_add(half),
                            Event::AtObject {
                                request: i,
                                ask,
                                ahead: false,
                            },
                        );
                    }
                }
            }
            Event::AtObject {
                request,
                ask,
                ahead,
            } => {
                let r = requests[request];
                let key = r.key;
                // The object's lease: the cost, and what else fits up to `ask` (a
                // lease fetched ahead: what fits, none if nothing does).
                let mut kept = word(&mut object, key);
                let state = Some(kept.state);
                let room = decide(state.as_ref(), now, 0).decision.remaining();
                let take = ask.min(room).max(1);
                let t = decide(state.as_ref(), now, take);
                let take = if t.decision.is_allowed() || take == 1 || ahead {
                    take
                } else {
                    1
                };
                let (decision, admission) = kept
                    .check(&gcra, now, take)
                    .expect("costs within the burst, times in range");
                object.insert(key, kept);
                let granted = if decision.is_allowed() { take } else { 0 };
                let back = trips[r.location] - trips[r.location] / 2;
                events.push(
                    now.saturating_add(back),
                    Event::Reply {
                        request,
                        decision,
                        granted,
                        ask,
                        ahead,
                        admission,
                    },
                );
            }
            Event::GiveBack {
                key,
                admission,
                real,
            } => {
                let mut kept = word(&mut object, key);
                kept.settle(&gcra, admission, real, now)
                    .expect("times in range");
                object.insert(key, kept);
            }
            Event::Reply {
                request,
                decision,
                granted,
                ask,
                ahead: true,
                admission,
            } => {
                // A lease fetched ahead: it waits for the one held to end. Refused,
                // it is a refusal remembered like any other.
                let r = requests[request];
                let iso = &mut isolates[r.isolate];
                iso.leasing.remove(&r.key);
                if !decision.is_allowed() {
                    let until =
                        r.at.saturating_add(decision.retry_after_nanos())
                            .saturating_sub(MS);
                    iso.refused.insert(r.key, until);
                }
                at_limit_after(iso, r.key, granted, ask);
                if let (true, Some(admission)) = (granted > 0, admission) {
                    let until = r.at.saturating_add(setup.lease_ms.saturating_mul(MS));
                    let lease = Lease {
                        left: granted,
                        sent: r.at,
                        until,
                        admission,
                    };
                    iso.next.insert(r.key, lease);
                    if held.insert((r.isolate, r.key)) {
                        out.lease_holders[r.key as usize] += 1;
                    }
                }
            }
            Event::Reply {
                request,
                decision,
                granted,
                ask,
                ahead: false,
                admission,
            } => {
                let r = requests[request];
                out.latency_ms[request] = (now - r.at) as f64 / MS as f64;
                let iso = &mut isolates[r.isolate];
                if ask > 1 {
                    iso.leasing.remove(&r.key);
                    at_limit_after(iso, r.key, granted, ask);
                }
                if decision.is_allowed() {
                    out.admitted[r.key as usize].push(now);
                    if let (true, Some(admission)) = (granted > 1, admission) {
                        let until = r.at.saturating_add(setup.lease_ms.saturating_mul(MS));
                        let lease = Lease {
                            left: granted - 1,
                            sent: r.at,
                            until,
                            admission,
                        };
                        iso.leases.insert(r.key, lease);
                        if held.insert((r.isolate, r.key)) {
                            out.lease_holders[r.key as usize] += 1;
                        }
                    }
                } else if topology != Topology::Exact {
                    // Counted from when the call left (the object decided later), and
                    // 1 ms early, as the real client does (its waits are whole ms).
                    let until =
                        r.at.saturating_add(decision.retry_after_nanos())
                            .saturating_sub(MS);
                    iso.refused.insert(r.key, until);
                }
            }
        }
    }
    out
}

/// A lease request of `ask` units off the path of `request`'s answer, reaching the
/// object `at`.
fn ask_ahead(events: &mut Events<Event>, out: &mut Outcome, at: u64, request: usize, ask: u64) {
    out.calls += 1;
    let ahead = true;
    events.push(
        at,
        Event::AtObject {
            request,
            ask,
            ahead,
        },
    );
}

/// Whether `key` is at its limit after a lease request of `ask` units got `granted`
/// (none: a refusal; fewer: the object had no more room).
fn at_limit_after(iso: &mut Isolate, key: u64, granted: u64, ask: u64) {
    if granted < ask {
        iso.at_limit.insert(key);
    } else {
        iso.at_limit.remove(&key);
    }
}

/// The topologies compared, in the tables' order.
pub fn topologies() -> Vec<Topology> {
    let mut all = vec![Topology::PerIsolate, Topology::Exact, Topology::Remembered];
    all.extend([1, 10, 50].map(|batch| Topology::Leases { batch }));
    all.extend([10, 50].map(|batch| Topology::Prefetch { batch }));
    all
}

/// The sweep: locations 1 to 300, isolates 1 to 16 per location.
pub const LOCATIONS: [usize; 5] = [1, 10, 30, 100, 300];
/// Isolates per location in the sweep.
pub const ISOLATES: [usize; 3] = [1, 4, 16];
