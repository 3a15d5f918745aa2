//! Per-plan limits: one store per plan (free, pro, enterprise), each with its own
//! quota and its own policy, and a key function that says which plan a request's
//! key is on. The fields describe the client's own plan only.
//!
//! Invariant: a key is only ever counted in the store of the plan its request named,
//! and a ticket goes back to the store that took it (it carries the plan). Memory is
//! bounded per plan, by each store's own cap.

use std::sync::Arc;

use portero::Decision;

use super::entry::Limit;
use super::store::{Checked, Checking, Store, StoreError, Ticket};
use crate::headers::Policy;

/// A store per plan, as one [`Store`] keyed by `(plan, key)`: the plan is named by
/// its policy's name (`"pro"`), or by the place of its store in the order
/// [`plan`](Self::plan) added them (0, 1, 2, …: [`WhichPlan`]), and the key function
/// returns it with the key (from a lookup of the API key, a claim of a verified
/// token — never a field the client sets). [`limit`](Self::limit) makes the layer's
/// [`Limit`]: each plan's policy is its clients' policy, in their fields and in the
/// metrics' `policy` label.
///
/// A key that changes plan starts fresh in its new plan's store; what it used
/// under the old plan stays there (and counts again if it comes back before that
/// refills). Requests without a key, when the layer gives them a shared bucket,
/// share plan 0's. A request naming a plan that was not added is answered 500 (a
/// fault of the key function, not the client's).
///
/// ```
/// use std::sync::Arc;
/// use http::Request;
/// use portero::{Gcra, KeyedLimiter, Quota};
/// use portero_http::{Limit, LimitLayer, Plans, Policy};
///
/// let plan = |name: &str, per_minute| -> Result<_, Box<dyn std::error::Error>> {
///     let q = Quota::per_minute(per_minute)?;
///     Ok((Policy::for_quota(name, &q)?, KeyedLimiter::new(Gcra::new(q), 100_000)))
/// };
/// let (free, pro) = (plan("free", 60)?, plan("pro", 600)?);
/// let plans = Plans::new().plan(free.0, free.1).plan(pro.0, pro.1);
/// // The plan of an API key: a lookup the service owns (here, a prefix).
/// let key = |req: &Request<()>| {
///     let api_key = req.headers().get("x-api-key")?.to_str().ok()?.to_owned();
///     let plan = if api_key.starts_with("pro_") { "pro" } else { "free" };
///     Some((plan, api_key))
/// };
/// let layer = LimitLayer::new(plans.limit(key));
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Plans<St> {
    plans: Vec<(Arc<Policy>, St)>,
}

impl<St> Default for Plans<St> {
    fn default() -> Self {
        Self { plans: Vec::new() }
    }
}

impl<St> core::fmt::Debug for Plans<St> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names: Vec<&str> = self.plans.iter().map(|(p, _)| p.name()).collect();
        f.debug_struct("Plans").field("plans", &names).finish()
    }
}

impl<St> Plans<St> {
    /// No plans yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next plan (numbered from 0 in the order added): its policy (what
    /// its clients' fields say) and its store. At most 65,536 plans.
    pub fn plan(mut self, policy: Policy, store: St) -> Self {
        if self.plans.len() <= usize::from(u16::MAX) {
            self.plans.push((Arc::new(policy), store));
        }
        self
    }

    /// The layer's [`Limit`] over these plans, with the key function `key`: the
    /// limit's own policy is the first plan's (requests without a key, when the layer
    /// gives them a shared bucket, share plan 0's), so no policy is made up for it.
    /// Without a plan yet, a policy of one request a second named `plans`.
    pub fn limit<F>(self, key: F) -> Limit<Self, F> {
        let first = self.plans.first().map(|(policy, _)| Policy::clone(policy));
        let policy = first.unwrap_or_else(|| {
            Policy::new("plans", 1, 1).expect("a token and a window of one second")
        });
        Limit::new(self, policy, key)
    }

    fn of(&self, plan: usize) -> Result<&St, StoreError> {
        self.plans
            .get(plan)
            .map(|(_, store)| store)
            .ok_or_else(|| StoreError::Faulty(format!("no plan {plan} was added").into()))
    }

    /// The place of the plan `which` names.
    fn place<P: WhichPlan>(&self, which: &P) -> Result<usize, StoreError> {
        which
            .place_in(self.plans.iter().map(|(p, _)| p.name()))
            .ok_or_else(|| {
                StoreError::Faulty(format!("no plan {} was added", which.shown()).into())
            })
    }
}

/// How a key function names a request's plan: by its policy's name (`&'static str`,
/// `String`, `Arc<str>`) or by its place in the order the plans were added (`usize`).
pub trait WhichPlan {
    /// The place of this plan among `names` (the plans' policy names, in order).
    fn place_in<'a>(&self, names: impl Iterator<Item = &'a str>) -> Option<usize>;
    /// This plan as an error message shows it.
    fn shown(&self) -> String;
}

