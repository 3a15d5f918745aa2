import type { CommonOptions, Refused } from "./middleware.js";

type Req = any;
type Res = any;
type Next = (error?: unknown) => void;

export interface Options extends CommonOptions {
  /** The key of a request (default `req.ip`). */
  keyGenerator?: (req: Req, res: Res) => string | Promise<string>;
  /** Requests that are not limited. */
  skip?: (req: Req, res: Res) => boolean | Promise<boolean>;
  /** Answers a refused request in place of the 429 (the fields are already set). */
  handler?: (req: Req, res: Res, next: Next, refused: Refused) => unknown;
  /** The units a request costs (default 1). */
  cost?: (req: Req, res: Res) => number | Promise<number>;
  /** Whether a response counts as successful (default: status below 400; any truthy answer is a success). */
  requestWasSuccessful?: (req: Req, res: Res) => unknown | Promise<unknown>;
  /** The request's real cost once the response is sent whole (undefined: its estimate). */
  settle?: (req: Req, res: Res) => number | undefined | Promise<number | undefined>;
}

/** The middleware. */
export function rateLimit(options?: Options): (req: Req, res: Res, next: Next) => Promise<void>;
export default rateLimit;
