//! A `metrics` recorder for tests: each counter kept by its name and labels.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A recorder that keeps each counter by its name and labels, and each description.
#[derive(Default)]
pub struct Counters(
    Mutex<HashMap<String, Arc<AtomicU64>>>,
    Mutex<HashMap<String, String>>,
);

impl Counters {
    /// The description (`# HELP`) given for counter `name`, if any.
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub fn help(&self, name: &str) -> Option<String> {
        self.1.lock().unwrap().get(name).cloned()
    }

    /// The counter `name{label=value,…}`, 0 if never incremented.
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub fn get(&self, key: &str) -> u64 {
        let map = self.0.lock().unwrap();
        map.get(key).map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        name: metrics::KeyName,
        _: Option<metrics::Unit>,
        help: metrics::SharedString,
    ) {
        self.1
            .lock()
            .unwrap()
            .insert(name.as_str().to_owned(), help.to_string());
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let counter = self.0.lock().unwrap().entry(name).or_default().clone();
        metrics::Counter::from_arc(counter)
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}
