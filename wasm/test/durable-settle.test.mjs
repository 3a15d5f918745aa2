// Settling at the edge (`EdgeLimiter.settle`, the object's `settleMany`), in Node on the
// in-memory shards: units not used go back to the shard by portero's refund rule or to
// the lease they came from, units above the estimate come from the lease and then
// from the shard as debt with an exact wait, the ledger survives a restart, and a
// decision settles once. (The core's bound for a kept word: settle_twins.rs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { register } from "node:module";

register("./support/loader.mjs", import.meta.url);
const { initSync, Rule } = await import("../js/index.js");
const { EdgeLimiter } = await import("../js/durable.js");
const { namespace, withClock } = await import("./support/shards.mjs");
initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));

const portero = (re) => (e) => e.constructor === Error && e.message.startsWith("portero: ") && re.test(e.message);
// 100 an hour: one unit every 36 s, nothing refills while the clock stands still.
const rule = { perHour: 100 };
const plain = (ns, extra = {}) => new EdgeLimiter({ namespace: ns, rule, shards: 1, ...extra });
const leasing = (ns, batch = 10) => plain(ns, { lease: { batch, lifetimeMs: 60_000 } });
// What another isolate (no lease, nothing remembered) is told is left for `key`.
const left = async (ns, key, now) => (await plain(ns).check(key, now, 0)).remaining;

test("a shard's admissions settled below their estimates leave the key as if each had cost its real cost", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const one = await edge.check("k", clock.now, 10);
    const after = await edge.settle(one, 3);
    assert.deepEqual([after.allowed, after.remaining, after.servedBy], [true, 97, "shard"]);
    assert.equal(await left(ns, "k", clock.now), 97);
    // Under load: five admissions of 10 outstanding at once, settled oldest first at 3
    // each (none of them the key's last any more): all 35 unused units come back.
    const five = [];
    for (let i = 0; i < 5; i++) five.push(await edge.check("busy", clock.now, 10));
    for (const d of five) await edge.settle(d, 3);
    assert.equal(await left(ns, "busy", clock.now), 100 - 15);
  }));

test("units above the estimate are charged past the limit, and the wait is exact", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const d = await edge.check("k", clock.now, 10);
    const after = await edge.settle(d, 130);
    assert.deepEqual([after.allowed, after.remaining], [false, 0]);
    // 130 charged against a burst of 100 at 36 s a unit: one unit fits after 31 units.
    const refused = await plain(ns).check("k", clock.now);
    assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 31 * 36_000]);
  }));

test("quiet, each request settled at once: the shard is a twin charged the real cost at the start", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const model = new Rule({ ...rule, algorithm: "gcra" });
    let twin = model.initialState;
    let seed = 7;
    const next = (n) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
    for (let i = 0; i < 300; i++) {
      clock.now += next(4) * 9_000;
      const cost = 1 + next(5);
      const real = next(10);
      const d = await edge.check("k", clock.now, cost);
      if (d.allowed) {
        await edge.settle(d, real);
        const [, word] = model.settle({ state: twin, ledger: 0n }, null, real, clock.now);
        twin = word.state;
      }
      const expected = model.decide(twin, clock.now, 0, false)[0].remaining;
      assert.equal(await left(ns, "k", clock.now), expected, `step ${i}`);
    }
  }));

test("a lease's units go back to that lease, with no call; above the estimate they come from it first", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = leasing(ns);
    const first = await edge.check("k", clock.now); // the shard: 10 charged, 9 held
    const second = await edge.check("k", clock.now, 4); // the lease: 5 held
    const calls = ns.calls;
    const back = await edge.settle(second, 1);
    assert.deepEqual([back.servedBy, back.remaining], ["lease", 8]);
    assert.equal(edge.leasedUnits("k", clock.now), 8);
    assert.equal(ns.calls, calls, "settled in the lease");
    // The first request's unit came from the shard: given back there.
    await edge.settle(first, 0);
    assert.equal(await left(ns, "k", clock.now), 100 - 9);
    // Above the estimate: the lease's 8 first, then 12 charged by the shard.
    const third = await edge.check("k", clock.now, 2); // 6 held
    const more = await edge.settle(third, 20);
    assert.equal(edge.leasedUnits("k", clock.now), 0);
    assert.equal(more.servedBy, "shard");
    assert.equal(await left(ns, "k", clock.now), 100 - 9 - 12);
  }));

