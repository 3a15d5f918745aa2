//! Which requests a limit applies to ([`Limit::route`](crate::Limit::route)): a method
//! and an exact path, or a path prefix, so a login limit needs no hand-written
//! predicate. Paths are compared as sent (percent-encoding and all); a trailing slash
//! is a different path, as it is to a router. With the `axum` feature a route
//! template that axum matched (`MatchedPath`, e.g. `/users/{id}`) is compared too, so
//! a limit may name the route as it was declared.

use http::{Method, Request};

/// Requests with `method` to exactly `path`. `GET` covers `HEAD` too: axum (like
/// most routers) answers a `HEAD` with the `GET` handler, so a `GET` limit that
/// skipped it would run the handler unlimited.
///
/// ```
/// let login = portero_http::route::method(http::Method::POST, "/login");
/// let req = http::Request::post("/login").body(()).unwrap();
/// assert!(login(&req));
/// assert!(!login(&http::Request::get("/login").body(()).unwrap()));
/// ```
pub fn method<B>(
    method: Method,
    path: &'static str,
) -> impl Fn(&Request<B>) -> bool + Clone + Send + Sync {
    let head_too = method == Method::GET;
    move |req| {
        (req.method() == method || head_too && req.method() == Method::HEAD) && path_is(req, path)
    }
}

/// `POST` to exactly `path`.
///
/// ```
/// let login = portero_http::route::post("/login");
/// assert!(login(&http::Request::post("/login").body(()).unwrap()));
/// assert!(!login(&http::Request::post("/login/").body(()).unwrap()));
/// ```
pub fn post<B>(path: &'static str) -> impl Fn(&Request<B>) -> bool + Clone + Send + Sync {
    method(Method::POST, path)
}

/// `GET` (and `HEAD`, which a router serves with the `GET` handler) to exactly `path`.
///
/// ```
/// let search = portero_http::route::get("/search");
/// assert!(search(&http::Request::get("/search").body(()).unwrap()));
/// assert!(search(&http::Request::head("/search").body(()).unwrap()));
/// ```
pub fn get<B>(path: &'static str) -> impl Fn(&Request<B>) -> bool + Clone + Send + Sync {
    method(Method::GET, path)
}

/// Any method to exactly `path`.
///
/// ```
/// let upload = portero_http::route::path("/upload");
/// assert!(upload(&http::Request::put("/upload").body(()).unwrap()));
/// assert!(upload(&http::Request::put("/upload?x=1").body(()).unwrap())); // the query is not the path
/// assert!(!upload(&http::Request::put("/uploads").body(()).unwrap()));
/// ```
pub fn path<B>(path: &'static str) -> impl Fn(&Request<B>) -> bool + Clone + Send + Sync {
    move |req| path_is(req, path)
}

/// Any method to a path under `prefix` (`/api/` matches `/api/users`, not `/apix`).
///
/// ```
/// let api = portero_http::route::prefix("/api/");
/// assert!(api(&http::Request::get("/api/users").body(()).unwrap()));
/// assert!(!api(&http::Request::get("/apix").body(()).unwrap()));
/// ```
pub fn prefix<B>(prefix: &'static str) -> impl Fn(&Request<B>) -> bool + Clone + Send + Sync {
    move |req| req.uri().path().starts_with(prefix)
}

fn path_is<B>(req: &Request<B>, path: &str) -> bool {
    #[cfg(feature = "axum")]
    if let Some(matched) = req.extensions().get::<axum::extract::MatchedPath>() {
        if matched.as_str() == path {
            return true;
        }
    }
    req.uri().path() == path
}
