//! Ready-made key functions for [`RateLimitLayer`](crate::RateLimitLayer): each turns a
//! request into a key without allocating (a header value is shared, not copied; an
//! extension is cloned as its type does). For the client's address see
//! [`ClientIp::key`](crate::ClientIp::key).
//!
//! A key a client writes (an API key header) is only as good as what checks it: put
//! the limit behind authentication, or add a **second limit on the address** (a stack
//! that both must admit), so a client rotating its key still meets its address's
//! limit. [`both`] is not that: it counts under the *pair*, and every rotated key makes
//! a new pair — use it for two parts that are both verified (tenant and user).

use std::hash::Hash;

use http::{HeaderName, HeaderValue, Request};

/// The value of header `name` (an API key, a tenant id), as sent: `None` if absent.
///
/// ```
/// let key = portero_http::keys::header::<()>(http::HeaderName::from_static("x-api-key"));
/// let req = http::Request::builder().header("x-api-key", "k-123").body(()).unwrap();
/// assert_eq!(key(&req).unwrap(), "k-123");
/// ```
pub fn header<B>(name: HeaderName) -> impl Fn(&Request<B>) -> Option<HeaderValue> + Clone {
    move |req| req.headers().get(&name).cloned()
}

/// An extension an earlier layer put in the request, e.g. the authenticated user's id
/// (`T` is cloned: use a small `Copy` id or an `Arc`).
pub fn extension<T, B>() -> impl Fn(&Request<B>) -> Option<T> + Clone
where
    T: Clone + Hash + Send + Sync + 'static,
{
    |req| req.extensions().get::<T>().cloned()
}

/// One key for every request: a global limit.
pub fn global<B>() -> impl Fn(&Request<B>) -> Option<()> + Clone {
    |_| Some(())
}

/// Both keys at once — a verified tenant and user: the request is counted under the
/// pair, and has no key if either part is missing. Not a defence against a client
/// that rotates one part (each rotation is a fresh pair): for that, stack a limit on
/// each part.
pub fn both<B, F, G, X, Y>(first: F, second: G) -> impl Fn(&Request<B>) -> Option<(X, Y)> + Clone
where
    F: Fn(&Request<B>) -> Option<X> + Clone,
    G: Fn(&Request<B>) -> Option<Y> + Clone,
{
    move |req| Some((first(req)?, second(req)?))
}

/// A key from the first function, or else from the second: an API key when the client
/// sent one, else its address (`either(header(..), move |r| client.key(r))`). The two
/// kinds never share a bucket.
pub fn either<B, F, G, X, Y>(
    first: F,
    second: G,
) -> impl Fn(&Request<B>) -> Option<Either<X, Y>> + Clone
where
    F: Fn(&Request<B>) -> Option<X> + Clone,
    G: Fn(&Request<B>) -> Option<Y> + Clone,
{
    move |req| match first(req) {
        Some(x) => Some(Either::First(x)),
        None => second(req).map(Either::Second),
    }
}

/// The key [`either`] found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Either<X, Y> {
    /// From the first function.
    First(X),
    /// From the second.
    Second(Y),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct UserId(u64);

    #[test]
    fn keys_come_from_where_they_say() {
        let mut req = Request::builder()
            .header("x-tenant", "acme")
            .body(())
            .unwrap();
        req.extensions_mut().insert(UserId(7));
        let tenant = header::<()>(HeaderName::from_static("x-tenant"));
        let user = extension::<UserId, ()>();
        assert_eq!(tenant(&req).unwrap(), "acme");
        assert_eq!(user(&req), Some(UserId(7)));
        assert_eq!(global()(&req), Some(()));
        let pair = both(tenant.clone(), user.clone());
        assert_eq!(
            pair(&req).map(|(t, u)| (t.to_str().unwrap().to_owned(), u)),
            Some(("acme".into(), UserId(7)))
        );
        let bare = Request::builder().body(()).unwrap();
        assert_eq!(both(tenant.clone(), user.clone())(&bare), None);
        // Header values and pairs are keys as they are.
        let quota = portero::Quota::per_second(1).unwrap();
        let limits = portero::KeyedLimiter::with_clock(
            portero::Gcra::new(quota),
            10,
            portero::ManualClock::new(),
        );
        let k = both(tenant, user)(&req).unwrap();
        assert!(limits.check_at(&k, 0, 1).unwrap().is_allowed());
        assert!(!limits.check_at(&k, 0, 1).unwrap().is_allowed());
        // An API key if sent, else the peer address.
        let client = crate::ClientIp::new(crate::TrustedProxies::none());
        let key = either(
            header::<()>(HeaderName::from_static("x-api-key")),
            move |r| client.key(r),
        );
        let mut anonymous = Request::builder().body(()).unwrap();
        anonymous
            .extensions_mut()
            .insert(std::net::SocketAddr::from(([192, 0, 2, 1], 4000)));
        assert!(matches!(key(&anonymous), Some(Either::Second(a)) if a.to_string() == "192.0.2.1"));
        let mut keyed = Request::builder()
            .header("x-api-key", "k")
            .body(())
            .unwrap();
        keyed
            .extensions_mut()
            .insert(std::net::SocketAddr::from(([192, 0, 2, 1], 4000)));
        assert!(matches!(key(&keyed), Some(Either::First(_))));
    }
}