test("units of a lease that ended go back to the shard, by the admission that granted the lease", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = leasing(ns);
    await edge.check("k", clock.now); // 10 charged, 9 held
    const spent = await edge.check("k", clock.now, 5); // 4 held
    const owing = await edge.check("k", clock.now, 2); // 2 held
    clock.now += 60_000; // the lease's whole life
    await edge.settle(spent, 0);
    await edge.settle(owing, 7);
    // As a twin that took 1, then 7 (the real costs), at the start, 60 s ago (36 s a
    // unit): 8 units of debt, 228 s of it still ahead: 93 left. The ended lease's 2
    // unspent units went back with the second settlement, in its call.
    assert.equal(await left(ns, "k", clock.now), 93);
    assert.equal(edge.leasedUnits("k", clock.now), 0);
  }));

test("a settlement that moved the word back survives a restart with its ledger", () =>
  withClock(async (clock) => {
    const storages = new Map();
    const ns = namespace(storages);
    const edge = plain(ns);
    const a = await edge.check("k", clock.now, 10);
    await edge.check("k", clock.now, 10);
    await edge.settle(a, 0); // not the key's last: by the rule, with the ledger
    const stored = storages.get("portero-shard-0").data;
    const value = [...stored].find(([k]) => k.startsWith("k:"))[1];
    assert.match(value, /^\d+\/[1-9]\d*\/\d+\/[0-9a-f]+:[0-9a-f]+:[0-9a-f]+$/, "the state, its ledger, its generation and its places");
    // A new object on the same storage (a restart) holds the same word.
    assert.equal(await left(namespace(storages), "k", clock.now), 90);
  }));

test("a decision settles once, only its own limiter's, at a whole real cost", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const d = await edge.check("k", clock.now, 3);
    for (const real of [-1, 1.5, NaN, "3", 2 ** 60, undefined]) {
      await assert.rejects(edge.settle(d, real), portero(/real must be a whole number/), String(real));
    }
    await edge.settle(d, 3);
    await assert.rejects(edge.settle(d, 0), portero(/admitted, at most once/));
    await assert.rejects(edge.settle({ ...d }, 0), portero(/admitted, at most once/));
    await assert.rejects(plain(ns).settle(d, 0), portero(/admitted, at most once/));
    const refused = await plain(namespace()).check("x", clock.now, 101).catch((e) => e);
    assert.ok(refused instanceof Error);
  }));

test("the object checks a whole batch of settlements before it changes anything", async () => {
  const ns = namespace();
  const edge = plain(ns);
  const d = await edge.check("k", Date.now(), 10);
  const shard = ns.get("portero-shard-0");
  const options = { rule: { algorithm: "gcra", limit: 100, periodMs: 3_600_000, burst: 100 } };
  const good = ["k", null, 5];
  for (const bad of [["k", null, -1], ["k", null, 1.5], [7, null, 1], ["k", { cost: "x" }, 1], "k"]) {
    await assert.rejects(shard.settleMany(options, [good, bad]), portero(/./), JSON.stringify(bad));
  }
  assert.equal(await left(ns, "k", Date.now()), 90, "nothing of a bad batch charged");
  assert.ok(d.allowed);
});

test("a record kept by its declared type settles what it took, and one without its generation is refused aloud", () =>
  withClock(async (clock) => {
    // Found by an outside harness: `KeptAdmission` omitted `generation`, and a record
    // kept by that type settled to nothing, silently (10 settled at 3 gave back 0).
    const ns = namespace();
    const shard = ns.get("portero-shard-0");
    const options = { rule: { algorithm: "gcra", limit: 100, periodMs: 3_600_000, burst: 100 } };
    const [first] = await shard.checkMany(options, [["k", 10]]);
    const { at, cost, before, after, noted, generation } = first.admission; // ShardAdmission's fields
    assert.ok(Number.isSafeInteger(generation));
    await shard.settleMany(options, [["k", { at, cost, before, after, noted, generation }, 3]]);
    assert.equal(await left(ns, "k", clock.now), 97, "7 of 10 back");
    const [second] = await shard.checkMany(options, [["k", 10]]);
    const { generation: _, ...partial } = second.admission; // KeptAdmission's fields only
    await assert.rejects(shard.settleMany(options, [["k", partial, 3]]), portero(/no generation/));
    assert.equal(await left(ns, "k", clock.now), 87, "nothing settled");
  }));

