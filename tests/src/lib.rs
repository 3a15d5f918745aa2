//! Shared helpers for portero's integration tests: independent reference models that
//! the lock-free limiters are checked against.
#![deny(missing_docs)]

pub mod reference;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../../README.md")]
pub mod readme {}
