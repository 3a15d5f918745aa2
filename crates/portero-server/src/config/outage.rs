//! What a rule answers while its shared store (Redis) does not: the one place the
//! names of the outage policies are read.

/// A rule's answer while Redis is away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// Admit: availability over protection (what envoyproxy/ratelimit's users get from
    /// Envoy's default `failure_mode_deny: false` when the service errs).
    Open,
    /// Refuse: protection over availability.
    Closed,
    /// Count in this instance's memory, with the rule's own limit: each instance
    /// admits up to the limit, so a fleet of `n` up to `n` times it, for the time
    /// Redis is away.
    Local,
}

impl Outage {
    /// The policy a configuration names (`open`, `closed`, `local`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "open" => Self::Open,
            "closed" => Self::Closed,
            "local" => Self::Local,
            _ => return None,
        })
    }

    /// Every name [`from_name`](Self::from_name) reads, for errors.
    pub const NAMES: &'static str = "open, closed or local";
}
