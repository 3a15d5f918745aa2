//! The tenants experiment: a service for 100 requests per second shared by 30 small
//! tenants sending 1 per second each and one sending 170. Shedding whatever arrives
//! when the service is full (random shedding) costs every tenant the same share,
//! about half; fair shedding serves the small tenants in full and takes the whole cut
//! from the one above its share.
//!
//! The small tenants' 0 % rests on the reserve: 30 tenants at 1 per second with 1 s
//! requests hold about 30 slots between them, and in bursts a few more, which the
//! reserve of 10 covers. [`reserve_curve`] shrinks and grows it: each slot of reserve
//! is a slot the big tenant never gets.

use std::any::Any;
use std::sync::Arc;

use portero::ConcurrencyLimit;
use portero_http::fair::FairShare;

use rand::Rng;

use super::{poisson, rng, Events, SEC};

/// Requests in flight at once; each takes [`SERVICE`] on average: 100 per second.
pub const CAPACITY: u32 = 100;
/// Mean service time of one request (exponentially distributed, so the run has no
/// artificial echo of its first second).
pub const SERVICE: u64 = SEC;
/// Small tenants, each sending [`SMALL_RATE`] per second.
pub const SMALL_TENANTS: usize = 30;
/// Requests per second of each small tenant.
pub const SMALL_RATE: f64 = 1.0;
/// Requests per second of the big tenant.
pub const BIG_RATE: f64 = 170.0;
/// Slots kept for tenants below their share under fair shedding.
pub const RESERVE: u32 = 10;
/// Length of the run.
pub const SECONDS: u64 = 120;

/// How the full service picks whom to refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shedding {
    /// Whoever arrives while the service is full ([`ConcurrencyLimit`]).
    Random,
    /// Tenants above their share first ([`FairShare`]).
    Fair,
}

impl Shedding {
    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::Fair => "fair",
        }
    }
}

/// What one policy did.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// The policy.
    pub shedding: Shedding,
    /// Small tenants' requests: offered and served.
    pub small: (u64, u64),
    /// The big tenant's requests: offered and served.
    pub big: (u64, u64),
}

impl Run {
    /// Share of the small tenants' requests refused, in percent.
    pub fn small_lost_percent(&self) -> f64 {
        lost(self.small)
    }

    /// Share of the big tenant's requests refused, in percent.
    pub fn big_lost_percent(&self) -> f64 {
        lost(self.big)
    }

    /// The big tenant's served requests per second.
    pub fn big_served_per_second(&self) -> f64 {
        self.big.1 as f64 / SECONDS as f64
    }
}

fn lost((offered, served): (u64, u64)) -> f64 {
    100.0 * (offered - served) as f64 / offered.max(1) as f64
}

/// Runs both policies on the same arrivals (seeded).
pub fn run(seed: u64) -> [Run; 2] {
    let arrivals = arrivals(seed);
    [Shedding::Random, Shedding::Fair].map(|s| run_policy(s, RESERVE, &arrivals, seed))
}

/// The reserves [`reserve_curve`] tries.
pub const RESERVES: std::ops::RangeInclusive<u32> = 0..=30;

/// Fair shedding with every reserve in [`RESERVES`] (same arrivals as [`run`]):
/// `(reserve, run)`.
pub fn reserve_curve(seed: u64) -> Vec<(u32, Run)> {
    let arrivals = arrivals(seed);
    RESERVES
        .map(|reserve| {
            (
                reserve,
                run_policy(Shedding::Fair, reserve, &arrivals, seed),
            )
        })
        .collect()
}

/// `(time, tenant)` in time order; tenant 0 is the big one.
fn arrivals(seed: u64) -> Vec<(u64, usize)> {
    let mut rng = rng(seed);
    // (time, tenant): tenant 0 is the big one.
    let mut arrivals: Vec<(u64, usize)> = poisson(BIG_RATE, SECONDS, &mut rng)
        .into_iter()
        .map(|t| (t, 0))
        .collect();
    for tenant in 1..=SMALL_TENANTS {
        arrivals.extend(
            poisson(SMALL_RATE, SECONDS, &mut rng)
                .into_iter()
                .map(|t| (t, tenant)),
        );
    }
    arrivals.sort_unstable();
    arrivals
}

fn run_policy(shedding: Shedding, reserve: u32, arrivals: &[(u64, usize)], seed: u64) -> Run {
    // Service times come from their own seeded generator (one draw per admitted
    // request), so the arrivals are the same whatever the policy admits.
    let mut service = rng(seed.wrapping_add(1));
    let plain = Arc::new(ConcurrencyLimit::new(u64::from(CAPACITY)));
    let fair = Arc::new(FairShare::new(CAPACITY, reserve).expect("reserve below capacity"));
    let mut run = Run {
        shedding,
        small: (0, 0),
        big: (0, 0),
    };
    // Each completion drops the slot it held.
    let mut done: Events<Box<dyn Any>> = Events::default();
    for &(t, tenant) in arrivals {
        while done.pop_until(t).is_some() {}
        let slot: Option<Box<dyn Any>> = match shedding {
            Shedding::Random => plain.try_acquire_owned().ok().map(|p| Box::new(p) as _),
            Shedding::Fair => fair.try_acquire(&tenant).map(|p| Box::new(p) as _),
        };
        let counts = if tenant == 0 {
            &mut run.big
        } else {
            &mut run.small
        };
        counts.0 += 1;
        if let Some(slot) = slot {
            counts.1 += 1;
            let u: f64 = service.random_range(f64::EPSILON..1.0);
            done.push(t + (-u.ln() * SERVICE as f64) as u64, slot);
        }
    }
    run
}
