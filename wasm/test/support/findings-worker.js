// A Worker for durable.test.mjs that runs the lease findings' scenarios inside one
// isolate, on the test's PorteroShard namespace: its leased limiter is built at module
// scope, where Workers code builds it (workerd refuses random numbers there).
import { env } from "cloudflare:workers";
import wasmModule from "../../pkg/portero_wasm_bg.wasm";
import { initSync } from "../../js/index.js";
import { EdgeLimiter } from "../../js/durable.js";

initSync(wasmModule);

// 50 an hour, leases of 10 for a minute, the default table of leases (localKeys).
const leased = new EdgeLimiter({
  namespace: env.LIMITER,
  rule: { perHour: 50 },
  shards: 4,
  lease: { batch: 10, lifetimeMs: 60_000 },
});

// The same, for the alternating costs: a table of leases the flood has not filled.
const alternating = new EdgeLimiter({
  namespace: env.LIMITER,
  rule: { perHour: 50 },
  shards: 4,
  lease: { batch: 10, lifetimeMs: 60_000 },
});

// The test's namespace with every check's call held back 5 ms before it is sent: a
// call always outlasts a 1 ms lease (a call within the same workerd can take under
// 1 ms, and then the lease was still live when its answer came).
const slowed = {
  idFromName: (name) => env.LIMITER.idFromName(name),
  get(id) {
    const stub = env.LIMITER.get(id);
    return {
      async checkMany(...args) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return stub.checkMany(...args);
      },
      settleMany: (...args) => stub.settleMany(...args),
      stats: (...args) => stub.stats(...args),
    };
  },
};

// Leases that live 1 ms: each ends while its call is on the way.
const brief = new EdgeLimiter({
  namespace: slowed,
  rule: { perHour: 50 },
  shards: 4,
  lease: { batch: 10, lifetimeMs: 1 },
});

// The same rule without leases: what the object itself has left (a check of 0 units).
const plain = new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 50 }, shards: 4 });

/** Checks `key` at the costs given, round and round, until one is refused: the units admitted. */
async function spend(limiter, key, costs) {
  let admitted = 0;
  for (let i = 0; i < 1_000; i++) {
    const cost = costs[i % costs.length];
    const d = await limiter.check(key, Date.now(), cost);
    if (!d.allowed) return admitted;
    admitted += cost;
  }
  return admitted;
}

const scenarios = {
  // A victim's lease, then `flood` new keys through the same limiter, then the victim
  // spends the rest of its hour: what it got in all, and what its isolate still holds.
  async flood({ victim, flood }) {
    const first = await leased.check(victim, Date.now(), 1);
    for (let start = 0; start < flood; start += 1_000) {
      const keys = Array.from({ length: Math.min(1_000, flood - start) }, (_, i) => [`flood-${victim}-${start + i}`, 1]);
      await leased.checkMany(keys, Date.now());
    }
    const rest = await spend(leased, victim, [1]);
    return { admitted: (first.allowed ? 1 : 0) + rest, held: leased.leasedUnits(victim) };
  },
  // Costs 1, 1, 9, ... until one is refused: the units admitted, those the isolate
  // still holds, and those the object has left.
  async alternating({ key }) {
    const admitted = await spend(alternating, key, [1, 1, 9]);
    const object = (await plain.check(key, Date.now(), 0)).remaining;
    return { admitted, held: alternating.leasedUnits(key), object };
  },
  // A check whose lease ends before its answer comes: what `remaining` says, what the
  // isolate holds when it answers, and what the object has left.
  async expired({ key }) {
    const d = await brief.check(key, Date.now(), 1);
    const held = brief.leasedUnits(key, Date.now());
    const object = (await plain.check(key, Date.now(), 0)).remaining;
    return { allowed: d.allowed, remaining: d.remaining, held, object };
  },
  // Settlements through RPC: a shard's admission of 10 settled at 3 (given back by
  // the object), a lease's of 4 at 1 (given back to the lease), one of 2 at 20 (charged
  // past the lease): what the object has left and what the isolate holds after each.
  async settle({ key }) {
    const steps = [];
    const shard = await plain.check(key, Date.now(), 10);
    await plain.settle(shard, 3);
    steps.push((await plain.check(key, Date.now(), 0)).remaining);
    await settling.check(key, Date.now(), 1); // leases 10: 9 held
    const leasedFour = await settling.check(key, Date.now(), 4);
    await settling.settle(leasedFour, 1);
    steps.push(settling.leasedUnits(key));
    const leasedTwo = await settling.check(key, Date.now(), 2);
    await settling.settle(leasedTwo, 20);
    steps.push(settling.leasedUnits(key), (await plain.check(key, Date.now(), 0)).remaining);
    return { steps };
  },
};

// A leased limiter for the settlements (a table of its own).
const settling = new EdgeLimiter({
  namespace: env.LIMITER,
  rule: { perHour: 50 },
  shards: 4,
  lease: { batch: 10, lifetimeMs: 60_000 },
});

export default {
  async fetch(request) {
    if (request.method !== "POST") return new Response("ok\n");
    const { scenario, ...args } = await request.json();
    return Response.json(await scenarios[scenario](args));
  },
};
