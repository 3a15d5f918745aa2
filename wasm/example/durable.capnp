# Serves the package's Durable Object example (example/durable-worker.js: one exact
# limit per client address across every isolate, PorteroShard objects holding the
# state, leases on /leased) in workerd, from a project that installed the package and
# workerd — the local path for the object, on Node 20 too (no wrangler needed):
#
#   npm install portero workerd
#   npx workerd serve node_modules/portero/example/durable.capnp --socket-addr http=127.0.0.1:8787
#   curl -i -H 'CF-Connecting-IP: 192.0.2.1' http://127.0.0.1:8787/
#
# The objects' storage is in memory here (a restart forgets what keys used); for
# storage on disk, replace `inMemory = void` by `localDisk = "do-disk"` and add a
# service `(name = "do-disk", disk = (path = "/some/writable/dir", writable = true))`.
# Paths are relative to this file.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
  sockets = [ (name = "http", address = "127.0.0.1:8787", http = (), service = "main") ],
);

const worker :Workerd.Worker = (
  modules = [
    (name = "example/durable-worker.js", esModule = embed "durable-worker.js"),
    (name = "js/index.js", esModule = embed "../js/index.js"),
    (name = "js/errors.js", esModule = embed "../js/errors.js"),
    (name = "js/durable.js", esModule = embed "../js/durable.js"),
    (name = "js/lease.js", esModule = embed "../js/lease.js"),
    (name = "js/shard.js", esModule = embed "../js/shard.js"),
    (name = "js/keys.js", esModule = embed "../js/keys.js"),
    (name = "js/settle.js", esModule = embed "../js/settle.js"),
    (name = "pkg/portero_wasm.js", esModule = embed "../pkg/portero_wasm.js"),
    (name = "pkg/portero_wasm_bg.wasm", wasm = embed "../pkg/portero_wasm_bg.wasm"),
  ],
  durableObjectNamespaces = [ (className = "PorteroShard", uniqueKey = "portero-example") ],
  durableObjectStorage = (inMemory = void),
  bindings = [
    (name = "LIMITER", durableObjectNamespace = "PorteroShard"),
    (name = "RATE_PER_HOUR", text = "50"),
    (name = "SHARDS", text = "4"),
    (name = "LEASE_BATCH", text = "10"),
  ],
  compatibilityDate = "2026-11-01",
);
