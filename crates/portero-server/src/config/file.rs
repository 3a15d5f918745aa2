//! One configuration file as written: envoyproxy/ratelimit's YAML, field by field.
//!
//! Every field its README documents is read with that meaning; a field it does not
//! know is an error naming it (envoyproxy/ratelimit rejects unknown keys too), and so
//! is a value of the wrong type. What the fields *mean* together (units, duplicates,
//! `replaces`, wildcards) is checked when the tree is built (`config::tree`).

use serde::Deserialize;

/// A file: one domain and its descriptors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DomainFile {
    #[serde(default)]
    pub(crate) domain: String,
    #[serde(default)]
    pub(crate) descriptors: Vec<DescriptorEntry>,
}

/// One descriptor of a list, and the lists nested under it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescriptorEntry {
    #[serde(default)]
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) value: String,
    pub(crate) rate_limit: Option<RateLimitEntry>,
    #[serde(default)]
    pub(crate) descriptors: Vec<DescriptorEntry>,
    #[serde(default)]
    pub(crate) shadow_mode: bool,
    /// Read and accepted; a quota answer is not given (the field is envoyproxy's).
    #[serde(default)]
    #[allow(dead_code)] // read so that a file using it loads
    pub(crate) quota_mode: bool,
    #[serde(default)]
    pub(crate) detailed_metric: bool,
    #[serde(default)]
    pub(crate) value_to_metric: bool,
    #[serde(default)]
    pub(crate) share_threshold: bool,
    /// Free-form, passed through by envoyproxy/ratelimit; accepted and unused here.
    #[serde(default)]
    #[allow(dead_code)] // read so that a file using it loads
    pub(crate) metadata: Option<serde::de::IgnoredAny>,
}

/// A descriptor's limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitEntry {
    #[serde(default)]
    pub(crate) requests_per_unit: u32,
    #[serde(default)]
    pub(crate) unit: String,
    #[serde(default)]
    pub(crate) unlimited: bool,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) replaces: Vec<Replaces>,
    /// portero's own additions to a rule (envoyproxy/ratelimit has no such key, so a
    /// file without it reads the same in both).
    pub(crate) portero: Option<PorteroEntry>,
}

/// portero's keys of a rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PorteroEntry {
    /// The rule's answer while Redis is away (`open`, `closed`, `local`).
    pub(crate) when_down: Option<String>,
    /// How it counts (`fixed-window`, `sliding-window-counter`, `gcra`).
    pub(crate) algorithm: Option<String>,
    /// GCRA's requests at once.
    pub(crate) burst: Option<u32>,
    /// Units an instance borrows from Redis at once.
    pub(crate) lease: Option<u64>,
    /// How long a lease is spent for (ms).
    pub(crate) lease_ms: Option<u64>,
}

/// A rule this one replaces, by name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Replaces {
    #[serde(default)]
    pub(crate) name: String,
}

/// Reads one file's text (`name` names it in errors).
pub(crate) fn parse(
    name: &str,
    text: &str,
) -> Result<DomainFile, crate::config::error::ConfigError> {
    serde_saphyr::from_str(text).map_err(|e| crate::config::error::ConfigError {
        file: name.to_string(),
        reason: e.to_string(),
    })
}
