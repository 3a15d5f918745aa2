#!/usr/bin/env bash
# The HTTP layer end to end, as a user would measure it: a real load generator (oha,
# from crates.io: `cargo install oha --locked`) against one axum service built three
# ways in the same run (benches/examples/e2e_server.rs: no limiter, portero's
# LimitLayer, tower_governor), over loopback, 10,000 clients by path. Two loads each,
# every request admitted and a flood that is about 90 % refused (one request per client
# per hour, ten requests per client), each driven two ways: closed (64 connections, as
# fast as they go, REQUESTS in all) and at a fixed rate (RATE per second for SECONDS,
# latency counted from when each request was due). Each server is started on a free
# port and stopped by its own process id. Prints requests/s and p50/p99/p99.9 latency.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v oha >/dev/null || { echo "oha is not installed: cargo install oha --locked" >&2; exit 1; }
cargo build --release -q -p portero-benches --example e2e_server
server=target/release/examples/e2e_server
requests=${REQUESTS:-100000}
rate=${RATE:-20000}
seconds=${SECONDS_EACH:-5}
summary='
import json, sys
r = json.load(sys.stdin)
s, p = r["summary"], r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {})
refused = 100.0 * codes.get("429", 0) / max(1, sum(codes.values()))
row = (sys.argv[1], sys.argv[2], s["requestsPerSec"], p["p50"] * 1e3, p["p99"] * 1e3, p["p99.9"] * 1e3, refused)
print("%-7s %-9s %-7s %12.0f %9.3f %9.3f %9.3f %7.1f%%" % ((sys.argv[3],) + row))
'
printf '%-7s %-9s %-7s %12s %9s %9s %9s %8s\n' drive setup load "requests/s" "p50 ms" "p99 ms" "p99.9 ms" "429 %"
for drive in closed fixed; do
for load in open tight; do
  for setup in plain portero governor; do
    log=$(mktemp)
    "$server" "$setup" "$load" > "$log" &
    pid=$!
    for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.1; done
    addr=$(sed -n 's/^listening on //p' "$log")
    if [ "$drive" = closed ]; then
      how=(-n "$requests" -c 64)
    else
      how=(-q "$rate" -z "${seconds}s" -c 64 --latency-correction)
    fi
    out=$(oha --no-tui --output-format json "${how[@]}" --rand-regex-url "$addr/c/[0-9]{4}" 2>/dev/null)
    kill "$pid"; wait "$pid" 2>/dev/null || true; rm -f "$log"
    python3 -c "$summary" "$setup" "$load" "$drive" <<<"$out"
  done
done
done
