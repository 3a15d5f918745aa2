//! What a key function returns, and ready-made key functions for
//! [`LimitLayer`](crate::LimitLayer): each turns a request into a key without
//! allocating (a header value is shared, not copied; an extension is cloned as its type
//! does). For the client's address see [`ClientIp::key`](crate::ClientIp::key).
//!
//! A key function says one of three things ([`IntoKey`]): here is the key; the client
//! sent nothing to key on (`None`: the layer's [`WhenNoKey`](crate::WhenNoKey)
//! decides); or the *server* cannot know ([`KeyError`]: no peer address was recorded),
//! which is answered 500 and logged, never folded into a shared bucket where one
//! abuser would lock every client out.
//!
//! A key a client writes (an API key header) is only as good as what checks it: put
//! the limit behind authentication, or add a **second limit on the address** (a stack
//! that both must admit), so a client rotating its key still meets its address's
//! limit. [`both`] is not that: it counts under the *pair*, and every rotated key makes
//! a new pair — use it for two parts that are both verified (tenant and user).

use core::fmt;
use std::hash::Hash;

use http::{HeaderName, HeaderValue, Request};

/// Why a key function could not find a request's key although the client did nothing
/// wrong: a fault of the server's set-up, answered 500 and logged, not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The server recorded no peer address for the request: serve axum with
    /// `into_make_service_with_connect_info::<SocketAddr>()` (and enable this crate's
    /// `axum` feature), or put the connection's `SocketAddr` in the request's
    /// extensions.
    NoPeerAddress,
    /// An extension an earlier layer should have inserted is missing (the layers are
    /// in the wrong order); the type's name.
    MissingExtension(&'static str),
    /// The key function panicked (a bug in it): the request is answered 500 instead of
    /// losing its connection.
    Panicked,
    /// The cost function panicked (a bug in it): answered 500 the same way, nothing
    /// charged.
    CostPanicked,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoPeerAddress => f.write_str(
                "no peer address recorded for the request: serve axum with \
                 into_make_service_with_connect_info::<SocketAddr>() and enable \
                 portero-http's `axum` feature, or insert the connection's SocketAddr \
                 into the request's extensions",
            ),
            Self::MissingExtension(name) => write!(
                f,
                "the request has no {name} extension: the layer that inserts it must \
                 run before (outside) the rate-limit layer"
            ),
            Self::Panicked => f.write_str(
                "the key function panicked (see the panic message above); the request \
                 was answered 500",
            ),
            Self::CostPanicked => f.write_str(
                "the cost function panicked (see the panic message above); the request \
                 was answered 500",
            ),
        }
    }
}

impl std::error::Error for KeyError {}

// The client's address as a key function: here, beside the key functions, so that
// the client module (who the client is) never imports the keys that use it.
impl crate::client::ClientIp {
    /// The client of a request, from the peer address the server recorded in its
    /// extensions (a `SocketAddr`, or with the `axum` feature axum's
    /// `ConnectInfo<SocketAddr>` or `MockConnectInfo`'s). No recorded peer is
    /// [`KeyError::NoPeerAddress`] — a server
    /// set-up fault that the rate-limit layer answers 500 and logs, never one bucket
    /// for every client.
    pub fn key<B>(&self, request: &Request<B>) -> Result<crate::client::ClientAddr, KeyError> {
        let peer = crate::client::peer_of(request).ok_or(KeyError::NoPeerAddress)?;
        Ok(self.resolve(peer, request.headers()))
    }
}

/// What a key function may return: `Option<K>` (`None`: the client sent no key) or
/// `Result<K, KeyError>` / [`KeyLookup<K>`] when the server itself may be unable to tell.
pub trait IntoKey {
    /// The key.
    type Key;
    /// The key, `Ok(None)` for none sent, or why the server cannot know.
    fn into_key(self) -> Result<Option<Self::Key>, KeyError>;
}

impl<K> IntoKey for Option<K> {
    type Key = K;
    #[inline]
    fn into_key(self) -> Result<Option<K>, KeyError> {
        Ok(self)
    }
}

