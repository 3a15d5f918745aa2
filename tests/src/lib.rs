//! Shared helpers for portero's integration tests: independent reference models that
//! the lock-free limiters are checked against.
#![deny(missing_docs)]

pub mod reference;
pub mod twins;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../../README.md")]
pub mod readme {}

/// The book's pages (`docs/book`), by task: each Rust block is compiled and run as a
/// doc test, and `cargo xtask docs` renders them here.
pub mod book {
    #[doc = include_str!("../../docs/book/README.md")]
    pub mod contents {}
    #[doc = include_str!("../../docs/book/install.md")]
    pub mod install {}
    #[doc = include_str!("../../docs/book/core.md")]
    pub mod core {}
    #[doc = include_str!("../../docs/book/http.md")]
    pub mod http {}
    #[doc = include_str!("../../docs/book/tokens-and-logins.md")]
    pub mod tokens_and_logins {}
    #[doc = include_str!("../../docs/book/redis.md")]
    pub mod redis {}
    #[doc = include_str!("../../docs/book/gateway.md")]
    pub mod gateway {}
    #[doc = include_str!("../../docs/book/edge.md")]
    pub mod edge {}
    #[doc = include_str!("../../docs/book/choosing.md")]
    pub mod choosing {}
    #[doc = include_str!("../../docs/book/guarantees.md")]
    pub mod guarantees {}
    #[doc = include_str!("../../docs/book/lab.md")]
    pub mod lab {}
    #[doc = include_str!("../../docs/book/setup.md")]
    pub mod setup {}
}