test("a lease that ends with units unspent gives them back to the shard, by the admission that granted them", () =>
  withClock(async (clock) => {
    for (const [algorithm, expected] of [["gcra", 50], ["fixed-window", 49]]) {
      const ns = namespace();
      const r = { perMinute: 60, algorithm }; // a unit a second
      const edge = new EdgeLimiter({ namespace: ns, rule: r, shards: 1, lease: { batch: 10, lifetimeMs: 2_000 } });
      const other = new EdgeLimiter({ namespace: ns, rule: r, shards: 1 });
      const waits = [];
      const ctx = { waitUntil: (p) => waits.push(p) };
      await edge.check("k", clock.now, 1, ctx); // 10 charged, 9 held
      clock.now += 3_000; // the lease ended with its 9
      await edge.check("k", clock.now, 1, ctx); // a new lease of 10: 9 held
      assert.equal(waits.length, 1, `${algorithm}: the give-back, off the path`);
      await Promise.all(waits);
      // GCRA: as if only 1 had been taken then (its 2 s since refilled): 10 used now.
      // The fixed window: the 9 back in the window that counted them: 11 used.
      assert.equal((await other.check("k", clock.now, 0)).remaining, expected, algorithm);
      assert.equal(edge.leasedUnits("k", clock.now), 9);
      clock.now += 120_000;
    }
  }));

// Found by an outside review of settlement (each failed before its fix).

test("an admission of a word dropped idle gives nothing back to the key's next word", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const shard = ns.get("portero-shard-0");
    const y = await edge.check("k", clock.now, 50);
    const x = await edge.check("k", clock.now, 40);
    const w = await edge.check("k", clock.now, 10);
    await edge.settle(y, 0); // not the key's last: by the rule, the ledger moves
    clock.now += 50 * 36_000;
    await shard.alarm(); // idle: dropped, its ledger with it
    assert.ok((await edge.check("k", clock.now, 100)).allowed, "a new word: the whole burst");
    await edge.settle(x, 0); // the old word's admission (40 of the new word, before)
    assert.equal(await left(ns, "k", clock.now), 0, "nothing of the new word given back");
    // What an old admission owes above its estimate is still charged, to the word
    // there is now: 110 against a burst of 100, one unit fits after 11 units' time.
    await edge.settle(w, 20);
    const refused = await plain(ns).check("k", clock.now);
    assert.deepEqual([refused.allowed, refused.retryAfterMs], [false, 11 * 36_000]);
  }));

test("a settlement dated before a check the object applied gives back no more than at that check", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = plain(ns);
    const t0 = clock.now;
    const x = await edge.check("k", t0, 50);
    clock.now = t0 + 40 * 36_000;
    await edge.check("k", clock.now, 50);
    clock.now = t0 + 10 * 36_000; // the object's clock steps back 30 units' time
    await edge.settle(x, 0);
    clock.now = t0 + 40 * 36_000;
    // The twin (only the second admission, of 50, at t0 + 40 units): 50 left.
    assert.equal(await left(ns, "k", clock.now), 50);
  }));

test("with prefetch, a settlement never leaves a limiter holding more than 2 x batch - 1 of a key", () =>
  withClock(async (clock) => {
    const ns = namespace();
    const edge = new EdgeLimiter({ namespace: ns, rule: { perSecond: 10, burst: 20 }, shards: 1, lease: { batch: 4, lifetimeMs: 5_000, prefetch: true } });
    const waits = [];
    const ctx = { waitUntil: (p) => waits.push(p) };
    const decisions = [];
    for (const cost of [1, 1, 2, 1, 1]) {
      decisions.push(await edge.check("k", clock.now, cost, ctx));
      await Promise.all(waits.splice(0));
    }
    for (const d of decisions.slice(-2)) await edge.settle(d, 0);
    assert.ok(edge.leasedUnits("k", clock.now) <= 7, `${edge.leasedUnits("k", clock.now)} held`);
  }));

test("a bad admission time is named as such", () => {
  const rule = new Rule({ perHour: 100 });
  const word = { state: rule.initialState, ledger: 0n };
  const bad = { at: 2 ** 53 - 1, cost: 1, before: 0n, after: 1n, noted: 0n };
  assert.throws(() => rule.settle(word, bad, 0, 1_000), portero(/admission\.at must be a time/));
});