impl<K> IntoKey for Result<K, KeyError> {
    type Key = K;
    #[inline]
    fn into_key(self) -> Result<Option<K>, KeyError> {
        self.map(Some)
    }
}

/// All three answers of a key function in one type: what [`both`] and [`either`]
/// return when their parts may fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLookup<K>(pub Result<Option<K>, KeyError>);

impl<K> IntoKey for KeyLookup<K> {
    type Key = K;
    #[inline]
    fn into_key(self) -> Result<Option<K>, KeyError> {
        self.0
    }
}

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
/// (`T` is cloned: use a small `Copy` id or an `Arc`); `None` (the layer's
/// [`WhenNoKey`](crate::WhenNoKey)) when it is absent, as for an anonymous request.
/// If every request must carry it, use [`required_extension`]: a misordered layer
/// then fails loudly instead of putting everyone in one bucket.
pub fn extension<T, B>() -> impl Fn(&Request<B>) -> Option<T> + Clone
where
    T: Clone + Hash + Send + Sync + 'static,
{
    |req| req.extensions().get::<T>().cloned()
}

/// An extension that an earlier layer inserts into **every** request (an
/// authentication layer that rejects anonymous requests, say): missing means the
/// layers are in the wrong order, answered 500 and logged
/// ([`KeyError::MissingExtension`]) — where [`extension`] would send every request to
/// one shared bucket without a word.
pub fn required_extension<T, B>() -> impl Fn(&Request<B>) -> Result<T, KeyError> + Clone
where
    T: Clone + Hash + Send + Sync + 'static,
{
    |req| {
        req.extensions()
            .get::<T>()
            .cloned()
            .ok_or(KeyError::MissingExtension(core::any::type_name::<T>()))
    }
}

/// One key for every request: a global limit.
pub fn global<B>() -> impl Fn(&Request<B>) -> Option<()> + Clone {
    |_| Some(())
}

/// Both keys at once — a verified tenant and user: the request is counted under the
/// pair, and has no key if either part is missing. Not a defence against a client
/// that rotates one part (each rotation is a fresh pair): for that, stack a limit on
/// each part.
pub fn both<B, RF: IntoKey, RG: IntoKey>(
    first: impl Fn(&Request<B>) -> RF + Clone,
    second: impl Fn(&Request<B>) -> RG + Clone,
) -> impl Fn(&Request<B>) -> KeyLookup<(RF::Key, RG::Key)> + Clone {
    move |req| {
        KeyLookup((|| {
            let Some(x) = first(req).into_key()? else {
                return Ok(None);
            };
            Ok(second(req).into_key()?.map(|y| (x, y)))
        })())
    }
}

