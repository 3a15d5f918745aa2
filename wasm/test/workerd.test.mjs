// The example Worker in a real edge runtime: workerd (Cloudflare's open-source Workers
// runtime, from npm) serves it on a free loopback port; we send requests and check that
// exactly the allowed number pass and the rest get 429 with the right headers.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, unlinkSync, writeFileSync } from "node:fs";
import { binary, freePort, packageModules, root, startWorkerd, stopWorkerd, workerdConfig } from "./support/workerd.mjs";

const RATE = 5; // per minute, burst 5: no token comes back during the test

let child;
let port;
let config;

before(async () => {
  assert.ok(existsSync(binary), `workerd binary missing at ${binary}: run npm ci in wasm/`);
  assert.ok(existsSync(`${root}pkg/portero_wasm_bg.wasm`), "wasm/pkg missing: run cargo xtask wasm");
  port = await freePort();
  config = `${root}.workerd-test-${process.pid}.capnp`;
  const worker = `(
  modules = ${packageModules("example/worker.js")},
  bindings = [ (name = "RATE_PER_MINUTE", text = "${RATE}") ],
  compatibilityDate = "2026-11-01",
)`;
  writeFileSync(config, workerdConfig([{ name: "main", port, worker }]));
  ({ child } = await startWorkerd(config, [port], {
    path: "/",
    init: { headers: { "CF-Connecting-IP": "192.0.2.250" } },
  }));
});

after(async () => {
  await stopWorkerd(child);
  if (config && existsSync(config)) unlinkSync(config);
});

function get(ip) {
  return fetch(`http://127.0.0.1:${port}/`, { headers: { "CF-Connecting-IP": ip } });
}

test("exactly the allowed number pass, then 429 with the right headers", async () => {
  const statuses = [];
  let last;
  for (let i = 0; i < RATE + 3; i++) {
    last = await get("198.51.100.7");
    statuses.push(last.status);
    const body = await last.text();
    if (last.status === 200) {
      assert.equal(body, "ok\n");
      assert.equal(last.headers.get("RateLimit-Policy"), `"per-ip";q=${RATE};w=60`);
      assert.match(last.headers.get("RateLimit"), new RegExp(`^"per-ip";r=${RATE - 1 - i};t=\\d+$`));
    } else {
      assert.deepEqual(JSON.parse(body), { error: "rate limit exceeded" });
      const retry = Number(last.headers.get("Retry-After"));
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 12, `Retry-After ${retry}`);
      assert.equal(last.headers.get("RateLimit"), `"per-ip";r=0;t=${retry}`);
      assert.equal(last.headers.get("RateLimit-Policy"), `"per-ip";q=${RATE};w=60`);
      assert.equal(last.headers.get("Cache-Control"), "no-store");
      assert.equal(last.headers.get("Content-Type"), "application/json");
    }
  }
  assert.deepEqual(statuses, [...Array(RATE).fill(200), 429, 429, 429]);
});

test("another client address has its own share", async () => {
  const r = await get("198.51.100.8");
  assert.equal(r.status, 200);
  await r.text();
});
