//! The pipeline's one decision procedure, for every store and every option.
//!
//! Invariant (all or none): a request is forwarded only if every applicable limit
//! admitted it (shadow limits and unlimited no-key requests aside).
//!
//! Take nothing that must be given back: with more than one limit, every local limit
//! that can answer without taking ([`Store::ask_without_taking`](super::store::Store::ask_without_taking)) is
//! asked first, and the first that would refuse answers — nothing was taken
//! anywhere. Then the limits are taken in order — local ones, then remote ones (a
//! round trip) — except that a local limit that would still have half its burst
//! left is taken last, after the remote ones, so that a remote refusal finds it
//! untouched; one closer to empty is taken before them, so that a race it loses
//! spares a round trip. Only a race lost between the asking and the taking gives
//! back: every unit the earlier limits took goes back by the refund rule — to an
//! in-memory store at once, to a remote one by settling the admission at 0 (one
//! script call, run on its own: the refusal does not wait for it). The order is a
//! matter of speed, not of what is kept. Consecutive remote
//! limits whose stores share a `Batch` channel (one Redis connection) are sent in one
//! call that is itself all or none (`batching.rs`), so among them nothing stays
//! charged either.
//! The fields list every applied policy in the declared order, each as it stands
//! after any refund.

use std::sync::Arc;

use http::Request;
use portero::Decision;

use super::awaiting::{Answers, Awaiting};
use super::entry::{Entry, Step};
use super::options::{Charge, OutageAnswer, RefusalFn};
use super::options::{WhenNoKey, WhenUnavailable};
use super::store::{Checked, Checking, Source, StoreError};
use crate::headers::Policy;
use crate::keys::KeyError;
use crate::observe::{self, Outcome};

/// Every limit of a layer and every option, shared by its services.
pub(crate) struct Procedure<B> {
    /// The limits in the order they are checked: local ones, then remote ones.
    pub(crate) entries: Vec<Arc<dyn Entry<B>>>,
    /// For each checked entry, its place in the declared order (the fields' order).
    pub(crate) declared: Vec<usize>,
    /// Whether any limit can travel in a batch (else no check looks for one).
    pub(crate) batching: bool,
    pub(crate) cost: Charge,
    /// Whether a limit has a cost of its own (then every request is held against the
    /// capacities, not only one costing more than one unit by the layer's cost).
    pub(crate) limit_costs: bool,
    pub(crate) when_no_key: WhenNoKey,
    pub(crate) when_unavailable: WhenUnavailable,
    pub(crate) outage_answer: OutageAnswer,
    pub(crate) shadow: bool,
    pub(crate) legacy: bool,
    pub(crate) refusal: Option<Arc<RefusalFn>>,
    /// Whether a limit settles from the response head (then the head is read).
    pub(crate) settles_at_head: bool,
    /// Whether a limit settles by usage (then an admitted request gets a `Usage`).
    pub(crate) settles_by_usage: bool,
}

/// One applied limit's decision for one request.
pub(crate) struct Applied {
    /// The entry, by its place in the checked order.
    pub(crate) entry: usize,
    pub(crate) decision: Decision,
    pub(crate) source: Source,
    pub(crate) ticket: Option<super::store::Ticket>,
    /// A policy other than the entry's, when someone else decided (a fallback with
    /// its own quota).
    pub(crate) advertised: Option<Arc<Policy>>,
    /// The plan whose quota decided (a `Plans` store; 0 otherwise).
    pub(crate) plan: u16,
}

/// Why the pipeline answers a request itself.
pub(crate) enum Refusal {
    /// A limit refused: `applied[refused_by]` (429, or the custom refusal); `outage`
    /// when no limit decided it — the store could not be reached (fail closed) or could
    /// not take the key — answered as the layer's outage answer.
    Limited { refused_by: usize, outage: bool },
    /// A cost no limit could ever admit (413).
    TooCostly,
    /// The server cannot tell the key (500).
    KeyFailed(KeyError),
    /// A store failed (500).
    StoreFailed(StoreError),
}

/// Where a request's check stands.
pub(crate) enum Flow {
    /// Every limit answered: forward.
    Admitted,
    /// A remote limit's answer (or a batch's answers) is on its way.
    Waiting(Awaiting),
    /// Answer it here.
    Refused(Refusal),
}