impl WhichPlan for usize {
    fn place_in<'a>(&self, names: impl Iterator<Item = &'a str>) -> Option<usize> {
        (*self < names.count()).then_some(*self)
    }
    fn shown(&self) -> String {
        self.to_string()
    }
}

/// Names compare as the policies spell them.
macro_rules! plan_by_name {
    ($($t:ty),*) => {$(
        impl WhichPlan for $t {
            fn place_in<'a>(&self, mut names: impl Iterator<Item = &'a str>) -> Option<usize> {
                let name: &str = self;
                names.position(|n| n == name)
            }
            fn shown(&self) -> String {
                format!("{:?}", &**self)
            }
        }
    )*};
}
plan_by_name!(&'static str, String, Arc<str>);

/// `checked` as plan `plan`'s answer (its tickets go back to that plan's store).
fn on_plan(mut checked: Checked, plan: u16) -> Checked {
    checked.plan = plan;
    if let Some(ticket) = checked.ticket.as_mut() {
        ticket.plan = plan;
    }
    checked
}

/// A store's answer, marked as plan `plan`'s.
fn marked(answer: Checking, plan: u16) -> Checking {
    match answer {
        Checking::Done(done) => Checking::Done(done.map(|c| on_plan(c, plan))),
        Checking::Pending(pending) => {
            Checking::Pending(Box::pin(
                async move { pending.await.map(|c| on_plan(c, plan)) },
            ))
        }
    }
}

impl<P: WhichPlan, K, St: Store<K>> Store<(P, K)> for Plans<St> {
    fn check_key(&self, key: Option<(P, K)>, cost: u64) -> Checking {
        let found = self
            .split(key)
            .and_then(|(plan, key)| Ok((self.of(plan)?, plan, key)));
        match found {
            Ok((store, plan, key)) => marked(store.check_key(key, cost), plan as u16),
            Err(e) => Checking::Done(Err(e)),
        }
    }

    fn standing(&self, key: Option<(P, K)>) -> Checking {
        let found = self
            .split(key)
            .and_then(|(plan, key)| Ok((self.of(plan)?, plan, key)));
        match found {
            Ok((store, plan, key)) => marked(store.standing(key), plan as u16),
            Err(e) => Checking::Done(Err(e)),
        }
    }

    fn ask_without_taking(
        &self,
        key: Option<(P, K)>,
        cost: u64,
    ) -> Option<Result<Checked, StoreError>> {
        let found = self
            .split(key)
            .and_then(|(plan, key)| Ok((self.of(plan)?, plan, key)));
        match found {
            Ok((store, plan, key)) => store
                .ask_without_taking(key, cost)
                .map(|answer| answer.map(|c| on_plan(c, plan as u16))),
            Err(e) => Some(Err(e)),
        }
    }

    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        self.of(usize::from(ticket.plan))
            .ok()?
            .refund_ticket(ticket)
    }

    fn settle_ticket(&self, ticket: Ticket, real: u64) -> Option<Checking> {
        self.of(usize::from(ticket.plan))
            .ok()?
            .settle_ticket(ticket, real)
    }

    fn forget(&self, ticket: Ticket) -> Option<Checking> {
        self.of(usize::from(ticket.plan)).ok()?.forget(ticket)
    }

    fn plan_of(&self, key: Option<&(P, K)>) -> u16 {
        key.map_or(0, |(plan, _)| {
            self.place(plan)
                .map_or(u16::MAX, |p| u16::try_from(p).unwrap_or(u16::MAX))
        })
    }

    fn plan_policy(&self, plan: u16) -> Option<&Arc<Policy>> {
        self.plans.get(usize::from(plan)).map(|(policy, _)| policy)
    }

    /// The largest plan's: a cost above a smaller plan's capacity is answered 413 by
    /// that plan's store when its client asks.
    fn capacity(&self) -> Option<u64> {
        self.plans
            .iter()
            .map(|(_, store)| store.capacity())
            .try_fold(0, |most, c| c.map(|c| most.max(c)))
    }

    fn is_remote(&self) -> bool {
        self.plans.iter().any(|(_, store)| store.is_remote())
    }
}

impl<St> Plans<St> {
    /// The plan's place and the key (no key: plan 0's shared bucket).
    fn split<P: WhichPlan, K>(
        &self,
        key: Option<(P, K)>,
    ) -> Result<(usize, Option<K>), StoreError> {
        match key {
            Some((plan, key)) => Ok((self.place(&plan)?, Some(key))),
            None => Ok((0, None)),
        }
    }
}
