//! The keys of one policy's `portero_requests_total` counters, each built once per
//! policy (feature `metrics`): a request then counts through a key it borrows, where
//! `metrics::counter!` built its labels anew (an allocation) on every request, with or
//! without a recorder.

use std::sync::{Arc, OnceLock};

use metrics::{Key, Label, SharedString};

/// Places for outcomes and sources (by their place in their enums), 8 of each.
const SIDE: usize = 8;

/// The counter keys of one policy, built at first use of each (outcome, source).
/// Equal to any other: a cache of what the policy's name already says.
#[derive(Debug, Clone)]
pub(crate) struct RequestKeys(Arc<[OnceLock<Key>; SIDE * SIDE]>);

impl Default for RequestKeys {
    fn default() -> Self {
        Self(Arc::new(std::array::from_fn(|_| OnceLock::new())))
    }
}

impl RequestKeys {
    /// `f` with the key for `policy`, the outcome at place `o` named `outcome`, and the
    /// source at place `s` named `source`.
    pub(crate) fn with<T>(
        &self,
        policy: &Arc<str>,
        (o, outcome): (usize, &'static str),
        (s, source): (usize, &'static str),
        f: impl FnOnce(&Key) -> T,
    ) -> T {
        let build = || {
            let labels = vec![
                Label::new("policy", SharedString::from(policy.clone())),
                Label::new("outcome", outcome),
                Label::new("source", source),
            ];
            Key::from_parts("portero_requests_total", labels)
        };
        match self.0.get(o * SIDE + s).filter(|_| o < SIDE && s < SIDE) {
            Some(slot) => f(slot.get_or_init(build)),
            None => f(&build()),
        }
    }
}

impl PartialEq for RequestKeys {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RequestKeys {}
