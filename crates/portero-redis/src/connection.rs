//! The connection to Redis: one server or a Cluster, made at once or lazily, and
//! the version check a new connection passes.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

use crate::clock::RedisClock;

/// The oldest Redis the script runs on.
const MIN_REDIS_MAJOR: u64 = 5;
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// One server (reconnecting in the background) or a Cluster (following its slots:
/// `MOVED` and `ASK` are handled by redis-rs's cluster connection).
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// The connection: made at once ([`RedisLimiter::connect`]), or on first use and again
/// after every failed attempt ([`RedisLimiter::connect_lazy`]).
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) ready: Arc<tokio::sync::OnceCell<Connection>>,
    // How to make it, for a lazy limiter.
    pub(crate) client: Option<redis::Client>,
    // A Cluster runs one script only on keys of one slot, and has a breaker per node.
    pub(crate) cluster: bool,
}

impl Link {
    /// The connection, making it within `budget` if it is not made yet; `None` if it
    /// cannot be had in time (Redis down at start-up: the outage policy answers).
    pub(crate) async fn get(&self, budget: Duration, clock: &RedisClock) -> Option<Connection> {
        if let Some(c) = self.ready.get() {
            return Some(c.clone());
        }
        let client = self.client.clone()?;
        let made = self.ready.get_or_try_init(|| establish(client, clock));
        match tokio::time::timeout(budget, made).await {
            Ok(Ok(c)) => Some(c.clone()),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "portero-redis: cannot connect yet; the outage policy answers");
                None
            }
            Err(_) => None,
        }
    }
}

/// Connects to one server and checks it: Redis 5 or newer, and its clock.
pub(crate) async fn establish(
    client: redis::Client,
    clock: &RedisClock,
) -> Result<Connection, RedisError> {
    // No response timeout on the connection: each check bounds its own wait
    // (`timeout`), so a caller who allows more time gets it.
    //
    // One attempt per reconnection, no retry: redis-rs waits a second or more before
    // a retry, and every check meanwhile waits on it — past its timeout, so the
    // outage policy answered checks that a Redis back after a moment could have
    // decided. A check that finds the last attempt refused starts the next one and
    // asks once more (`round_trip`), so Redis back is Redis deciding at once.
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(CONNECT_TIMEOUT)
        .set_number_of_retries(0);
    let connection = ConnectionManager::new_with_config(client, config).await?;
    let mut connection = Connection::Single(connection);
    check_server(&mut connection, clock).await?;
    Ok(connection)
}

/// Refuses a server older than Redis 5, and reads its clock once.
pub(crate) async fn check_server(
    connection: &mut Connection,
    clock: &RedisClock,
) -> Result<(), RedisError> {
    let info: String = connection
        .ask_one_node(redis::cmd("INFO").arg("server"))
        .await?;
    check_version(&info)?;
    let sent = clock.local_us();
    let (secs, micros): (u64, u64) = connection.ask_one_node(&redis::cmd("TIME")).await?;
    clock.observe(sent, secs * 1_000_000 + micros);
    Ok(())
}

impl Connection {
    /// A command that concerns no key, on one node (any node of a Cluster).
    pub(crate) async fn ask_one_node<T: redis::FromRedisValue>(
        &mut self,
        cmd: &Cmd,
    ) -> Result<T, RedisError> {
        match self {
            Self::Single(c) => cmd.query_async(c).await,
            Self::Cluster(c) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                redis::from_redis_value(&c.route_command(cmd, route).await?)
            }
        }
    }
}

/// Refuses servers older than Redis 5 (from `INFO server`'s `redis_version`).
pub(crate) fn check_version(info: &str) -> Result<(), RedisError> {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("");
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(m) if m >= MIN_REDIS_MAJOR => Ok(()),
        _ => Err(RedisError::from((
            ErrorKind::ClientError,
            "portero-redis needs Redis 5.0 or newer",
            format!("the server reports version {version:?}"),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_before_redis_5_are_refused_by_name() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_mode:standalone\r\n");
        assert!(check_version(&info("7.0.15")).is_ok());
        assert!(check_version(&info("5.0.0")).is_ok());
        for old in ["4.0.14", "3.2.12", "garbage", ""] {
            let e = check_version(&info(old)).unwrap_err();
            assert!(e.to_string().contains("Redis 5.0 or newer"), "{e}");
        }
        assert!(check_version("no version here").is_err());
    }
}
