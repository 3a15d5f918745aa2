//! The Redis race: two instances share a limit of 50 per minute and receive
//! 400 concurrent requests. Reading the count, deciding in the instance and then
//! incrementing (`GET`, then `INCR`) lets requests decide on the same stale count and
//! over-admit; the same window as one Lua script ([`portero_redis`]) admits exactly
//! the limit.

use std::error::Error;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portero_redis::{RedisAlgorithm, RedisLimiter};
use redis::aio::ConnectionLike;
use redis::AsyncCommands;

/// What one round admitted, each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Check-then-act: `GET`, compare in the instance, `INCR` + `EXPIRE`.
    pub naive: u64,
    /// The atomic Lua script.
    pub script: u64,
}

/// Runs `rounds` rounds of `requests` concurrent requests, split between two
/// instances (two connections), against a limit of `limit` per minute, both ways.
pub async fn run(
    url: &str,
    rounds: u32,
    requests: u32,
    limit: u64,
) -> Result<Vec<Round>, Box<dyn Error>> {
    let client = redis::Client::open(url)?;
    let naive = [
        client.get_multiplexed_async_connection().await?,
        client.get_multiplexed_async_connection().await?,
    ];
    let algorithm = RedisAlgorithm::fixed_window(limit, Duration::from_secs(60))?;
    let scripted = [
        RedisLimiter::connect(url, algorithm).await?,
        RedisLimiter::connect(url, algorithm).await?,
    ];
    race(naive, scripted, rounds, requests, limit).await
}

/// [`run`] against a Redis Cluster (any of its nodes' URLs): each round's key lives on
/// the node that owns its slot.
pub async fn run_cluster(
    urls: &[String],
    rounds: u32,
    requests: u32,
    limit: u64,
) -> Result<Vec<Round>, Box<dyn Error>> {
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    let client = redis::cluster::ClusterClient::new(nodes.clone())?;
    let naive = [
        client.get_async_connection().await?,
        client.get_async_connection().await?,
    ];
    let algorithm = RedisAlgorithm::fixed_window(limit, Duration::from_secs(60))?;
    let scripted = [
        RedisLimiter::connect_cluster(&nodes, algorithm).await?,
        RedisLimiter::connect_cluster(&nodes, algorithm).await?,
    ];
    race(naive, scripted, rounds, requests, limit).await
}

async fn race<C>(
    naive: [C; 2],
    scripted: [RedisLimiter; 2],
    rounds: u32,
    requests: u32,
    limit: u64,
) -> Result<Vec<Round>, Box<dyn Error>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let run_id = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let prefix = format!("portero-lab:race:{run_id}:");
    let scripted = scripted.map(|l| l.prefix(&prefix).map(|l| l.timeout(Duration::from_secs(5))));
    let [a, b] = scripted;
    let scripted = [a?, b?];
    let mut out = Vec::new();
    for round in 0..rounds {
        let key = format!("portero-lab:race:{run_id}:naive:{round}");
        let tasks: Vec<_> = (0..requests)
            .map(|i| {
                let mut con = naive[i as usize % 2].clone();
                let key = key.clone();
                tokio::spawn(async move {
                    let used: Option<u64> = con.get(&key).await?;
                    if used.unwrap_or(0) >= limit {
                        return Ok::<_, redis::RedisError>(false);
                    }
                    let _: u64 = con.incr(&key, 1).await?;
                    let _: bool = con.expire(&key, 60).await?;
                    Ok(true)
                })
            })
            .collect();
        let mut naive_admitted = 0;
        for t in tasks {
            naive_admitted += u64::from(t.await??);
        }
        let key = format!("script:{round}");
        let tasks: Vec<_> = (0..requests)
            .map(|i| {
                let limiter = scripted[i as usize % 2].clone();
                let key = key.clone();
                tokio::spawn(async move { limiter.check(&key, 1).await })
            })
            .collect();
        let mut script_admitted = 0;
        for t in tasks {
            let verdict = t.await??;
            if verdict.served_by != portero_redis::ServedBy::Redis {
                return Err("Redis did not answer a scripted check within 5 s".into());
            }
            script_admitted += u64::from(verdict.decision.is_allowed());
        }
        out.push(Round {
            naive: naive_admitted,
            script: script_admitted,
        });
    }
    Ok(out)
}
