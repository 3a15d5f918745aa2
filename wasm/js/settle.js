// A settlement of an admission `EdgeLimiter` answered, moved to its real cost: what
// goes back to this isolate's leases at once, and what the shard must settle.
//
// Invariant: every unit the request took is given back at most once, each to where it
// came from — a lease's units to that lease while it lives (and within what a limiter
// may hold), otherwise to the shard by the admission that granted them (portero's
// refund rule there); units above the estimate come from the key's live leases first,
// the rest charged by the shard past the limit. Nothing is given back twice: the
// handle is settled once (`EdgeLimiter` forgets it first).

/**
 * The shard's part of settling `handle` (`{ key, slot, cost, parts, shard }`: the units
 * taken from leases, and the shard's admission and units) at `real` at `at`, after
 * giving what it can back to `leases` here: `[key, admission or null, real]` triples
 * for the shard's `settleMany` (empty: settled here).
 */
export function owedFor({ key, slot, cost, parts, shard }, real, leases, at) {
  const owed = [];
  if (real < cost) {
    let back = cost - real;
    for (const { lease, units } of parts) {
      const n = Math.min(back, units);
      const here = leases.giveBack(slot, lease, n, at);
      if (n > here && lease.admission !== undefined) owed.push([key, lease.admission, lease.admission.cost - (n - here)]);
      back -= n;
    }
    if (shard !== null && back > 0) owed.push([key, shard.admission, shard.admission.cost - Math.min(back, shard.units)]);
  } else if (real > cost) {
    const extra = real - cost - (leases?.take(slot, at, real - cost) ?? 0);
    if (extra > 0) owed.push(shard === null ? [key, null, extra] : [key, shard.admission, shard.admission.cost + extra]);
  }
  return owed;
}