test("every algorithm, settlements out of order: the shard never admits what a twin charged the real cost refuses", () =>
  withClock(async (clock) => {
    for (const algorithm of ["gcra", "token-bucket", "fixed-window", "sliding-window-counter", "leaky-meter"]) {
      const r = { perSecond: 4, burst: 4, algorithm };
      const model = new Rule(r);
      let seed = 11;
      const next = (n) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
      for (let run = 0; run < 6; run++) {
        const ns = namespace();
        const edge = new EdgeLimiter({ namespace: ns, rule: r, shards: 1 });
        const probe = new EdgeLimiter({ namespace: ns, rule: r, shards: 1 });
        let twin = { state: model.initialState, ledger: 0n };
        const outstanding = [];
        for (let op = 0; op < 40; op++) {
          clock.now += next(4) * 60;
          if (next(2) === 0 || outstanding.length === 0) {
            const cost = 1 + next(3);
            const real = next(7) === 0 ? cost + next(4) : next(cost + 1);
            const d = await edge.check("k", clock.now, cost);
            if (!d.allowed) continue;
            // The twin takes `real` now, as a request of that cost arriving now would.
            const [one, after] = model.decide(twin.state, clock.now, 1, true);
            const admission = one.allowed ? { at: clock.now, cost: 1, before: twin.state, after, noted: twin.ledger } : null;
            twin = model.settle({ state: after, ledger: twin.ledger }, admission, real, clock.now)[1];
            outstanding.push([d, real, cost]);
          } else {
            const [d, real] = outstanding.splice(next(outstanding.length), 1)[0];
            await edge.settle(d, real);
          }
          if (outstanding.some(([, real, cost]) => real > cost)) continue;
          const left = (await probe.check("k", clock.now, 0)).remaining;
          for (let cost = 1; cost <= 4; cost++) {
            const theirs = model.decide(twin.state, clock.now, cost, false)[0].allowed;
            assert.ok(cost > left || theirs, `${algorithm}, run ${run}, op ${op}: the shard admits ${cost} where its twin refuses`);
          }
        }
        clock.now += 3_600_000;
      }
    }
  }));

// The orders and costs drawn, as the core's own order test draws them (splitmix64): a
// number below `n`.
function draws(seed) {
  const M = (1n << 64n) - 1n;
  let s = BigInt(seed);
  return (n) => {
    s = (s + 0x9e3779b97f4a7c15n) & M;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    return Number((z ^ (z >> 31n)) % BigInt(n));
  };
}

test("settled in any order with no time passing, a key stands exactly where its twin charged the real costs stands", () =>
  withClock(async (clock) => {
    // 1,000 an hour (a unit every 3.6 s), a burst of 1,000: sixteen of 10 fit. The
    // object's own calls, so that half the settlements can follow a restart.
    const options = { rule: { perHour: 1_000 }, shards: 1 };
    const next = draws(54);
    for (const order of ["reverse", "forward", "random", "random", "random"]) {
      const storages = new Map();
      const shard = namespace(storages).get("portero-shard-0");
      const taken = [];
      for (let i = 0; i < 16; i++) {
        const [a, b] = await shard.checkMany(options, [["a", 10, 10], ["b", 3, 3]]);
        assert.ok(a.allowed && b.allowed);
        taken.push(a.admission);
      }
      if (order === "reverse") taken.reverse();
      if (order === "random") for (let i = taken.length - 1; i > 0; i--) {
        const j = next(i + 1);
        [taken[i], taken[j]] = [taken[j], taken[i]];
      }
      // Half settled before a restart, half after: the places live in storage.
      await shard.settleMany(options, taken.slice(0, 8).map((a) => ["a", a, 3]));
      const restarted = namespace(storages).get("portero-shard-0");
      await restarted.settleMany(options, taken.slice(8).map((a) => ["a", a, 3]));
      for (const later of [0, 5 * 3_600, 100 * 3_600]) {
        clock.now += later;
        const [a, b] = await restarted.checkMany(options, [["a", 0, 0], ["b", 0, 0]]);
        assert.equal(a.remaining, b.remaining, `${order}: at +${later} ms`);
      }
      clock.now += 3_600_000;
    }
    // With the ledger alone, sixteen settled in reverse kept 42 of the 112 units.
  }));

