//! After the response: what a limit learns from it. A request is admitted on an
//! estimate (its cost, default 1) before the handler runs; the response may then
//! settle the real cost (tokens a model call used), or decide whether the request
//! counts at all (a failed login does, a good one does not and clears the key).
//!
//! Invariant: a settlement only ever moves a key toward what a twin charged the real
//! cost at the start would hold — units not used go back by the refund rule (less,
//! never more), units above the estimate are charged into debt past the burst. So
//! while requests are in flight a key can be ahead of that twin by at most the units
//! their real costs exceed their estimates by, and by nothing once they settle.
//!
//! Each admitted limit that settles keeps its ticket with the response future; the
//! head settles them before the fields are written, so the fields show the state
//! after settlement. A limit settled by [`Usage`] hands its ticket to the handle in
//! the request's extensions instead: its fields show the estimate, and it settles
//! when the handle's last clone is dropped (a streamed body that ended, or one
//! dropped early with what it had reported).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::Request;
use portero::Decision;

use super::after::ResponseHead;
use super::procedure::{Applied, AppliedList, Procedure};
use super::store::{Checked, Checking, StoreError, Ticket};
use crate::headers::Policy;
use crate::observe::{self, Settled};

/// The handle through which a handler reports a request's real cost when it is
/// known only later — a streamed completion's token count, at its end. The layer
/// puts one in the request's extensions when a limit settles by usage
/// ([`Limit::settle_by_usage`](crate::Limit::settle_by_usage)); clone it into the
/// body's stream, [`add`](Self::add) as the usage grows, and the limits settle when
/// the last clone is dropped (the stream ended, or was dropped early: what was
/// reported so far is settled). Nothing reported: the estimate stands.
///
/// ```
/// use portero_http::Usage;
/// # fn handler(usage: Usage) {
/// usage.add(120); // the prompt's tokens
/// usage.add(800); // the completion's, as the stream ends
/// drop(usage); // the last clone: the limits settle at 920
/// # }
/// ```
#[derive(Clone)]
pub struct Usage(Arc<Report>);

/// A settlement at the units reported.
type Settlement = Box<dyn FnOnce(u64) + Send>;

/// What a [`Usage`] handle's clones share.
struct Report {
    /// The units reported so far (`u64::MAX`: none).
    units: AtomicU64,
    /// The settlement, run once: when the last clone drops.
    settle: Mutex<Option<Settlement>>,
    /// The handle an outer layer put in the request before this one: every report goes
    /// to it too (a layer inside must not leave the outer one's limits unsettled).
    outer: Option<Usage>,
}

/// No units reported.
const NONE: u64 = u64::MAX;

impl Usage {
    fn new(settle: Settlement, outer: Option<Usage>) -> Self {
        Self(Arc::new(Report {
            units: AtomicU64::new(NONE),
            settle: Mutex::new(Some(settle)),
            outer,
        }))
    }

    /// Adds `units` to the request's real cost.
    pub fn add(&self, units: u64) {
        if let Some(outer) = &self.0.outer {
            outer.add(units);
        }
        let _ = self
            .0
            .units
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(match now {
                    NONE => units.min(NONE - 1),
                    n => n.saturating_add(units).min(NONE - 1),
                })
            });
    }

    /// Sets the request's real cost to `units` (the last report wins).
    pub fn set(&self, units: u64) {
        if let Some(outer) = &self.0.outer {
            outer.set(units);
        }
        self.0.units.store(units.min(NONE - 1), Ordering::Release);
    }

    /// The units reported so far.
    pub fn reported(&self) -> Option<u64> {
        match self.0.units.load(Ordering::Acquire) {
            NONE => None,
            n => Some(n),
        }
    }

    /// Settles now, with what was reported (later reports change nothing here).
    pub fn finish(&self) {
        self.0.run();
        if let Some(outer) = &self.0.outer {
            outer.finish();
        }
    }
}

impl Report {
    fn run(&self) {
        let settle = self.settle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(settle), n) = (settle, self.units.load(Ordering::Acquire)) {
            if n != NONE {
                settle(n);
            }
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        self.run();
    }
}

impl fmt::Debug for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Usage")
            .field("reported", &self.reported())
            .finish_non_exhaustive()
    }
}

impl<B: 'static> Procedure<B> {
    /// Hands the tickets of the limits that settle by usage to a [`Usage`] handle
    /// in `request`'s extensions (called once the request is admitted).
    pub(crate) fn hand_usage(
        self: &Arc<Self>,
        applied: &mut AppliedList,
        request: &mut Request<B>,
    ) {
        let mut tickets: Vec<(usize, Ticket)> = Vec::new();
        for a in applied.as_mut_slice() {
            let entry = &self.entries[a.entry];
            if entry.after().is_some_and(|after| after.usage) {
                if let Some(ticket) = a.ticket.take() {
                    tickets.push((a.entry, ticket));
                }
            }
        }
        if tickets.is_empty() {
            return;
        }
        let plan = self.clone();
        // A handle an outer layer put there keeps hearing every report (through this
        // one, which holds it until it drops).
        let outer = request.extensions().get::<Usage>().cloned();
        let usage = Usage::new(
            Box::new(move |real| {
                for (entry, ticket) in tickets {
                    if let Settle::Later(later) = plan.settle_one(entry, ticket, real) {
                        if !spawned(later) {
                            let policy = plan.entries[entry].policy();
                            observe::settled(policy, Settled::Failed, None);
                        }
                    }
                }
            }),
            outer,
        );
        request.extensions_mut().insert(usage);
    }
}

