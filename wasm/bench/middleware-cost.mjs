// What each middleware costs the server, in CPU time per request at a fixed offered
// rate (autocannon in another process, each pinned to its own CPU where `taskset`
// exists): steadier than the most requests a second, which on a small machine is
// the load generator's limit as much as the server's. Beside the anchors, two floors:
// a middleware that does nothing, and one that only sets two response fields as long
// as a limiter's — no limiting middleware costs less than the second.
// `npm run bench:middleware-cost` (Linux: reads /proc). EXPRESS_RATE, HONO_RATE,
// SECONDS, ROUNDS from the environment.
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import autocannon from "autocannon";

const VARIANTS = process.env.VARIANTS?.split(",") ?? [
  "express-none",
  "express-floor-noop",
  "express-floor-fields",
  "express-rate-limit",
  "express-portero",
  "hono-none",
  "hono-floor-noop",
  "hono-floor-fields",
  "hono-rate-limiter",
  "hono-portero",
];
// Each framework at a rate its hello-world serves with room to spare on one core
// (Express 5 is the slower).
const RATE = { express: Number(process.env.EXPRESS_RATE ?? 3_000), hono: Number(process.env.HONO_RATE ?? 10_000) };
const SECONDS = Number(process.env.SECONDS ?? 4);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const HZ = Number(spawnSync("getconf", ["CLK_TCK"]).stdout?.toString().trim() || 100);
const pinned = spawnSync("taskset", ["-c", "0", "true"]).status === 0;

// User and system time of process `pid` so far, in clock ticks.
function ticks(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

async function measure(variant) {
  const server = new URL("./middleware-server.mjs", import.meta.url).pathname;
  const [cmd, args] = pinned ? ["taskset", ["-c", "0", process.execPath, server, variant]] : [process.execPath, [server, variant]];
  // taskset execs node: the child's pid is the server's.
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const port = await new Promise((ok, fail) => {
      createInterface({ input: child.stdout }).once("line", (l) => ok(Number(l)));
      child.once("exit", (code) => fail(new Error(`${variant} exited ${code}`)));
    });
    const url = `http://127.0.0.1:${port}/`;
    const overallRate = RATE[variant.split("-")[0]];
    await autocannon({ url, connections: 20, duration: 1, overallRate });
    const before = ticks(child.pid);
    const r = await autocannon({ url, connections: 20, duration: SECONDS, overallRate });
    const used = ticks(child.pid) - before;
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`${variant}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return (used * 1e6) / HZ / r.requests.total;
  } finally {
    child.kill();
  }
}

if (pinned) spawnSync("taskset", ["-cp", "1", String(process.pid)]);
const best = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const v of VARIANTS) best[v] = Math.min(best[v] ?? Infinity, await measure(v));
}
console.log(`server CPU per request at ${RATE.express} (Express) and ${RATE.hono} (Hono) requests/s, best of ${ROUNDS} rounds of ${SECONDS} s${pinned ? ", server and load generator pinned apart" : ""}\n`);
console.log("| server | µs of CPU a request | added to none | none's speed × |");
console.log("|---|---:|---:|---:|");
for (const v of VARIANTS) {
  const none = best[`${v.split("-")[0]}-none`];
  console.log(`| ${v} | ${best[v].toFixed(1)} | ${(best[v] - none).toFixed(1)} | ${(none / best[v]).toFixed(2)} |`);
}
