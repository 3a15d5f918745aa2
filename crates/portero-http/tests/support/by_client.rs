//! Requests that name their client in `x-client`, and the key that reads it.

use axum::body::Body;
use http::Request;

/// The client a request names in `x-client`, if it names one readably.
pub fn client_key(req: &Request<Body>) -> Option<String> {
    req.headers()
        .get("x-client")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A `GET /` from `client`, or without `x-client` for `None`.
pub fn request(client: Option<&str>) -> Request<Body> {
    let mut r = Request::builder().uri("/");
    if let Some(c) = client {
        r = r.header("x-client", c);
    }
    r.body(Body::empty()).unwrap()
}
