//! The waiting line itself, without clocks or tasks: bounded, each entry with a
//! deadline, served oldest first or newest first.
//!
//! Invariant: at most `capacity` entries wait; [`pop`](DeadlineQueue::pop) never
//! returns an entry whose deadline has passed (those are handed to the caller's
//! `expired` callback instead, so the caller can answer them without running them).

use std::collections::VecDeque;

/// Which waiting request is served next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Oldest first ("wine": old is better). Fair, and with a line no longer than the
    /// clients' patience every queued request is served in time. The default: a
    /// bounded queue with deadlines already drops what has gone stale.
    #[default]
    OldestFirst,
    /// Newest first ("milk": fresh is better). Under sustained overload the newest
    /// request has the most time left before its client gives up, so interactive
    /// traffic gets more answers in time; the oldest wait until their deadline drops
    /// them.
    NewestFirst,
}

/// A bounded line of `(deadline, item)`; see the [module docs](self).
#[derive(Debug)]
pub struct DeadlineQueue<D, T> {
    entries: VecDeque<(D, T)>,
    capacity: usize,
    order: Order,
}

impl<D: Ord + Copy, T> DeadlineQueue<D, T> {
    /// An empty line for at most `capacity` waiting entries.
    pub fn new(capacity: usize, order: Order) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            order,
        }
    }

    /// Adds `item`, which must be served before `deadline`; a full line gives it back.
    pub fn push(&mut self, deadline: D, item: T) -> Result<(), T> {
        if self.entries.len() >= self.capacity {
            return Err(item);
        }
        self.entries.push_back((deadline, item));
        Ok(())
    }

    /// The next entry to serve at `now`, in the line's order; entries met on the way
    /// whose deadline is not after `now` go to `expired`.
    pub fn pop(&mut self, now: D, mut expired: impl FnMut(T)) -> Option<T> {
        loop {
            let (deadline, item) = match self.order {
                Order::OldestFirst => self.entries.pop_front()?,
                Order::NewestFirst => self.entries.pop_back()?,
            };
            if deadline > now {
                return Some(item);
            }
            expired(item);
        }
    }

    /// Drops the entries `keep` refuses (those whose client left).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.entries.retain(|(_, item)| keep(item));
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_in_order_skips_the_expired_and_refuses_when_full() {
        for (order, first) in [(Order::OldestFirst, 'a'), (Order::NewestFirst, 'c')] {
            let mut q = DeadlineQueue::new(3, order);
            q.push(10, 'a').unwrap();
            q.push(5, 'b').unwrap();
            q.push(10, 'c').unwrap();
            assert_eq!(q.push(10, 'd'), Err('d'));
            let mut gone = Vec::new();
            assert_eq!(q.pop(6, |x| gone.push(x)), Some(first));
            assert_eq!(
                q.pop(6, |x| gone.push(x)),
                Some(if first == 'a' { 'c' } else { 'a' })
            );
            assert_eq!(gone, ['b'], "past its deadline: never served");
            assert!(q.is_empty());
        }
    }
}
