/** The time as JWTs and the stores' records count it: whole seconds since the epoch. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
