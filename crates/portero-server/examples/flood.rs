//! The memory a flood of descriptor values costs the gateway: 10,000,000 requests,
//! each with a value never seen before, against one rule, decided in this process as
//! the gRPC door decides them. Prints the resident memory every million requests.
//!
//! `cargo run --release -p portero-server --example flood [-- REQUESTS [MAX_KEYS]]`

use portero_server::config;
use portero_server::decide::{Descriptor, Request};
use portero_server::gateway::Gateway;

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let requests: u64 = args.next().map_or(Ok(10_000_000), |a| a.parse())?;
    let max_keys: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let file = "domain: flood\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n";
    let tree = config::from_texts(&[("flood.yaml".into(), file.into())])?;
    let gateway = Gateway::new(tree, max_keys, false);
    let start = std::time::Instant::now();
    let now = 1_800_000_000 * 1_000_000_000;
    println!("requests,resident_mib,seconds (max_keys {max_keys})");
    println!("0,{:.1},0", resident_mib());
    let mut request = Request {
        domain: "flood".into(),
        descriptors: vec![Descriptor {
            entries: vec![("client".into(), String::new())],
            limit: None,
            hits: 1,
        }],
    };
    for i in 1..=requests {
        let value = &mut request.descriptors[0].entries[0].1;
        value.clear();
        value.push_str(&format!("client-{i:012}"));
        gateway.decide_at(&request, now + i)?;
        if i % 1_000_000 == 0 {
            println!(
                "{i},{:.1},{:.1}",
                resident_mib(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}
