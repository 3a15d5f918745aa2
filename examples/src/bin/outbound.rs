//! A client of a provider that allows 20 calls in any sliding second (an SMS
//! gateway, say): 100 tasks with 3 messages each go through `ThrottleLayer::window`,
//! waiting in line for their turn, and a task that gives up after 2 s takes nothing
//! from the others. The provider here is a tower service that counts calls as they
//! arrive and refuses the 21st in any second, as such a provider does; the program
//! prints what it delivered and what was refused.
//!
//! ```sh
//! cargo run -p portero-examples --bin outbound
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portero_http::ThrottleLayer;
use tower::{service_fn, Layer, ServiceExt};

/// The provider's count: arrivals in the last second, what it served and refused.
#[derive(Default)]
struct Provider {
    arrivals: VecDeque<Instant>,
    served: u64,
    refused: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let provider = Arc::new(Mutex::new(Provider::default()));
    let counted = provider.clone();
    let sms = service_fn(move |_message: String| {
        let now = Instant::now();
        let mut p = counted.lock().unwrap_or_else(|e| e.into_inner());
        while p
            .arrivals
            .front()
            .is_some_and(|&t| now - t >= Duration::from_secs(1))
        {
            p.arrivals.pop_front();
        }
        let allowed = p.arrivals.len() < 20;
        if allowed {
            p.arrivals.push_back(now);
            p.served += 1;
        } else {
            p.refused += 1;
        }
        async move { Ok::<_, Infallible>(allowed) }
    });
    // The provider's second, and 20 ms for the calls' transit to vary by: a call that
    // left late can never land in the next one's second.
    let window = Duration::from_millis(1_020);
    let client = ThrottleLayer::window(20, window, Duration::from_secs(30))?.layer(sms);
    let started = Instant::now();
    let tasks: Vec<_> = (0..100)
        .map(|task| {
            let client = client.clone();
            tokio::spawn(async move {
                for m in 0..3 {
                    let call = client.clone().oneshot(format!("task {task}, message {m}"));
                    // A task that gives up on a message after 2 s sends the next one.
                    let _ = tokio::time::timeout(Duration::from_secs(2), call).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await?;
    }
    let p = provider.lock().unwrap_or_else(|e| e.into_inner());
    println!(
        "delivered: {} in {:.1} s ({:.1}/s), refused by the provider: {}",
        p.served,
        started.elapsed().as_secs_f64(),
        p.served as f64 / started.elapsed().as_secs_f64().max(1e-9),
        p.refused
    );
    Ok(())
}
