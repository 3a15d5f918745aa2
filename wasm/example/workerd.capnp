# Serves the package's example Worker (example/worker.js: one GCRA per client address,
# per isolate) in workerd, from a project that installed the package and workerd:
#
#   npm install portero workerd
#   npx workerd serve node_modules/portero/example/workerd.capnp --socket-addr http=127.0.0.1:8787
#   curl -i http://127.0.0.1:8787/
#
# Paths are relative to this file; the module names are the paths the Worker and the
# package import each other by.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
  sockets = [ (name = "http", address = "127.0.0.1:8787", http = (), service = "main") ],
);

const worker :Workerd.Worker = (
  modules = [
    (name = "example/worker.js", esModule = embed "worker.js"),
    (name = "js/index.js", esModule = embed "../js/index.js"),
    (name = "js/errors.js", esModule = embed "../js/errors.js"),
    (name = "pkg/portero_wasm.js", esModule = embed "../pkg/portero_wasm.js"),
    (name = "pkg/portero_wasm_bg.wasm", wasm = embed "../pkg/portero_wasm_bg.wasm"),
  ],
  bindings = [
    (name = "RATE_PER_MINUTE", text = "60"),
  ],
  compatibilityDate = "2026-11-01",
);
