/** Values by key, LRU, at most `max`, each until its expiry by Date.now(); allocates only for what it holds. */
export class Expiring<V> {
  readonly #held = new Map<string, { value: V; expiresAt: number; placed: number }>();
  #placements = 0;

  /** `dropped` hears of every value that leaves; `evicted` when the bound pushed it out. */
  constructor(
    readonly max: number,
    private readonly dropped?: (value: V, key: string, evicted: boolean) => void,
  ) {}

  get size(): number {
    return this.#held.size;
  }

  /** The live value of `key`; a read moves it last once over max / 2 values were placed since (it outlives max / 2 more), unless `touch` is false. */
  get(key: string, touch = this.max < Infinity): V | undefined {
    const held = this.#held.get(key);
    if (!held) return undefined;
    if (held.expiresAt <= Date.now()) {
      this.delete(key);
      return undefined;
    }
    if (touch && this.#placements - held.placed > this.max / 2) {
      this.#held.delete(key);
      held.placed = ++this.#placements;
      this.#held.set(key, held);
    }
    return held.value;
  }

  /** When `key` expires (Infinity: never), expired or not; undefined when it is not held. */
  expiresAt(key: string): number | undefined {
    return this.#held.get(key)?.expiresAt;
  }

  /** Holds `value` for `ttl` ms (forever without), pushing out the least recently used beyond `max`. */
  set(key: string, value: V, ttl?: number): void {
    const held = this.#held.get(key);
    if (held) this.dropped?.(held.value, key, false);
    // V8 finds a key deleted and added again only past every earlier copy: an unbounded one overwrites in place.
    if (held && this.max < Infinity) this.#held.delete(key);
    this.#held.set(key, {
      value,
      expiresAt: ttl === undefined ? Infinity : Date.now() + ttl,
      placed: ++this.#placements,
    });
    while (this.#held.size > this.max) {
      const [oldest, { value: pushed }] = this.#held.entries().next().value!;
      this.#held.delete(oldest);
      this.dropped?.(pushed, oldest, true);
    }
  }

  delete(key: string): void {
    const held = this.#held.get(key);
    if (!held) return;
    this.#held.delete(key);
    this.dropped?.(held.value, key, false);
  }

  /** Drops every expired value. */
  purge(): void {
    const now = Date.now();
    for (const [key, { expiresAt }] of this.#held) if (expiresAt <= now) this.delete(key);
  }

  clear(): void {
    for (const key of this.#held.keys()) this.delete(key);
  }
}
