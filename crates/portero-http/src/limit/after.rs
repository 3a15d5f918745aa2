//! What a limit reads of a response, and what it does with it (the `Limit` methods
//! [`settle`](crate::Limit::settle), [`settle_by_usage`](crate::Limit::settle_by_usage),
//! [`count_only`](crate::Limit::count_only), [`clear_on`](crate::Limit::clear_on) set
//! it; `settle.rs` carries it out).

use std::sync::Arc;

use http::{Extensions, HeaderMap, StatusCode};

/// What a limit may read of a response: its status, fields and extensions (the
/// handler can put a typed value there, e.g. the usage it measured).
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    status: StatusCode,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> ResponseHead<'a> {
    /// The head of a response.
    pub fn new(status: StatusCode, headers: &'a HeaderMap, extensions: &'a Extensions) -> Self {
        Self {
            status,
            headers,
            extensions,
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The fields.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The extensions.
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }

    /// A field's value as a count of units (`x-usage-tokens: 1938`): `None` when
    /// absent or not a plain decimal number (ASCII digits only, spaces around
    /// allowed: no sign, no `0x`, nothing past `u64::MAX`).
    ///
    /// ```
    /// # use portero_http::ResponseHead;
    /// let mut fields = http::HeaderMap::new();
    /// fields.insert("x-usage", http::HeaderValue::from_static("+5"));
    /// let extensions = http::Extensions::new();
    /// let head = ResponseHead::new(http::StatusCode::OK, &fields, &extensions);
    /// assert_eq!(head.units("x-usage"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn units(&self, field: &str) -> Option<u64> {
        let value = self.headers.get(field)?.to_str().ok()?.trim();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        value.parse().ok()
    }
}

/// A test of a response head.
pub(crate) type HeadTest = Arc<dyn Fn(&ResponseHead<'_>) -> bool + Send + Sync>;
/// The real cost read from a response head.
pub(crate) type HeadCost = Arc<dyn Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync>;

/// What a limit does after the response (see the `Limit` methods that set each).
#[derive(Clone, Default)]
pub(crate) struct AfterResponse {
    /// The real cost from the head (`None` from it: the estimate stands).
    pub(crate) real: Option<HeadCost>,
    /// The real cost reported through [`Usage`].
    pub(crate) usage: bool,
    /// Counted only when the response passes (given back otherwise).
    pub(crate) count_if: Option<HeadTest>,
    /// The key forgotten when the response passes.
    pub(crate) clear_if: Option<HeadTest>,
}

impl AfterResponse {
    /// Whether the head has anything to settle.
    pub(crate) fn at_head(&self) -> bool {
        self.real.is_some() || self.count_if.is_some() || self.clear_if.is_some()
    }
}
