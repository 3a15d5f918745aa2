// A stand-in for the Workers runtime's "cloudflare:workers" module in Node tests: just
// enough of DurableObject for `js/durable.js` (the real thing is tested in workerd).
export class DurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}
