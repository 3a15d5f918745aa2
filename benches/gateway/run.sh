#!/usr/bin/env bash
# The gateway beside limitador, one run, one machine: each server pinned to CPU 0, the
# load generator (crates/portero-server/examples/rls_load.rs) to CPU 1. Per server: the
# most decisions a second (closed loop, 32 callers), the latency at a fixed offered
# rate (open loop), and the resident memory after a flood of distinct values. Redis,
# where used, shares CPU 1 with the load generator.
#
#   LIMITADOR=/path/to/limitador-server benches/gateway/run.sh
#
# limitador-server is built from Kuadrant/limitador's source (see docs/benchmarks-log.md
# for the build). Needs redis-server on PATH for the Redis rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LIMITADOR:?set LIMITADOR to a limitador-server binary}"
SECONDS_EACH=${SECONDS_EACH:-10}
RATE=${RATE:-5000}
FLOOD=${FLOOD:-2000000}
cargo build -q --release -p portero-server --bin portero-server --example rls_load
LOAD=target/release/examples/rls_load
DIR=$(mktemp -d)
REDIS_PORT=16379
cat > "$DIR/portero.yaml" <<'YAML'
domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 100
YAML
cat > "$DIR/limitador.yaml" <<'YAML'
- namespace: bench
  max_value: 100
  seconds: 1
  conditions: []
  variables: ["descriptors[0].client"]
YAML

wait_port() {
  i=0
  while ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 200 ] && { echo "port $1 never opened" >&2; exit 1; }
    sleep 0.05
  done
}

cpu_ticks() { # pid: user + system clock ticks so far
  awk '{ print $14 + $15 }' "/proc/$1/stat"
}

measure() { # label pid flood(0/1)
  taskset -c 1 "$LOAD" --target 127.0.0.1:18081 --seconds "$SECONDS_EACH" --label "$1" --concurrency 32
  # At the fixed rate the server's CPU time tells its cost per decision, whatever the
  # load generator's own limit (on two cores it caps the closed loop).
  t0=$(cpu_ticks "$2")
  taskset -c 1 "$LOAD" --target 127.0.0.1:18081 --seconds "$SECONDS_EACH" --label "$1" --rate "$RATE" --concurrency 8
  t1=$(cpu_ticks "$2")
  hz=$(getconf CLK_TCK)
  # Over the whole run (its warm-up second included): RATE x (SECONDS_EACH + 1) calls.
  echo "$1 server_cpu_us_per_decision=$(( (t1 - t0) * 1000000 / hz / (RATE * (SECONDS_EACH + 1)) ))"
  if [ "$3" = 1 ]; then
    before=$(ps -o rss= -p "$2")
    taskset -c 1 "$LOAD" --target 127.0.0.1:18081 --seconds 40 --label "$1-flood" --values "$FLOOD" --concurrency 32 >/dev/null
    echo "$1 resident_kib_before=$before resident_kib_after_flood=$(ps -o rss= -p "$2") values=$FLOOD"
  fi
}

run_portero() { # label extra-args...
  label=$1; shift
  taskset -c 0 target/release/portero-server --config "$DIR/portero.yaml" --grpc 127.0.0.1:18081 --http 127.0.0.1:18080 "$@" >/dev/null 2>&1 &
  pid=$!; wait_port 18081
  measure "$label" $pid "$FLOOD_TOO"
  kill $pid; wait $pid 2>/dev/null || true
}

run_limitador() { # label storage...
  label=$1; shift
  taskset -c 0 "$LIMITADOR" -b 127.0.0.1 -p 18081 -B 127.0.0.1 -P 18082 "$DIR/limitador.yaml" "$@" >/dev/null 2>&1 &
  pid=$!; wait_port 18081
  measure "$label" $pid "$FLOOD_TOO"
  kill $pid; wait $pid 2>/dev/null || true
}

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(date -u +%F)"
FLOOD_TOO=1
run_portero portero-memory
run_limitador limitador-memory memory
FLOOD_TOO=0
taskset -c 1 redis-server --port $REDIS_PORT --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis=$!; wait_port $REDIS_PORT
run_portero portero-redis --redis redis://127.0.0.1:$REDIS_PORT
redis-cli -p $REDIS_PORT flushall >/dev/null
run_limitador limitador-redis redis redis://127.0.0.1:$REDIS_PORT
kill $redis; wait $redis 2>/dev/null || true
rm -rf "$DIR"