/// A key from the first function, or else from the second: an API key when the client
/// sent one, else its address (`either(header(..), move |r| client.key(r))`). The two
/// kinds never share a bucket. An error from either part is the answer.
pub fn either<B, RF: IntoKey, RG: IntoKey>(
    first: impl Fn(&Request<B>) -> RF + Clone,
    second: impl Fn(&Request<B>) -> RG + Clone,
) -> impl Fn(&Request<B>) -> KeyLookup<Either<RF::Key, RG::Key>> + Clone {
    move |req| {
        KeyLookup(match first(req).into_key() {
            Ok(Some(x)) => Ok(Some(Either::First(x))),
            Ok(None) => second(req).into_key().map(|y| y.map(Either::Second)),
            Err(e) => Err(e),
        })
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

/// The client's address, resolved by the limit itself from the peer address and what
/// `client`'s trusted proxies wrote ([`ClientIp::key`](crate::ClientIp::key)): the
/// key for limits by client when nothing else needs the address — one layer, where a
/// resolving layer in front would cost a second one and an extension per request. (When
/// handlers need the same address, resolve it once with `ClientAddrLayer` and key the
/// limits by [`client_addr`].) No recorded peer is [`KeyError::NoPeerAddress`],
/// answered 500 and logged, never a shared bucket.
///
/// ```
/// use std::net::SocketAddr;
/// use portero_http::{keys, ClientIp, TrustedProxies};
/// let key = keys::client_ip::<()>(ClientIp::new(TrustedProxies::none()));
/// let mut req = http::Request::builder().body(()).unwrap();
/// assert_eq!(key(&req), Err(keys::KeyError::NoPeerAddress));
/// req.extensions_mut().insert("192.0.2.1:4000".parse::<SocketAddr>().unwrap());
/// assert_eq!(key(&req).unwrap().to_string(), "192.0.2.1");
/// ```
pub fn client_ip<B>(
    client: crate::client::ClientIp,
) -> impl Fn(&Request<B>) -> Result<crate::client::ClientAddr, KeyError> + Clone {
    move |req| client.key(req)
}

#[cfg_attr(
    feature = "axum",
    doc = "The client's address as [`ClientAddrLayer`](crate::axum::ClientAddrLayer) resolved it"
)]
#[cfg_attr(
    not(feature = "axum"),
    doc = "The client's address as `axum::ClientAddrLayer` (feature `axum`) resolved it"
)]
/// (the request's [`ClientAddr`](crate::ClientAddr) extension). Use it in a limit
/// behind that layer (added to the router after the limit, so it runs first): handlers
/// extract the same [`ClientAddr`](crate::ClientAddr), so they and the limits see one
/// address, resolved once. No extension (the layer is missing, or runs after the limit) is
/// [`KeyError::MissingExtension("ClientAddr")`](KeyError::MissingExtension), answered
/// 500 and logged, never a shared bucket.
///
/// ```
/// use portero_http::keys::{self, KeyError};
/// let key = keys::client_addr::<()>();
/// let mut req = http::Request::builder().body(()).unwrap();
/// assert_eq!(key(&req), Err(KeyError::MissingExtension("ClientAddr")));
/// let client = portero_http::ClientIp::default()
///     .resolve("192.0.2.1".parse().unwrap(), req.headers());
/// req.extensions_mut().insert(client);
/// assert_eq!(key(&req), Ok(client));
/// ```
pub fn client_addr<B>(
) -> impl Fn(&Request<B>) -> Result<crate::client::ClientAddr, KeyError> + Clone {
    |req| {
        req.extensions()
            .get::<crate::client::ClientAddr>()
            .copied()
            .ok_or(KeyError::MissingExtension("ClientAddr"))
    }
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
            pair(&req)
                .into_key()
                .unwrap()
                .map(|(t, u)| (t.to_str().unwrap().to_owned(), u)),
            Some(("acme".into(), UserId(7)))
        );
        let bare = Request::builder().body(()).unwrap();
        assert_eq!(both(tenant.clone(), user.clone())(&bare).0, Ok(None));
        // Header values and pairs are keys as they are.
        let quota = portero::Quota::per_second(1).unwrap();
        let limits = portero::KeyedLimiter::with_clock(
            portero::Gcra::new(quota),
            10,
            portero::ManualClock::new(),
        );
        let k = both(tenant, user)(&req).into_key().unwrap().unwrap();
        assert!(limits.check_at(&k, 0, 1).unwrap().is_allowed());
        assert!(!limits.check_at(&k, 0, 1).unwrap().is_allowed());
        // An API key if sent, else the peer address.
        let client = crate::client::ClientIp::new(crate::client::TrustedProxies::none());
        let key = either(
            header::<()>(HeaderName::from_static("x-api-key")),
            move |r| client.key(r),
        );
        let mut anonymous = Request::builder().body(()).unwrap();
        anonymous
            .extensions_mut()
            .insert(std::net::SocketAddr::from(([192, 0, 2, 1], 4000)));
        assert!(
            matches!(key(&anonymous).0, Ok(Some(Either::Second(a))) if a.to_string() == "192.0.2.1")
        );
        let mut keyed = Request::builder()
            .header("x-api-key", "k")
            .body(())
            .unwrap();
        keyed
            .extensions_mut()
            .insert(std::net::SocketAddr::from(([192, 0, 2, 1], 4000)));
        assert!(matches!(key(&keyed).0, Ok(Some(Either::First(_)))));
        // No peer recorded and no API key: the server's fault, said as such.
        let bare = Request::builder().body(()).unwrap();
        assert_eq!(key(&bare).0, Err(KeyError::NoPeerAddress));
    }
}
