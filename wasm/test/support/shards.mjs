// The stand-ins the Durable Object tests share: an in-memory storage, a namespace of
// shards on it (counting the calls made to them), and a clock moved by hand. Loaded
// after the test has registered the `cloudflare:workers` loader.
const { PorteroShard } = await import("../../js/durable.js");

// workerd's storage keeps keys as UTF-8: a lone surrogate comes back as three U+FFFD
// (its three WTF-8 bytes, each invalid), so "a\uD800" and "a\uDC00" are one stored key
// (seen in workerd 1.20261117). The stand-in does the same.
const storedKey = (k) => k.replace(/\p{Cs}/gu, "\uFFFD\uFFFD\uFFFD");

/** A storage that keeps everything in a Map and records each put's options. */
export function memoryStorage(data = new Map()) {
  const puts = [];
  return {
    data,
    puts,
    async get(key) {
      return data.get(storedKey(key));
    },
    async list({ prefix }) {
      return new Map([...data].filter(([k]) => k.startsWith(prefix)));
    },
    put(entries, value, options) {
      if (typeof entries === "string") {
        data.set(storedKey(entries), value);
        puts.push(options);
        return Promise.resolve();
      }
      // As the runtime: at most 128 keys per call.
      if (Object.keys(entries).length > 128) throw new RangeError("put: more than 128 keys");
      for (const [k, v] of Object.entries(entries)) data.set(storedKey(k), v);
      puts.push(value);
      return Promise.resolve();
    },
    async delete(keys) {
      if ([keys].flat().length > 128) throw new RangeError("delete: more than 128 keys");
      for (const k of [keys].flat()) data.delete(storedKey(k));
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
export function namespace(storages = new Map()) {
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
        settleMany: async (...args) => {
          ns.calls += 1;
          await ready;
          return shard.settleMany(...args);
        },
        stats: async () => (await ready, shard.stats()),
        alarm: async () => (await ready, shard.alarm()),
      };
    },
  };
  return ns;
}

/** Runs `f` with `Date.now` on a clock it moves by hand. */
export async function withClock(f) {
  const real = Date.now;
  const clock = { now: 1_700_000_000_000 };
  Date.now = () => clock.now;
  try {
    return await f(clock);
  } finally {
    Date.now = real;
  }
}
