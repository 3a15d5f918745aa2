//! The Redis race against a throwaway redis-server (installed by `cargo xtask
//! setup`; a missing one fails this test).

use std::error::Error;
use std::future::Future;

use portero_lab::race::Round;
use portero_redis::LocalRedis;

/// Runs `race` (5 rounds of 400 requests against a limit of 50): the script admits
/// exactly 50 in every round, and check-then-act can only err upwards — until the
/// count reaches 50 every request is admitted. (How far up depends on the
/// interleaving.) The rounds, for what else a test looks at.
fn five_rounds(race: impl Future<Output = Result<Vec<Round>, Box<dyn Error>>>) -> Vec<Round> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rounds = runtime.block_on(race).unwrap();
    assert_eq!(rounds.len(), 5);
    for (i, r) in rounds.iter().enumerate() {
        assert_eq!(r.script, 50, "round {i}: the Lua script");
        assert!(r.naive >= 50, "round {i}: naive {}", r.naive);
    }
    rounds
}

#[test]
fn the_atomic_script_admits_exactly_fifty_of_four_hundred_in_every_round() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let rounds = five_rounds(portero_lab::race::run(&server.url(), 5, 400, 50));
    for (i, r) in rounds.iter().enumerate() {
        assert!(r.naive <= 400, "round {i}: naive {}", r.naive);
    }
}

/// The same race against a Redis Cluster of three primaries started by the test: every
/// round's key lives on its own slot's node, and the script still admits exactly 50.
#[test]
fn the_race_against_a_cluster_admits_exactly_fifty_in_every_round() {
    let cluster = portero_redis::LocalCluster::start().expect("a local Redis Cluster");
    five_rounds(portero_lab::race::run_cluster(&cluster.urls(), 5, 400, 50));
}
