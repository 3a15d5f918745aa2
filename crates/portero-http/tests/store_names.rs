//! With [`Store`] in scope, a limiter in an `Arc` still answers to its own methods:
//! no method of the store trait shadows one of the limiters' through auto-deref
//! (found by an outside harness: `Arc<KeyedLimiter>::peek(&k)` resolved to the
//! store's two-argument method, and code that compiled before stopped compiling).

use std::sync::Arc;

use portero::{Gcra, KeyedLimiter, KeyedLog, Quota};
use portero_http::Store;

/// Keeps the import in use: the point is that it is in scope below.
fn _is_a_store<S: Store<&'static str>>(_: &S) {}

#[test]
fn a_limiter_in_an_arc_keeps_its_own_methods_with_store_in_scope() {
    let q = Quota::per_minute(10).unwrap();
    let table: Arc<KeyedLimiter<&str, Gcra>> = Arc::new(KeyedLimiter::new(Gcra::new(q), 10));
    _is_a_store(&table);
    assert_eq!(table.peek(&"k").remaining(), 10);
    assert!(table.peek_at(&"k", 0, 1).unwrap().is_allowed());
    let taken = table.acquire_at(&"k", 0, 1).unwrap().admission.unwrap();
    table.refund(&"k", taken);
    assert!(table.check(&"k").is_allowed());
    let taken = table.acquire_at(&"k", 0, 2).unwrap().admission.unwrap();
    assert!(table.settle(&"k", taken, 1).is_ok());
    table.reset(&"k");
    let log: Arc<KeyedLog<&str>> = Arc::new(KeyedLog::new(q, 10).unwrap());
    _is_a_store(&log);
    assert!(log.peek_at(&"k", 0, 1).unwrap().is_allowed());
}