/// One request's way through the plan.
pub(crate) struct Run {
    /// The next entry to check.
    pub(super) next: usize,
    /// The entries a batch on its way answers for, in its order.
    pub(super) batch: Vec<usize>,
    pub(super) cost: u64,
    /// The layer's cost function panicked: answered 500 before any limit is asked.
    cost_failed: Option<KeyError>,
    /// The limits applied so far, in the checked order.
    pub(crate) applied: AppliedList,
    /// Whether the local limits were asked (once, at the start).
    asked: bool,
    /// Local limits that were asked and would admit, taken after the remote ones
    /// (bit `i`: entry `i`; only the first 64 entries are deferred).
    deferred: u64,
}

/// The applied limits, with no allocation for a layer of one limit.
#[derive(Default)]
pub(crate) enum AppliedList {
    #[default]
    None,
    One(Applied),
    Many(Vec<Applied>),
}

impl AppliedList {
    /// In place: a layer of one limit moves its decision once, into `One` (taking
    /// the list out and putting it back moved it three times, on every request).
    #[inline]
    fn push(&mut self, a: Applied) {
        match self {
            Self::None => *self = Self::One(a),
            Self::Many(all) => all.push(a),
            Self::One(_) => {
                if let Self::One(first) = core::mem::take(self) {
                    *self = Self::Many(vec![first, a]);
                }
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[Applied] {
        match self {
            Self::None => &[],
            Self::One(a) => core::slice::from_ref(a),
            Self::Many(all) => all,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [Applied] {
        match self {
            Self::None => &mut [],
            Self::One(a) => core::slice::from_mut(a),
            Self::Many(all) => all,
        }
    }
}

impl<B> Procedure<B> {
    /// Starts a request's run.
    pub(crate) fn start(&self, request: &Request<B>) -> Run {
        let (cost, cost_failed) = match self.cost.of(request) {
            // A request is never free: a cost function's 0 is one unit.
            Ok(cost) => (cost.max(1), None),
            Err(e) => (1, Some(e)),
        };
        Run {
            next: 0,
            batch: Vec::new(),
            cost,
            cost_failed,
            applied: AppliedList::None,
            asked: false,
            deferred: 0,
        }
    }

    /// The policy `applied` is counted under in the metrics: its plan's (a
    /// [`Plans`](super::Plans) store), else its limit's — never a fallback's, which
    /// the metrics' `source` label already tells.
    fn counted_policy<'a>(&'a self, applied: &'a Applied) -> &'a Arc<Policy> {
        let entry = &self.entries[applied.entry];
        entry
            .plan_policy(applied.plan)
            .unwrap_or_else(|| entry.policy())
    }

    /// The policy an applied decision advertises.
    pub(crate) fn policy_of<'a>(&'a self, applied: &'a Applied) -> &'a Arc<Policy> {
        let entry = &self.entries[applied.entry];
        applied
            .advertised
            .as_ref()
            .or_else(|| entry.plan_policy(applied.plan))
            .unwrap_or_else(|| entry.policy())
    }

    /// Checks limits from where `run` stands until one is remote, one refuses, or
    /// all admitted.
    pub(crate) fn drive(&self, run: &mut Run, request: &Request<B>) -> Flow {
        if let Some(e) = run.cost_failed.take() {
            // A layer that only watches goes on at one unit, the failure counted.
            if !self.shadow {
                return Flow::Refused(Refusal::KeyFailed(e));
            }
            observe::failed_in_shadow("cost", &e);
        }
        // A cost of one fits every limit; a larger one is first held against every
        // applicable limit's capacity, so that no limit's "later" hides a "never".
        if run.next == 0 && (run.cost > 1 || self.limit_costs) {
            if let Some(refusal) = self.beyond_capacity(request, run.cost) {
                return Flow::Refused(refusal);
            }
        }
        if !run.asked {
            run.asked = true;
            if let Some(flow) = self.ask_first(run, request) {
                return flow;
            }
        }
        while run.next < self.entries.len() {
            let at = run.next;
            run.next += 1;
            let entry = &self.entries[at];
            if run.deferred & bit(at) != 0 || !entry.applies(request) {
                continue;
            }
            if let Some(batch) = self.batch_of(at) {
                if let Some(group) = self.batch_from(at, batch.channel(), request, run) {
                    return self.send(run, request, batch, group);
                }
            }
            match entry.check(request, run.cost, self.when_no_key) {
                Step::Checked(Checking::Pending(pending)) => {
                    // Resumed by `resume` with the answer for entry `at`.
                    run.next = at;
                    return Flow::Waiting(Awaiting::One(pending));
                }
                step => {
                    if let Some(flow) = self.decided(run, request, at, step) {
                        return flow;
                    }
                }
            }
        }
        while run.deferred != 0 {
            let at = run.deferred.trailing_zeros() as usize;
            run.deferred &= !bit(at);
            let step = self.entries[at].check(request, run.cost, self.when_no_key);
            if let Some(flow) = self.decided(run, request, at, step) {
                return flow;
            }
        }
        self.record_admitted(run);
        Flow::Admitted
    }

    /// Asks every local limit, taking nothing, when there is more than one limit:
    /// `Some` when one refuses (nothing was taken anywhere). Those that would admit
    /// are deferred: taken after every other limit (the remote ones included).
    fn ask_first(&self, run: &mut Run, request: &Request<B>) -> Option<Flow> {
        if self.shadow || self.entries.len() < 2 {
            return None;
        }
        // Those asked that would admit, none taken yet: listed if one refuses.
        let mut would_admit = 0u64;
        for (at, entry) in self.entries.iter().enumerate() {
            if entry.is_remote() {
                break;
            }
            if entry.is_shadow() || !entry.applies(request) {
                continue;
            }
            match entry.peek(request, run.cost, self.when_no_key) {
                // A store that cannot tell is taken in its turn, as before (and listed as
                // it stands if a later one refuses now).
                None => would_admit |= bit(at),
                Some(Step::Checked(Checking::Done(Ok(checked)))) => {
                    let d = checked.decision;
                    if !d.is_allowed() {
                        run.deferred |= would_admit;
                        return self.refused_when_asked(run, request, at);
                    }
                    would_admit |= bit(at);
                    // Half its burst or more left: a race to empty it is unlikely, so it
                    // is taken last and a remote refusal finds it untouched. Closer to
                    // empty, it is taken in its turn, before the remote limits: its
                    // refusal then spares them a take and a give-back.
                    if d.remaining().saturating_mul(2) >= d.limit() {
                        run.deferred |= bit(at);
                    }
                }
                // A request without a key refused, or a key the server cannot tell:
                // known without taking, so answered before anything is taken.
                Some(step @ (Step::Refused | Step::KeyFailed(_))) => {
                    run.deferred |= would_admit;
                    return self.decided(run, request, at, step);
                }
                Some(_) => {}
            }
        }
        None
    }

    /// The deferred limits a refused request never took from, listed as they stand
    /// (its fields name every limit it met, as when their units were given back).
    fn list_deferred(&self, run: &mut Run, request: &Request<B>) {
        while run.deferred != 0 {
            let at = run.deferred.trailing_zeros() as usize;
            run.deferred &= !bit(at);
            if let Some(Checking::Done(Ok(checked))) =
                self.entries[at].standing(request, self.when_no_key)
            {
                let applied = self.applied(at, checked);
                run.applied.push(Applied {
                    ticket: None,
                    ..applied
                });
            }
        }
    }

    /// Entry `at` would refuse: its own check answers (so that a store counting its
    /// refusals counts this one). Should it admit after all (room freed since it was
    /// asked), the units go straight back and the limits are taken in their turn.
    fn refused_when_asked(&self, run: &mut Run, request: &Request<B>, at: usize) -> Option<Flow> {
        let step = self.entries[at].check(request, run.cost, self.when_no_key);
        let flow = self.decided(run, request, at, step);
        if flow.is_none() {
            self.give_back(run);
            run.applied = AppliedList::None;
            run.deferred = 0;
        }
        flow
    }

    /// A 413 if `cost` is above the capacity of a limit that applies and may refuse.
    fn beyond_capacity(&self, request: &Request<B>, cost: u64) -> Option<Refusal> {
        if self.shadow {
            return None;
        }
        let entry = self.entries.iter().find(|e| {
            !e.is_shadow()
                && e.capacity()
                    .is_some_and(|c| e.cost_of(request, cost).is_ok_and(|own| own > c))
                && e.applies(request)
                && !e.lets_through(request, self.when_no_key)
        })?;
        observe::record(entry.policy(), Outcome::Rejected, Source::Memory);
        Some(Refusal::TooCostly)
    }

    /// Applies an answer given without waiting; `Some` when the request is refused.
    pub(super) fn decided(
        &self,
        run: &mut Run,
        request: &Request<B>,
        at: usize,
        step: Step,
    ) -> Option<Flow> {
        let entry = &self.entries[at];
        let answer = match step {
            Step::Checked(Checking::Done(answer)) => answer,
            Step::Unlimited => {
                observe::record(entry.policy(), Outcome::Unlimited, Source::Memory);
                return None;
            }
            Step::Refused => Ok(Checked::new(
                Decision::deny_for(entry.policy().quota(), portero::DENY_FOR_NANOS),
                Source::Memory,
            )),
            // A limit that only watches never changes an answer: its key failure is
            // counted and logged, and the request goes on.
            Step::KeyFailed(e) if self.shadow || entry.is_shadow() => {
                observe::failed_in_shadow("key", &e);
                return None;
            }
            Step::KeyFailed(e) => {
                self.give_back(run);
                return Some(Flow::Refused(Refusal::KeyFailed(e)));
            }
            Step::Checked(Checking::Pending(_)) => Err(StoreError::Faulty(
                "a store answered a batch's preparation with a pending check".into(),
            )),
        };
        self.take(run, request, at, answer).map(Flow::Refused)
    }

    /// Takes the answers a remote limit (or a batch) gave, then goes on.
    pub(crate) fn resume(&self, run: &mut Run, request: &Request<B>, answers: Answers) -> Flow {
        match answers {
            Answers::One(answer) => {
                let at = run.next;
                run.next += 1;
                if let Some(refusal) = self.take(run, request, at, answer) {
                    return Flow::Refused(refusal);
                }
            }
            Answers::Many(answers) => {
                let sent = core::mem::take(&mut run.batch);
                let mut answers = answers.into_iter();
                let mut refused = None;
                for at in sent {
                    let answer = answers.next().unwrap_or_else(|| {
                        Err(StoreError::Faulty(
                            "a batch gave fewer answers than checks".into(),
                        ))
                    });
                    match (&refused, answer) {
                        (None, answer) => refused = self.take(run, request, at, answer),
                        // Decided by the call that was refused, which took nothing:
                        // listed as it stands.
                        (Some(_), Ok(checked)) => {
                            let applied = self.applied(at, checked);
                            run.applied.push(Applied {
                                ticket: None,
                                ..applied
                            });
                        }
                        (Some(_), Err(_)) => {}
                    }
                }
                if let Some(refusal) = refused {
                    return Flow::Refused(refusal);
                }
            }
        }
        self.drive(run, request)
    }

    /// Applies entry `at`'s answer; `Some` when the request is refused (the earlier
    /// limits refunded).
    fn take(
        &self,
        run: &mut Run,
        request: &Request<B>,
        at: usize,
        answer: Result<Checked, StoreError>,
    ) -> Option<Refusal> {
        let entry = &self.entries[at];
        let shadow = self.shadow || entry.is_shadow();
        // `outage`: no limit decided — the store was away and refused without
        // deciding, or could not take the key.
        let (checked, outage) = match answer {
            Ok(checked) => {
                let outage = checked.source == Source::Unavailable;
                (checked, outage)
            }
            // A shadow limit only watches: what it cannot decide refuses nothing.
            Err(StoreError::CostAboveCapacity) if shadow => {
                observe::record(entry.policy(), Outcome::ShadowRejected, Source::Memory);
                return None;
            }
            Err(StoreError::Faulty(e)) if shadow => {
                observe::failed_in_shadow("store", &*e);
                return None;
            }
            Err(StoreError::Unavailable {
                retry_after_nanos,
                source,
            }) => match self.when_unavailable {
                WhenUnavailable::Allow => {
                    if source == Source::Fallback {
                        observe::fallback(entry.policy());
                    }
                    observe::record(entry.policy(), Outcome::Unlimited, source);
                    return None;
                }
                // Until the store can take the key: a full table frees a slot once a
                // tracked key is full again, at most one window after its last
                // request for a quota whose burst is at most its limit — say that
                // rather than a second.
                WhenUnavailable::Reject => {
                    let wait = retry_after_nanos.unwrap_or_else(|| {
                        u64::try_from(entry.policy().window().as_nanos()).unwrap_or(u64::MAX)
                    });
                    let decision = Decision::deny_for(entry.policy().quota(), wait);
                    (Checked::new(decision, source), true)
                }
            },
            Err(StoreError::CostAboveCapacity) => {
                self.give_back(run);
                observe::record(entry.policy(), Outcome::Rejected, Source::Memory);
                return Some(Refusal::TooCostly);
            }
            Err(e) => {
                self.give_back(run);
                return Some(Refusal::StoreFailed(e));
            }
        };
        if checked.source.is_outage_policy() {
            observe::fallback(entry.policy());
        }
        let (source, allowed) = (checked.source, checked.decision.is_allowed());
        let applied = self.applied(at, checked);
        if allowed {
            run.applied.push(applied);
            return None;
        }
        if shadow {
            observe::record(
                self.counted_policy(&applied),
                Outcome::ShadowRejected,
                source,
            );
            // Nothing was taken: no refund is due for it.
            run.applied.push(Applied {
                ticket: None,
                ..applied
            });
            return None;
        }
        self.give_back(run);
        self.list_deferred(run, request);
        observe::record(self.counted_policy(&applied), Outcome::Rejected, source);
        run.applied.push(applied);
        Some(Refusal::Limited {
            refused_by: run.applied.as_slice().len() - 1,
            outage,
        })
    }

    /// Entry `at`'s answer as applied: with the fallback's own policy when a fallback
    /// decided.
    fn applied(&self, at: usize, checked: Checked) -> Applied {
        let advertised = (checked.source == Source::Fallback)
            .then(|| fallback_policy(self.entries[at].policy(), &checked.decision))
            .flatten();
        Applied {
            entry: at,
            decision: checked.decision,
            source: checked.source,
            ticket: checked.ticket,
            advertised,
            plan: checked.plan,
        }
    }

    /// Refunds what the limits applied so far took, newest first, and reports each
    /// as it stands afterwards. A remote limit gives back by settling its admission
    /// at 0 (one script call, by the same rule as a refund): the call runs on its
    /// own, so the refusal does not wait for it, and the limit is listed as it
    /// stood when it admitted.
    pub(crate) fn give_back(&self, run: &mut Run) {
        for applied in run.applied.as_mut_slice().iter_mut().rev() {
            if let Some(ticket) = applied.ticket.take() {
                let entry = &self.entries[applied.entry];
                if !entry.is_remote() {
                    if let Some(after) = entry.refund(ticket) {
                        applied.decision = after;
                    }
                    continue;
                }
                if let Some(after) = self.give_back_remote(applied.entry, ticket) {
                    applied.decision = after;
                }
            }
        }
    }

    fn record_admitted(&self, run: &Run) {
        for applied in run.applied.as_slice() {
            if applied.decision.is_allowed() {
                observe::record(
                    self.counted_policy(applied),
                    Outcome::Admitted,
                    applied.source,
                );
            }
        }
    }

    /// The applied decisions in the declared order, each with the policy it
    /// advertises, and where the refusing one (`refused_by`, a checked-order index)
    /// landed.
    pub(crate) fn in_declared_order<'a>(
        &'a self,
        applied: &'a [Applied],
        refused_by: Option<usize>,
    ) -> (Vec<(Decision, &'a Policy)>, Option<usize>) {
        let mut order: Vec<usize> = (0..applied.len()).collect();
        order.sort_by_key(|&i| self.declared[applied[i].entry]);
        let items = order
            .iter()
            .map(|&i| (applied[i].decision, self.policy_of(&applied[i]).as_ref()))
            .collect();
        let refused = refused_by.and_then(|r| order.iter().position(|&i| i == r));
        (items, refused)
    }
}

/// The deferred-set bit of entry `at` (none past the 64th).
fn bit(at: usize) -> u64 {
    1u64.checked_shl(at as u32).unwrap_or(0)
}

/// The policy a fallback's decision advertises: its own limit, over the entry's
/// window (the fallback's quota is the shared one divided among instances).
fn fallback_policy(policy: &Policy, decision: &Decision) -> Option<Arc<Policy>> {
    if decision.limit() == policy.quota() {
        return None;
    }
    let window = policy.window().as_secs();
    Policy::new(policy.name(), decision.limit(), window)
        .ok()
        .map(Arc::new)
}

/// A run waiting on a remote limit: if the request is dropped before it is decided
/// (the client went away), what the limits took goes back. (A remote check whose
/// answer never came may have been charged: without its answer there is no ticket
/// to give it back by.)
pub(crate) struct Pending<B> {
    pub(crate) plan: Arc<Procedure<B>>,
    run: Option<Run>,
}

impl<B> Pending<B> {
    pub(crate) fn new(plan: Arc<Procedure<B>>, run: Run) -> Self {
        Self {
            plan,
            run: Some(run),
        }
    }

    /// The run, while it is still waiting.
    pub(crate) fn run_mut(&mut self) -> Option<&mut Run> {
        self.run.as_mut()
    }

    /// The run, decided: nothing to give back on drop.
    pub(crate) fn finish(&mut self) -> Option<Run> {
        self.run.take()
    }
}

impl<B> Drop for Pending<B> {
    fn drop(&mut self) {
        if let Some(run) = self.run.as_mut() {
            self.plan.give_back(run);
        }
    }
}
