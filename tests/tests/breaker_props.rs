//! The circuit breaker against a textbook model that numbers its cycles without bound
//! and remembers which cycle admitted each call: random calls, reports in any order
//! (late ones included), hung probes and time steps; both agree on every answer.

use std::time::Duration;

use portero::{BreakerCall, CircuitBreaker, ManualClock};
use proptest::prelude::*;

const NANOS_PER_MS: u64 = 1_000_000;

#[derive(Clone, Copy, PartialEq, Debug)]
enum M {
    Closed(u32),
    Open(u64),
    Half(u64),
}

struct Model {
    mode: M,
    cycle: u64,
    fails: u32,
    open_ms: u64,
    probe_ms: u64,
}

impl Model {
    fn next(&mut self, mode: M) {
        self.cycle += 1;
        self.mode = mode;
    }
    fn settle(&mut self, now: u64) {
        if let M::Half(deadline) = self.mode {
            if now >= deadline {
                self.next(M::Open(deadline + self.open_ms));
            }
        }
    }
    fn enter(&mut self, now: u64) -> Option<(u64, bool)> {
        self.settle(now);
        match self.mode {
            M::Closed(_) => Some((self.cycle, false)),
            M::Open(until) if now >= until => {
                self.next(M::Half(now + self.probe_ms));
                Some((self.cycle, true))
            }
            _ => None,
        }
    }
    fn report(&mut self, cycle: u64, probe: bool, ok: bool, now: u64) {
        if cycle != self.cycle {
            return;
        }
        match self.mode {
            M::Closed(n) if !probe => {
                let n = if ok { 0 } else { n + 1 };
                if n >= self.fails {
                    self.next(M::Open(now + self.open_ms));
                } else {
                    self.mode = M::Closed(n);
                }
            }
            M::Half(deadline) if probe && ok && now < deadline => self.next(M::Closed(0)),
            M::Half(deadline) if probe => self.next(M::Open(now.min(deadline) + self.open_ms)),
            _ => {}
        }
    }
}

proptest! {
    #[test]
    fn breaker_matches_the_model(
        fails in 1u32..4,
        open_ms in 1u64..50,
        probe_ms in 1u64..50,
        ops in proptest::collection::vec((0u8..4, 0u64..40, any::<bool>(), any::<prop::sample::Index>()), 1..150),
    ) {
        let b = CircuitBreaker::new(fails, Duration::from_millis(open_ms))
            .unwrap()
            .with_probe_timeout(Duration::from_millis(probe_ms))
            .unwrap()
            .with_clock(ManualClock::new());
        let mut m = Model { mode: M::Closed(0), cycle: 0, fails, open_ms, probe_ms };
        let mut now_ms = 0u64;
        let mut out: Vec<(BreakerCall<'_, ManualClock>, (u64, bool))> = Vec::new();
        for (op, step, ok, pick) in ops {
            let now = now_ms * NANOS_PER_MS;
            match op {
                0 => now_ms += step,
                1 | 2 => {
                    let got = b.try_call_at(now);
                    let want = m.enter(now_ms);
                    prop_assert_eq!(got.is_ok(), want.is_some(), "call at {} ms", now_ms);
                    if let (Ok(call), Some(tag)) = (got, want) {
                        prop_assert_eq!(call.is_probe(), tag.1);
                        out.push((call, tag));
                    }
                }
                _ if !out.is_empty() => {
                    let (call, (cycle, probe)) = out.swap_remove(pick.index(out.len()));
                    m.settle(now_ms);
                    m.report(cycle, probe, ok, now_ms);
                    if ok { call.success_at(now) } else { call.failure_at(now) }
                }
                _ => {}
            }
            prop_assert_eq!(b.allows_call_at(now_ms * NANOS_PER_MS), {
                let mut probe_model = Model { ..m };
                probe_model.enter(now_ms).is_some()
            });
        }
        core::mem::forget(out); // unreported calls would report failures on drop
    }
}