test("with time passing and 64 in flight, at least 99 % of what settlements give back comes back", () =>
  withClock(async (clock) => {
    // 100 a second (T = 10 ms), a burst of 1,000; events 5 ms apart.
    const rule = { perSecond: 100, burst: 1_000 };
    const next = draws(64);
    let [kept, back] = [0, 0];
    for (let run = 0; run < 20; run++) {
      const ns = namespace();
      const edge = new EdgeLimiter({ namespace: ns, rule, shards: 1 });
      const flight = [];
      let admitted = 0;
      while (admitted < 64 || flight.length > 0) {
        clock.now += 5;
        if (admitted < 64 && (flight.length === 0 || next(2) === 0)) {
          const real = next(8);
          const d = await edge.check("a", clock.now, 8);
          assert.ok(d.allowed);
          flight.push([d, real]);
          const twin = await edge.check("b", clock.now, 8);
          await edge.settle(twin, real);
          back += 8 - real;
          admitted += 1;
        } else {
          // Taken out as the core's test takes it (the last moves into its place).
          const which = next(flight.length);
          const [d, real] = flight[which];
          flight[which] = flight[flight.length - 1];
          flight.pop();
          await edge.settle(d, real);
        }
      }
      const mine = (await edge.check("a", clock.now, 0)).remaining;
      const theirs = (await edge.check("b", clock.now, 0)).remaining;
      assert.ok(mine <= theirs, "never looser than the twin");
      kept += theirs - mine;
      clock.now += 60_000;
    }
    console.log(`the edge: ${kept} of ${back} give-back units kept, ${(100 * (back - kept) / back).toFixed(2)} % back`);
    assert.ok(kept * 100 <= back, `${kept} of ${back} kept`);
  }));

// Found by an outside harness: a log of places claiming more given back behind an
// admission than the ledger moved since it gave back more than no log at all (95
// where its twin has 90). A log that claims more than its ledger can hold is not read.
test("a log of places claiming more than its ledger moved gives back no more than none", () => {
  const model = new Rule({ perHour: 100, algorithm: "gcra" }); // a unit every 36 s
  const U = 36_000;
  const t0 = 1_700_000_000_000;
  const take = (w, now, cost) => {
    const [d, next] = model.decide(w.state, now, cost);
    assert.ok(d.allowed);
    return [{ ...w, state: next }, { at: now, cost, before: w.state, after: next, noted: w.ledger }];
  };
  const left = (w, now) => model.decide(w.state, now, 0, false)[0].remaining;
  const run = (places) => {
    let w = { state: model.initialState, ledger: 0n, places: "" };
    let a, b;
    [w, a] = take(w, t0, 10);
    [w, b] = take(w, t0, 10);
    [, w] = model.settle(w, a, 0, t0); // a gives back: b's slot moves back
    [w] = take(w, t0 + 15 * U, 10); // c, after an idle spell
    const [, after] = model.settle({ ...w, places: places(w.places) }, b, 0, t0 + 15 * U);
    return left(after, t0 + 15 * U);
  };
  const twin = left(take({ state: model.initialState, ledger: 0n }, t0 + 15 * U, 10)[0], t0 + 15 * U);
  assert.equal(twin, 90);
  assert.equal(run((p) => p), 90, "its own log");
  assert.equal(run(() => ""), 90, "no log");
  const claim = "ffffffffffffffffffffffff:fffffffffffffffffffffffff:ffffffffffffffff";
  assert.equal(run((p) => `${p},${claim}`), 90, "a log claiming everything behind");
});

// Found by an outside harness: the object's clock never went back while it lived, but
// a restart on a host whose clock is behind dated a settlement before a check already
// applied, and gave back that check's units (99 left where the twin has 90).
test("across a restart the object's clock still never goes back", () =>
  withClock(async (clock) => {
    const options = { rule: { perHour: 100 }, shards: 1 };
    const U = 36_000;
    const storages = new Map();
    const t0 = clock.now;
    const shard = namespace(storages).get("portero-shard-0");
    const [a] = await shard.checkMany(options, [["k", 10, 10]]);
    clock.now = t0 + 15 * U;
    await shard.checkMany(options, [["k", 10, 10]]); // after an idle spell
    const restarted = namespace(storages).get("portero-shard-0");
    clock.now = t0 + U; // the new host's clock is behind
    await restarted.settleMany(options, [["k", a.admission, 0]]);
    clock.now = t0 + 15 * U;
    const [left] = await restarted.checkMany(options, [["k", 0, 0]]);
    assert.equal(left.remaining, 90, "as the twin that saw only the later check");
  }));
