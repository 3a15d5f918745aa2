//! One round trip: the limits script run on Redis within a time budget, behind the
//! node's breaker, its reply read back into decisions (or `None`: the outage policy
//! answers).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use portero::Decision;
use redis::{ErrorKind, RedisError, Value};

use crate::breakers::Breakers;
use crate::call::{Call, Decided, Limited, Mode};
use crate::limiter::RedisLimiter;
use crate::outcome::RedisCheckError;
use crate::outcome::{is_migrating, is_outage, is_stale};

impl RedisLimiter {
    /// Runs the script; `None` when Redis did not decide in time (the caller's outage
    /// policy decides).
    pub(crate) async fn run(
        &self,
        calls: &[Call],
        mode: Mode,
        at_us: u64,
    ) -> Result<Option<Decided>, RedisCheckError> {
        self.run_within(calls, mode, at_us, self.timeout).await
    }

    /// [`run`](Self::run) with `budget` instead of the limiter's timeout (a caller
    /// that already spent part of it).
    pub(crate) async fn run_within(
        &self,
        calls: &[Call],
        mode: Mode,
        at_us: u64,
        budget: Duration,
    ) -> Result<Option<Decided>, RedisCheckError> {
        self.run_with_extra(calls, mode, at_us, budget, &[]).await
    }

