//! Limits that travel together: consecutive remote limits whose stores share a
//! [`Batch`] channel (Redis limits on one connection) are prepared and sent in one
//! call, itself all or none, and the request waits for their answers at once.
//! Never a shadow limit: a batch is all or none, and a limit that only watches must
//! not stop the others being charged.

use http::Request;

use super::awaiting::Awaiting;
use super::entry::{Entry, Prep};
use super::procedure::{Flow, Procedure, Run};
use super::store::Batch;

impl<B> Procedure<B> {
    /// The batch entry `at` can be sent in (none when the whole layer is shadow).
    pub(super) fn batch_of(&self, at: usize) -> Option<&dyn Batch> {
        if self.shadow || !self.batching {
            return None;
        }
        batchable(&*self.entries[at])
    }

    /// Entry `at` and the applicable entries right after it on the same `channel`,
    /// if there is at least one (then `run.next` moves past them).
    pub(super) fn batch_from(
        &self,
        at: usize,
        channel: usize,
        request: &Request<B>,
        run: &mut Run,
    ) -> Option<Vec<usize>> {
        let mut group: Option<Vec<usize>> = None;
        let mut end = at + 1;
        while end < self.entries.len() {
            if self.entries[end].applies(request) {
                match self.batch_of(end) {
                    Some(b) if b.channel() == channel => {
                        group.get_or_insert_with(|| vec![at]).push(end);
                    }
                    _ => break,
                }
            }
            end += 1;
        }
        if group.is_some() {
            run.next = end;
        }
        group
    }

    /// Prepares the `group`'s checks and sends them in one call; a limit decided
    /// without a call (no key, a remembered refusal) is applied first, and a refusal
    /// among them sends nothing.
    pub(super) fn send(
        &self,
        run: &mut Run,
        request: &Request<B>,
        batch: &dyn Batch,
        group: Vec<usize>,
    ) -> Flow {
        let mut checks = Vec::with_capacity(group.len());
        let mut sent = Vec::with_capacity(group.len());
        for at in group {
            match self.entries[at].prepare(request, run.cost, self.when_no_key) {
                Prep::Prepared(check) => {
                    checks.push(check);
                    sent.push(at);
                }
                Prep::Decided(step) => {
                    if let Some(flow) = self.decided(run, request, at, step) {
                        return flow;
                    }
                }
            }
        }
        if checks.is_empty() {
            return self.drive(run, request);
        }
        run.batch = sent;
        Flow::Waiting(Awaiting::Many(batch.send(checks)))
    }
}

/// The batch a limit can travel in: never a shadow limit's (a batch is all or none,
/// and a limit that only watches must not stop the others being charged).
pub(crate) fn batchable<B>(entry: &dyn Entry<B>) -> Option<&dyn Batch> {
    if entry.is_shadow() {
        return None;
    }
    entry.batch()
}
