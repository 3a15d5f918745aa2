//! The counters behind the rules: one keyed table per rule, of the rule's algorithm
//! (aligned fixed windows unless it names another), built when the configuration
//! loads, and one of aligned fixed windows per distinct limit a request brings itself
//! (a descriptor's `limit` override).
//!
//! Invariant: every table holds at most `max_keys` descriptor values, so a flood of
//! values cannot grow the server's memory; a full table makes room by dropping the
//! key whose window is soonest full again ([`Overflow::EvictSoonestFull`]: the client
//! of a dropped key may get up to the units it had used back, at most its limit).
//! Distinct overrides are capped at [`MOST_OVERRIDES`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use portero::keyed::RandomState;
use portero::{AnyAlgorithm, KeyedLimiter, ManualClock, Overflow};

use crate::config::shape::Shape;
use crate::config::tree::{Allowance, Tree};
use crate::config::unit::Unit;

/// A rule's counters: one per descriptor value. The time is the caller's (ns since
/// the Unix epoch), so windows align on the epoch as envoyproxy/ratelimit's do.
pub type Windows = KeyedLimiter<String, AnyAlgorithm, ManualClock>;

/// The most distinct `(requests_per_unit, unit)` overrides kept at once.
pub const MOST_OVERRIDES: usize = 64;

/// What one rule counts with.
#[derive(Debug)]
pub enum Store {
    /// `requests_per_unit` per window, per descriptor value.
    Windows(Arc<Windows>),
    /// `requests_per_unit: 0`: every request refused, nothing counted.
    Refuse,
    /// `unlimited`: every request admitted, nothing counted.
    Unlimited,
}

/// The stores of every rule of a tree, and of the overrides requests bring.
#[derive(Debug)]
pub struct Limits {
    rules: Vec<Store>,
    overrides: Mutex<HashMap<(u32, Unit), Arc<Windows>>>,
    max_keys: usize,
}

/// A limit a request asked for that cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyOverrides;

/// A rule's table that memory cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoMemory {
    /// The values each table was to hold.
    pub max_keys: usize,
}

impl std::fmt::Display for NoMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not enough memory for the rules' tables of {} keys each (about 31 bytes a key): lower --max-keys",
            self.max_keys
        )
    }
}

impl Limits {
    /// Stores for every rule of `tree`, each holding at most `max_keys` values (each
    /// table allocated whole now, about 31 bytes a value); an error, saying so, when
    /// memory cannot hold them.
    pub fn new(tree: &Tree, max_keys: usize) -> Result<Self, NoMemory> {
        let rules = tree
            .rules()
            .iter()
            .map(|rule| store_of(rule.allowance, max_keys))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            rules,
            overrides: Mutex::new(HashMap::new()),
            max_keys,
        })
    }

    /// Stores for every rule of `tree`, carrying over from `old` (the stores of
    /// `old_tree`) those of rules in the same place (their identity, not their path,
    /// which two rules may share) with the same allowance, and every override;
    /// returns how many rules kept their store.
    pub fn carried(
        tree: &Tree,
        old_tree: &Tree,
        old: &Limits,
        max_keys: usize,
    ) -> Result<(Self, usize), NoMemory> {
        let mut kept = 0;
        let rules = tree
            .rules()
            .iter()
            .map(|rule| {
                let same = old_tree
                    .rules()
                    .iter()
                    .position(|o| o.identity == rule.identity && o.allowance == rule.allowance);
                match same {
                    Some(i) => {
                        kept += 1;
                        Ok(old.rules[i].clone())
                    }
                    None => store_of(rule.allowance, max_keys),
                }
            })
            .collect::<Result<_, _>>()?;
        let overrides = old
            .overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let limits = Self {
            rules,
            overrides: Mutex::new(overrides),
            max_keys,
        };
        Ok((limits, kept))
    }

    /// Rule `index`'s store.
    pub fn rule(&self, index: usize) -> &Store {
        &self.rules[index]
    }

    /// The store of an override of `requests_per_unit` per `unit` at `now`. A full
    /// set of overrides makes room by dropping those whose every key is full again
    /// (nothing counted left to lose); with none idle, or no memory for its table,
    /// the override cannot be kept.
    pub fn overridden(
        &self,
        requests_per_unit: u32,
        unit: Unit,
        now: u64,
    ) -> Result<Store, TooManyOverrides> {
        if requests_per_unit == 0 {
            return Ok(Store::Refuse);
        }
        let mut kept = self.overrides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(windows) = kept.get(&(requests_per_unit, unit)) {
            return Ok(Store::Windows(windows.clone()));
        }
        if kept.len() >= MOST_OVERRIDES {
            kept.retain(|_, windows| {
                windows.sweep_at(now);
                !windows.is_empty()
            });
        }
        if kept.len() >= MOST_OVERRIDES {
            return Err(TooManyOverrides);
        }
        let limited = Allowance::Limited {
            requests_per_unit,
            unit,
            shape: Shape::FixedWindow,
        };
        let Store::Windows(windows) =
            store_of(limited, self.max_keys).map_err(|_| TooManyOverrides)?
        else {
            return Ok(Store::Refuse);
        };
        kept.insert((requests_per_unit, unit), windows.clone());
        Ok(Store::Windows(windows))
    }
}

impl Clone for Store {
    fn clone(&self) -> Self {
        match self {
            Self::Windows(w) => Self::Windows(w.clone()),
            Self::Refuse => Self::Refuse,
            Self::Unlimited => Self::Unlimited,
        }
    }
}

fn store_of(allowance: Allowance, max_keys: usize) -> Result<Store, NoMemory> {
    Ok(match allowance {
        Allowance::Unlimited => Store::Unlimited,
        Allowance::Limited {
            requests_per_unit: 0,
            ..
        } => Store::Refuse,
        Allowance::Limited {
            requests_per_unit,
            unit,
            shape,
        } => {
            match shape.in_memory(requests_per_unit, unit) {
                Ok(window) => {
                    let table = KeyedLimiter::try_with_hasher(
                        window,
                        max_keys,
                        ManualClock::new(),
                        RandomState::new(),
                    )
                    .map_err(|_| NoMemory { max_keys })?;
                    Store::Windows(Arc::new(table.overflow(Overflow::EvictSoonestFull)))
                }
                // The configuration refuses a limit no window can count (above a
                // billion a second), and so does a request's own limit.
                Err(_) => Store::Refuse,
            }
        }
    })
}
