//! Why a configuration was refused.

use std::fmt;

/// Why a configuration was refused: the file, and the reason (with the line and
/// column where the parser knows them, or the descriptor's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as it was named.
    pub file: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.reason)
    }
}

impl std::error::Error for ConfigError {}
