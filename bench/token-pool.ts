/**
 * The subject tokens the exchange scenarios redeem, one per request: created
 * through the Management API (by the timed creation runs, and outside any
 * window by top-ups), handed out oldest first while young enough.
 */

/** Subject tokens live 60 s; one older than this is not handed to a run. */
const TOKEN_MAX_AGE_MS = 40_000;

/** Shaped like a subject token, known to nobody: what a run gets should the pool run dry (a 400, counted). */
export const NO_TOKEN = `ist_${'A'.repeat(43)}`;

export class TokenPool {
  #values: string[] = [];
  #born: number[] = [];
  #head = 0;
  /** Requests that found the pool empty (and sent NO_TOKEN). */
  exhausted = 0;

  add(value: string): void {
    this.#values.push(value);
    this.#born.push(Date.now());
  }

  /** The oldest token young enough to redeem, or undefined. */
  take(): string | undefined {
    const oldest = Date.now() - TOKEN_MAX_AGE_MS;
    while (this.#head < this.#values.length) {
      const index = this.#head++;
      if (this.#born[index]! >= oldest) return this.#values[index];
    }
    return undefined;
  }

  /** A young token, or NO_TOKEN (counted in `exhausted`) when there is none. */
  takeOrPlaceholder(): string {
    const token = this.take();
    if (token !== undefined) return token;
    this.exhausted += 1;
    return NO_TOKEN;
  }

  /** Tokens that will still be young enough `withinMs` from now. */
  usable(withinMs: number): number {
    const oldest = Date.now() + withinMs - TOKEN_MAX_AGE_MS;
    this.#compact();
    let count = 0;
    for (let index = this.#values.length - 1; index >= this.#head && this.#born[index]! >= oldest; index -= 1)
      count += 1;
    return count;
  }

  #compact(): void {
    if (this.#head < 10_000) return;
    this.#values = this.#values.slice(this.#head);
    this.#born = this.#born.slice(this.#head);
    this.#head = 0;
  }
}

/**
 * How many tokens one exchange run of `seconds` may redeem: 1.5x the best
 * exchange rate seen so far (before any, 1.5x the baseline's; before that, a
 * generous guess), plus a few per connection.
 */
export function tokensNeeded(
  rates: { bestExchange: number; baseline: number | undefined },
  seconds: number,
  connections: number,
): number {
  const rate = rates.bestExchange || (rates.baseline ? rates.baseline * 1.5 : 4000);
  return Math.ceil(rate * (seconds + 0.5) * 1.5) + connections * 4;
}
