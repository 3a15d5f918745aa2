// Requests per second of an Express and a Hono hello-world with no limiter, with the
// anchors' middleware (express-rate-limit, hono-rate-limiter) and with portero's, under
// a real load generator (autocannon) in another process, one variant at a time, in
// rounds (the best of each variant's rounds is kept, as machine noise only slows).
// `npm run bench:middleware` (after `cargo xtask wasm`); `-- --json FILE` writes the
// figures there too.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { writeFileSync } from "node:fs";
import autocannon from "autocannon";

const VARIANTS = [
  "express-none",
  "express-rate-limit",
  "express-portero",
  "hono-none",
  "hono-rate-limiter",
  "hono-portero",
];
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 5);
const CONNECTIONS = 50;

async function started(variant) {
  const child = spawn(process.execPath, [new URL("./middleware-server.mjs", import.meta.url).pathname, variant], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise((ok, fail) => {
    createInterface({ input: child.stdout }).once("line", (l) => ok(Number(l)));
    child.once("exit", (code) => fail(new Error(`${variant} exited ${code}`)));
  });
  return { child, port };
}

async function measure(variant) {
  const { child, port } = await started(variant);
  try {
    // A short warm-up, then the measured run.
    await autocannon({ url: `http://127.0.0.1:${port}/`, connections: CONNECTIONS, duration: 1 });
    const r = await autocannon({ url: `http://127.0.0.1:${port}/`, connections: CONNECTIONS, duration: SECONDS });
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`${variant}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99 };
  } finally {
    child.kill();
  }
}

const best = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const v of VARIANTS) {
    const m = await measure(v);
    if (best[v] === undefined || m.rps > best[v].rps) best[v] = m;
  }
}
const base = { express: best["express-none"].rps, hono: best["hono-none"].rps };
console.log(`best of ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections\n`);
console.log("| server | requests/s | × no limiter | p50 ms | p99 ms |");
console.log("|---|---:|---:|---:|---:|");
for (const v of VARIANTS) {
  const m = best[v];
  const ratio = m.rps / base[v.split("-")[0]];
  console.log(`| ${v} | ${Math.round(m.rps)} | ${ratio.toFixed(2)} | ${m.p50} | ${m.p99} |`);
}
const at = process.argv.indexOf("--json");
if (at > 0) writeFileSync(process.argv[at + 1], JSON.stringify({ rounds: ROUNDS, seconds: SECONDS, connections: CONNECTIONS, best }, null, 2));