    /// [`run_within`](Self::run_within) with `extra` arguments after the limits' (a
    /// settlement's real cost, mark and time).
    pub(crate) async fn run_with_extra(
        &self,
        calls: &[Call],
        mode: Mode,
        at_us: u64,
        budget: Duration,
        extra: &[u64],
    ) -> Result<Option<Decided>, RedisCheckError> {
        let mut invocation = self.script.prepare_invoke();
        for call in calls {
            invocation.key(&call.keys[0]);
            if call.algorithm.uses_second_key() {
                invocation.key(&call.keys[1]);
            }
        }
        // An open breaker: Redis (on a Cluster, the node of these keys) kept timing
        // out, so the outage policy answers now.
        let mut guard = match &self.breakers {
            Some(breakers) => {
                let key = calls.first().map_or("", |c| c.keys[0].as_str());
                let (breaker, read_map) = breakers.of(key);
                if read_map.is_some() {
                    self.read_slot_map(breakers.clone());
                }
                match breaker.try_call_owned() {
                    Ok(call) => BreakerGuard(Some(call)),
                    Err(_) => return Ok(None),
                }
            }
            None => BreakerGuard(None),
        };
        let started = tokio::time::Instant::now();
        let Some(mut connection) = self.link.get(budget, &self.clock).await else {
            guard.failed();
            return Ok(None); // not connected yet: the outage policy answers
        };
        let budget = budget.saturating_sub(started.elapsed());
        // The deadline on Redis's clock, once the connection is made: a lazy
        // limiter learns that clock while connecting (before, its first check's
        // deadline lay in Redis's past and the outage policy answered it).
        let sent = self.clock.local_us();
        let deadline = if at_us == 0 {
            self.clock.redis_time_in(sent, budget)
        } else {
            0
        };
        invocation.arg(deadline).arg(at_us).arg(mode as u8);
        for call in calls {
            invocation
                .arg(&call.algorithm.script_args()[..])
                .arg(call.cost);
        }
        for arg in extra {
            invocation.arg(*arg);
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        // A slot being migrated answers TRYAGAIN (or an ASK the client could not
        // follow) for a moment: ask again, within the same timeout and the same
        // deadline on Redis's clock, rather than answer with the outage policy.
        //
        // A connection that went stale with an old server (Redis was restarted), or
        // the refusal of the last reconnection attempt (made while Redis was away),
        // fails at once, and the connection manager reconnects on that failure: one
        // more try, within the same timeout, is decided by the server that is there
        // now. Never a second send of a script that may have run: a stale connection
        // fails before it sends, a refusal never had a connection. Once only: a
        // Redis that is really down fails that try at once too.
        let attempts = async {
            let mut pause = Duration::from_millis(2);
            let mut stale = true;
            loop {
                match invocation.invoke_async::<Vec<i64>>(&mut connection).await {
                    Err(e) if is_migrating(&e) => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(50));
                    }
                    Err(e) if stale && (is_stale(&e) || e.is_connection_refusal()) => stale = false,
                    answer => return answer,
                }
            }
        };
        let answer = tokio::time::timeout(budget, attempts).await;
        let reply = match answer {
            Ok(Ok(reply)) => {
                guard.answered();
                reply
            }
            Ok(Err(e)) if !is_outage(&e) => {
                guard.answered();
                return Err(self.error(calls, e));
            }
            // Timed out, or Redis unreachable, loading or failing over.
            _ => {
                guard.failed();
                return Ok(None);
            }
        };
        let number = |i: usize| reply.get(i).map(|&v| u64::try_from(v).unwrap_or(0));
        let (Some(status), Some(now)) = (number(0), number(1)) else {
            return Err(self.error(calls, bad_reply()));
        };
        if at_us == 0 {
            self.clock.observe(sent, now);
        }
        if status == 2 {
            return Ok(None); // too late on Redis's clock: nothing was charged
        }
        let mut decided = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let field = |j: usize| number(2 + 8 * i + j);
            let (
                Some(outcome),
                Some(remaining),
                Some(retry_us),
                Some(reset_us),
                Some(taken),
                Some(place),
                Some(noted),
                Some(generation),
            ) = (
                field(0),
                field(1),
                field(2),
                field(3),
                field(4),
                field(5),
                field(6),
                field(7),
            )
            else {
                return Err(self.error(calls, bad_reply()));
            };
            let decision = Decision::new(
                outcome == 1,
                call.algorithm.capacity(),
                remaining,
                1,
                retry_us.saturating_mul(1_000),
                reset_us.saturating_mul(1_000),
            );
            decided.push(Limited {
                decision,
                taken,
                mark: crate::call::Mark {
                    place,
                    noted,
                    generation,
                },
                at_us: now,
            });
        }
        Ok(Some(decided))
    }

    /// Reads the Cluster's slot map in the background (the caller holds the read
    /// turn of [`Breakers::of`]); without a connection yet, the turn ends unused.
    fn read_slot_map(&self, breakers: Arc<Breakers>) {
        let connection = self.link.ready.get().cloned();
        tokio::spawn(async move {
            let Breakers::PerNode(nodes) = &*breakers else {
                return;
            };
            let answer = match connection {
                Some(mut c) => {
                    let mut slots = redis::cmd("CLUSTER");
                    slots.arg("SLOTS");
                    let ask = c.ask_one_node::<Value>(&slots);
                    tokio::time::timeout(Duration::from_secs(1), ask)
                        .await
                        .unwrap_or_else(|_| {
                            Err(RedisError::from((ErrorKind::IoError, "timed out")))
                        })
                }
                None => Err(RedisError::from((ErrorKind::IoError, "not connected"))),
            };
            nodes.learn(answer);
        });
    }

    fn error(&self, calls: &[Call], e: RedisError) -> RedisCheckError {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let key = calls.first().map_or("", |c| c.keys[0].as_str());
        tracing::error!(key = %key, error = %e, "portero-redis: Redis answered a check with an error");
        RedisCheckError::Redis(e)
    }
}

/// A breaker call for one script call: a reply (even an error reply) is a success,
/// no answer in time a failure, and a caller's cancellation neither (abandoned, so a
/// client that gives up early cannot keep a hanging Redis's breaker closed).
struct BreakerGuard(Option<portero::BreakerCall<'static, portero::DefaultClock>>);

impl BreakerGuard {
    fn failed(&mut self) {
        if let Some(call) = self.0.take() {
            call.failure();
        }
    }

    fn answered(&mut self) {
        if let Some(call) = self.0.take() {
            call.success();
        }
    }
}

impl Drop for BreakerGuard {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            call.abandon();
        }
    }
}

fn bad_reply() -> RedisError {
    RedisError::from((
        ErrorKind::TypeError,
        "unexpected reply from the limits script",
    ))
}