/// A settlement's answer as the pipeline reads it.
pub(crate) enum Settle {
    /// How the key stands now (`None`: not settled, the estimate stands).
    Now(Option<Decision>),
    /// A remote store's round trip, counted when it ends.
    Later(Later),
}

/// A remote settlement on its way: how the key stands, once it ends.
pub(crate) type Later = Pin<Box<dyn Future<Output = Option<Decision>> + Send>>;

/// Runs a settlement no response waits for (a [`Usage`] handle dropped) on the
/// current tokio runtime: whether there was one (without, the estimate stands).
fn spawned(later: Later) -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(later);
            true
        }
        Err(_) => false,
    }
}

impl<B> Procedure<B> {
    /// Settles what the response head tells, for every admitted limit that reads it,
    /// and replaces each one's decision with how its key stands afterwards. Remote
    /// settlements come back as futures, with the place of their limit in `applied`.
    pub(crate) fn settle_at_head(
        &self,
        applied: &mut AppliedList,
        head: &ResponseHead<'_>,
    ) -> Vec<(usize, Later)> {
        let mut later = Vec::new();
        for (i, a) in applied.as_mut_slice().iter_mut().enumerate() {
            match self.settled_at_head(a, head) {
                Settle::Now(Some(after)) => a.decision = after,
                Settle::Now(None) => {}
                Settle::Later(settling) => later.push((i, settling)),
            }
        }
        later
    }

    fn settled_at_head(&self, a: &mut Applied, head: &ResponseHead<'_>) -> Settle {
        let entry = &self.entries[a.entry];
        let Some(after) = entry.after().filter(|after| after.at_head()) else {
            return Settle::Now(None);
        };
        let Some(ticket) = a.ticket.take() else {
            return Settle::Now(None);
        };
        if after.clear_if.as_ref().is_some_and(|test| test(head)) {
            return match entry.forget(ticket) {
                None => {
                    observe::settled(entry.policy(), Settled::Failed, None);
                    Settle::Now(None)
                }
                Some(Checking::Done(standing)) => Settle::Now(cleared(entry.policy(), standing)),
                Some(Checking::Pending(pending)) => {
                    let policy = entry.policy().clone();
                    Settle::Later(Box::pin(async move { cleared(&policy, pending.await) }))
                }
            };
        }
        let real = match &after.count_if {
            Some(test) if !test(head) => Some(0),
            // A response that counts (a failed login) keeps its estimate: counted as
            // such, so that charges by outcome show in the metrics.
            Some(_) if after.real.is_none() => {
                observe::settled(entry.policy(), Settled::Counted, None);
                None
            }
            _ => after.real.as_ref().and_then(|real| real(head)),
        };
        match real {
            Some(real) => self.settle_one(a.entry, ticket, real),
            None => Settle::Now(None),
        }
    }

    /// Gives back what a remote limit (entry `at`) took for a request another limit
    /// refused: its admission settled at 0, by the refund rule. The call runs on
    /// its own (the refusal does not wait for it); how the key stands when the
    /// store answered at once.
    pub(crate) fn give_back_remote(&self, at: usize, ticket: Ticket) -> Option<Decision> {
        match self.settle_one(at, ticket, 0) {
            Settle::Now(after) => after,
            Settle::Later(later) => {
                if !spawned(later) {
                    observe::settled(self.entries[at].policy(), Settled::Failed, None);
                }
                None
            }
        }
    }

    /// Settles entry `at`'s admission `ticket` at `real`, counted (a remote one when
    /// its round trip ends): how its key stands.
    pub(crate) fn settle_one(&self, at: usize, ticket: Ticket, real: u64) -> Settle {
        let entry = &self.entries[at];
        let estimate = ticket.admission.cost();
        match entry.settle(ticket, real) {
            None => {
                observe::settled(entry.policy(), Settled::Failed, None);
                Settle::Now(None)
            }
            Some(Checking::Done(settled)) => {
                Settle::Now(counted(entry.policy(), estimate, real, settled))
            }
            Some(Checking::Pending(pending)) => {
                let policy = entry.policy().clone();
                Settle::Later(Box::pin(async move {
                    counted(&policy, estimate, real, pending.await)
                }))
            }
        }
    }
}

/// A key forgotten, counted and traced: how it stands (`None`: it could not be).
fn cleared(policy: &Policy, standing: Result<Checked, StoreError>) -> Option<Decision> {
    let outcome = match standing {
        Ok(_) => Settled::Cleared,
        Err(_) => Settled::Failed,
    };
    let error = standing.as_ref().err().map(|e| e as &dyn std::error::Error);
    observe::settled(policy, outcome, error);
    standing.ok().map(|checked| checked.decision)
}

/// A settlement's answer, counted and traced: how the key stands (`None`: failed).
fn counted(
    policy: &Policy,
    estimate: u64,
    real: u64,
    settled: Result<Checked, StoreError>,
) -> Option<Decision> {
    let outcome = match &settled {
        Err(_) => Settled::Failed,
        Ok(_) if real > estimate => Settled::Charged,
        Ok(_) if real < estimate => Settled::GivenBack,
        Ok(_) => Settled::Unchanged,
    };
    let error = settled.as_ref().err().map(|e| e as &dyn std::error::Error);
    observe::settled(policy, outcome, error);
    settled.ok().map(|checked| checked.decision)
}
