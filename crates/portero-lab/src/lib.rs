//! The lab: the experiments of the project's guide (`docs/guide.md`) run through portero's
//! real limiters.
//!
//! [`sim::simulate`] feeds one list of arrivals to all five algorithms on an explicit
//! time axis (fixed windows start at 0) and reports, per algorithm, how many requests
//! were admitted and the largest number admitted (for the queue: released) in any
//! half-open interval `[t, t + W)`. [`scenario`] holds the embedded experiments,
//! [`overload`] the overload experiments, [`svg`] draws them and [`charts`] builds
//! every chart the project commits.
#![deny(missing_docs)]

pub mod arrivals;
pub mod charts;
pub mod contention;
pub mod overload;
pub mod planet;
pub mod race;
pub mod scenario;
pub mod sim;
pub mod svg;

/// What the lab's commands return: their figures, or an error to print.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
