// Latency of a check in workerd: local (per isolate) against exact (through a Durable
// Object), and ten keys in one call against ten calls. `npm run bench:durable` (after
// `cargo xtask wasm`). Sequential HTTP requests from Node over loopback; prints the
// median, p90 and p99 per request; leased: one call to the object in 100 checks, the
// next lease fetched on the request's path or ahead of it. With `-- --json FILE` it
// also writes the figures there (what `cargo xtask bench-report` reads).
import { unlinkSync, writeFileSync } from "node:fs";
import { freePort, packageModules, root, startWorkerd, stopWorkerd, workerdConfig } from "../test/support/workerd.mjs";

const N = 2_000;

const port = await freePort();
const config = `${root}.workerd-bench-${process.pid}.capnp`;
const worker = `(
  modules = ${packageModules("bench/durable-worker.js", { durable: true })},
  durableObjectNamespaces = [ (className = "PorteroShard", uniqueKey = "portero-bench") ],
  durableObjectStorage = (inMemory = void),
  bindings = [ (name = "LIMITER", durableObjectNamespace = "PorteroShard") ],
  compatibilityDate = "2026-11-01",
)`;
writeFileSync(config, workerdConfig([{ name: "main", port, worker }]));
const { child } = await startWorkerd(config, [port], { path: "/local", init: {} });
try {
  const results = [];
  for (const [name, path] of [
    ["1 key, local", "/local"],
    ["1 key, exact (Durable Object)", "/exact-one-call"],
    ["1 key, leased (batch 100)", "/leased"],
    ["1 key, leased, next fetched ahead", "/leased-prefetch"],
    ["10 keys, local", "/local?keys=10"],
    ["10 keys, exact, one call", "/exact-one-call?keys=10"],
    ["10 keys, exact, a call each", "/exact-call-each?keys=10"],
  ]) {
    const times = [];
    for (let i = 0; i < N + 200; i++) {
      const t0 = process.hrtime.bigint();
      const r = await fetch(`http://127.0.0.1:${port}${path}`);
      await r.text();
      if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
      if (i >= 200) times.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
    times.sort((a, b) => a - b);
    results.push([name, times[N >> 1], times[Math.floor(N * 0.9)], times[Math.floor(N * 0.99)]]);
  }
  console.log(`node ${process.version}, workerd from npm, ${N} sequential requests each (after 200 warm-up)`);
  for (const [name, p50, p90, p99] of results) {
    const at = (q, v) => `${q} ${v.toFixed(0).padStart(6)} µs`;
    console.log(`${name.padEnd(34)} ${at("p50", p50)}   ${at("p90", p90)}   ${at("p99", p99)}`);
  }
  const jsonAt = process.argv.indexOf("--json");
  if (jsonAt > 0) {
    const rows = results.map(([name, p50, p90, p99]) => ({ name, p50_us: p50, p90_us: p90, p99_us: p99 }));
    writeFileSync(process.argv[jsonAt + 1], JSON.stringify({ node: process.version, requests: N, rows }, null, 1));
  }
} finally {
  await stopWorkerd(child);
  unlinkSync(config);
}
