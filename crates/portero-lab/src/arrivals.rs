//! Reading arrival files: one time in seconds per line.

use std::fmt;

/// Why an arrivals file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// The latest arrival accepted, in seconds (about 292 years: portero's time range).
pub const MAX_SECONDS: f64 = 9.2e9;

/// Parses one time in seconds per line (decimals allowed, any order; blank lines and
/// lines starting with `#` are skipped) into sorted nanoseconds.
pub fn parse(text: &str) -> Result<Vec<u64>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| ParseError {
            line: i + 1,
            message,
        };
        let secs: f64 = line
            .parse()
            .map_err(|_| err(format!("{line:?} is not a number of seconds")))?;
        if !secs.is_finite() || secs < 0.0 {
            return Err(err(format!("{line:?}: times must be finite and ≥ 0")));
        }
        if secs > MAX_SECONDS {
            return Err(err(format!("{line:?}: times must be ≤ {MAX_SECONDS} s")));
        }
        out.push((secs * 1e9).round() as u64);
    }
    if out.is_empty() {
        return Err(ParseError {
            line: 0,
            message: "no arrivals in the file".into(),
        });
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sorts_and_rejects_clearly() {
        assert_eq!(
            parse("0.95\n# c\n\n0.1\n").unwrap(),
            [100_000_000, 950_000_000]
        );
        assert_eq!(parse("x").unwrap_err().line, 1);
        assert!(parse("1\n-2").unwrap_err().to_string().contains("line 2"));
        assert!(parse("NaN").is_err());
        assert!(parse("inf").is_err());
        assert!(parse("1e300").is_err());
        assert!(parse("").is_err());
    }
}
