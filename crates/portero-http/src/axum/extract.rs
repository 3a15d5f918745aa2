//! [`ClientAddr`] as an axum extractor: the address [`ClientAddrLayer`](super::ClientAddrLayer)
//! resolved, or a 500 that names the missing layer.

use core::convert::Infallible;
use core::fmt;

use ::axum::extract::{FromRequestParts, OptionalFromRequestParts};
use ::axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{HeaderValue, StatusCode};

use crate::client::ClientAddr;

/// The body of the 500 a handler answers when it extracts [`ClientAddr`] but no
/// [`ClientAddrLayer`](super::ClientAddrLayer) ran before it.
pub const MISSING_CLIENT_ADDR_BODY: &str = r#"{"error":"the client address was not resolved: add portero_http::axum::ClientAddrLayer with Router::layer"}"#;

/// The rejection of the [`ClientAddr`] extractor: the request has no `ClientAddr`
/// extension because no [`ClientAddrLayer`](super::ClientAddrLayer) ran before the
/// handler (it is missing, or added with `route_layer` on another router). A fault of
/// the server's set-up: answered 500 with [`MISSING_CLIENT_ADDR_BODY`] as JSON, and
/// logged at ERROR with the `tracing` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingClientAddr;

impl fmt::Display for MissingClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the request has no ClientAddr extension: add \
             portero_http::axum::ClientAddrLayer to the router with Router::layer, \
             so it runs before the handler",
        )
    }
}

impl std::error::Error for MissingClientAddr {}

impl IntoResponse for MissingClientAddr {
    fn into_response(self) -> Response {
        #[cfg(feature = "tracing")]
        tracing::error!(error = %self, "ClientAddr extractor rejected the request; answered 500");
        let mut response = Response::new(MISSING_CLIENT_ADDR_BODY.into());
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

/// The address [`ClientAddrLayer`](super::ClientAddrLayer) resolved for this request
/// (the same one [`keys::client_addr`](crate::keys::client_addr) gives a limit);
/// [`MissingClientAddr`] without the layer.
impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = MissingClientAddr;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<ClientAddr>()
            .copied()
            .ok_or(MissingClientAddr)
    }
}

/// `Option<ClientAddr>`: `None` without the layer, for handlers that can do without.
impl<S: Send + Sync> OptionalFromRequestParts<S> for ClientAddr {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<ClientAddr>().copied())
    }
}
