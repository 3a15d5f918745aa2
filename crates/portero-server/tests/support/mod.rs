//! What the library-level gateway tests share: a fixed instant, a gateway for one
//! file's text, and a descriptor of one hit.
#![allow(dead_code)] // each test binary uses the helpers it needs

pub mod server;

use portero_server::config;
use portero_server::decide::Descriptor;
use portero_server::gateway::Gateway;

/// 2027-01-15 00:00:00 UTC: the start of a second, a minute, an hour and a day.
pub const NOW: u64 = 1_800_000_000 * 1_000_000_000 - 1_800_000_000 % 86_400 * 1_000_000_000;

/// A gateway for the configuration `yaml` (1,000 keys a rule, no global shadow).
pub fn gateway(yaml: &str) -> Gateway {
    let tree = config::from_texts(&[("test.yaml".into(), yaml.into())]).expect("loads");
    Gateway::new(tree, 1_000, false)
}

/// A descriptor of `entries`, one hit, no override.
pub fn descriptor(entries: &[(&str, &str)]) -> Descriptor {
    Descriptor {
        entries: entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        limit: None,
        hits: 1,
    }
}
