// The package's errors, one spelling for both entry points: every message starts with
// "portero: ", and a refused value is shown without being called into (an object's own
// conversion may throw, or say anything).

/** Throws an Error whose message starts with "portero: ". */
export function fail(message) {
  throw new Error(`portero: ${message}`);
}

/** `v` as an error message shows it: strings quoted and cut short, objects and functions by their kind. */
export function shown(v) {
  switch (typeof v) {
    case "string":
      return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
    case "bigint":
      return `${v}n`;
    case "symbol":
      return "a symbol";
    case "function":
      return "a function";
    case "object":
      return v === null ? "null" : "an object";
    default:
      return String(v);
  }
}
