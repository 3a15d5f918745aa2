// The Durable Object limiter's logic in Node, on an in-memory storage and namespace:
// batching per shard, local refusals that never admit, what each durability mode asks
// of storage, and a restart from storage. (The runtime itself: durable.test.mjs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { register } from "node:module";

register("./support/loader.mjs", import.meta.url);
const { initSync } = await import("../js/index.js");
const { EdgeLimiter, PorteroShard } = await import("../js/durable.js");
initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));

/** A storage that keeps everything in a Map and records each put's options. */
function memoryStorage(data = new Map()) {
  const puts = [];
  return {
    data,
    puts,
    async list({ prefix }) {
      return new Map([...data].filter(([k]) => k.startsWith(prefix)));
    },
    put(entries, value, options) {
      if (typeof entries === "string") {
        data.set(entries, value);
        puts.push(options);
        return Promise.resolve();
      }
      for (const [k, v] of Object.entries(entries)) data.set(k, v);
      puts.push(value);
      return Promise.resolve();
    },
    async delete(keys) {
      for (const k of [keys].flat()) data.delete(k);
    },
    alarm: null,
    async getAlarm() {
      return this.alarm;
    },
    async setAlarm(t) {
      this.alarm = t;
    },
  };
}

/** A namespace of shards on one storage each; counts the calls made to them. */
function namespace(storages = new Map()) {
  const objects = new Map();
  const ns = {
    calls: 0,
    storages,
    idFromName: (name) => name,
    get(id) {
      if (!storages.has(id)) storages.set(id, memoryStorage());
      if (!objects.has(id)) {
        // As the runtime does, no call reaches the object before its constructor's
        // blockConcurrencyWhile has finished.
        let ready;
        const ctx = { storage: storages.get(id), blockConcurrencyWhile: (f) => (ready = f()) };
        objects.set(id, { shard: new PorteroShard(ctx, {}), ready });
      }
      const { shard, ready } = objects.get(id);
      return {
        checkMany: async (...args) => {
          ns.calls += 1;
          await ready;
          return shard.checkMany(...args);
        },
        stats: async () => (await ready, shard.stats()),
      };
    },
  };
  return ns;
}

test("a request's checks for one shard travel in one call", async () => {
  const ns = namespace();
  const limiter = new EdgeLimiter({ namespace: ns, rule: { perMinute: 100 }, shards: 1 });
  const keys = Array.from({ length: 10 }, (_, i) => [`k${i}`, 1]);
  const decisions = await limiter.checkMany(keys, Date.now());
  assert.equal(decisions.length, 10);
  assert.ok(decisions.every((d) => d.allowed && d.servedBy === "shard"));
  assert.equal(ns.calls, 1);
  const spread = new EdgeLimiter({ namespace: namespace(), rule: { perMinute: 100 }, shards: 4 });
  await spread.checkMany(keys, Date.now());
  assert.ok(spread.calls >= 1 && spread.calls <= 4, `${spread.calls} calls for 4 shards`);
});

test("the local stages only refuse, and save the calls for a key that is over", async () => {
  const ns = namespace();
  const limiter = new EdgeLimiter({ namespace: ns, rule: { perHour: 5 }, shards: 2 });
  const now = Date.now();
  let admitted = 0;
  for (let i = 0; i < 20; i++) {
    const d = await limiter.check("abuser", now);
    if (d.allowed) {
      admitted += 1;
      assert.equal(d.servedBy, "shard", "only the shard admits");
    }
  }
  assert.equal(admitted, 5);
  assert.equal(ns.calls, 5, "after the fifth, this isolate's own count refuses locally");
  // Another isolate (a second client on the same shards) asks once, then remembers.
  const other = new EdgeLimiter({ namespace: ns, rule: { perHour: 5 }, shards: 2 });
  for (let i = 0; i < 5; i++) assert.equal((await other.check("abuser", now)).allowed, false);
  assert.equal(ns.calls, 6);
});

test("durability: confirmed waits for the write, fast does not; a restart reloads the states", async () => {
  const storages = new Map();
  for (const durability of ["confirmed", "fast"]) {
    const ns = namespace(storages);
    const limiter = new EdgeLimiter({ namespace: ns, rule: { perHour: 3 }, shards: 1, durability });
    await limiter.check(`key-${durability}`, Date.now());
    const puts = storages.get("portero-shard-0").puts.filter((o) => o && "allowUnconfirmed" in o);
    assert.equal(puts.at(-1).allowUnconfirmed, durability === "fast");
  }
  // A new object on the same storage (a restart) knows what the keys used.
  const ns = namespace(storages);
  const limiter = new EdgeLimiter({ namespace: ns, rule: { perHour: 3 }, shards: 1 });
  const d = await limiter.check("key-confirmed", Date.now());
  assert.equal(d.remaining, 1, "the second of three");
});

test("bad options are clear errors", () => {
  const ns = namespace();
  assert.throws(() => new EdgeLimiter({ namespace: {}, rule: { perHour: 3 } }), /namespace/);
  assert.throws(() => new EdgeLimiter({ namespace: ns, rule: { perHour: 3 }, shards: 0 }), /shards/);
  assert.throws(() => new EdgeLimiter({ namespace: ns, rule: { perHour: 3 }, durability: "maybe" }), /durability/);
  assert.throws(() => new EdgeLimiter({ namespace: ns, rule: { perHour: NaN } }), /portero/);
});
