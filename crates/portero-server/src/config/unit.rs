//! A rule's unit of time: the window its `requests_per_unit` are counted in.
//!
//! Windows are aligned on the Unix epoch as envoyproxy/ratelimit aligns them (a minute
//! starts at a multiple of 60 s since 1970), with its lengths: a month is 30 days and a
//! year 365, not the calendar's.

/// A unit of time (Envoy's `RateLimitResponse.RateLimit.Unit`, less `UNKNOWN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

/// The most requests a second a window counts: portero's quotas admit at most one a
/// nanosecond.
pub const MOST_PER_SECOND: u64 = 1_000_000_000;

impl Unit {
    /// Why `requests_per_unit` per this unit cannot be counted, if it cannot (more
    /// than [`MOST_PER_SECOND`]): the one check a file's rules and a request's own
    /// limits pass.
    pub fn refuses(self, requests_per_unit: u32) -> Option<String> {
        (u64::from(requests_per_unit) > MOST_PER_SECOND * self.seconds()).then(|| {
            format!(
                "{requests_per_unit} requests a {} is more than 1,000,000,000 a second, beyond what portero counts",
                self.name().to_ascii_lowercase()
            )
        })
    }

    /// The unit a configuration names (`second`, `MINUTE`, …: any case).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "second" => Self::Second,
            "minute" => Self::Minute,
            "hour" => Self::Hour,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "year" => Self::Year,
            _ => return None,
        })
    }

    /// The unit Envoy's enumeration numbers `value` (`None`: `UNKNOWN` or not one).
    pub fn from_proto(value: i32) -> Option<Self> {
        Some(match value {
            1 => Self::Second,
            2 => Self::Minute,
            3 => Self::Hour,
            4 => Self::Day,
            5 => Self::Month,
            6 => Self::Year,
            7 => Self::Week,
            _ => return None,
        })
    }

    /// Envoy's number for this unit.
    pub fn to_proto(self) -> i32 {
        match self {
            Self::Second => 1,
            Self::Minute => 2,
            Self::Hour => 3,
            Self::Day => 4,
            Self::Month => 5,
            Self::Year => 6,
            Self::Week => 7,
        }
    }

    /// Envoy's name for this unit (`SECOND`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Second => "SECOND",
            Self::Minute => "MINUTE",
            Self::Hour => "HOUR",
            Self::Day => "DAY",
            Self::Week => "WEEK",
            Self::Month => "MONTH",
            Self::Year => "YEAR",
        }
    }

    /// The unit's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Self::Second => 1,
            Self::Minute => 60,
            Self::Hour => 3_600,
            Self::Day => 86_400,
            Self::Week => 7 * 86_400,
            Self::Month => 30 * 86_400,
            Self::Year => 365 * 86_400,
        }
    }
}
