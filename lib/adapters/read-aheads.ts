/** Invariant 52: what a readAhead read, for the finds of the same turn; each answer taken once per readAhead that left it. */
export class ReadAheads<Answer> {
  readonly #left = new Map<string, { answer: Answer; finds: number }>();
  #forgotten = 0;

  /** How many times a write made what was read stale: a read asked before the last one leaves nothing. */
  get forgotten(): number {
    return this.#forgotten;
  }

  /** Leaves `answer` for a find of `key` in this turn, unless what was read went stale since `asked` (`forgotten` then). */
  leave(key: string, answer: Answer, asked: number): void {
    if (asked !== this.#forgotten) return;
    if (!this.#left.size) setImmediate(() => this.#left.clear());
    this.#left.set(key, { answer, finds: (this.#left.get(key)?.finds ?? 0) + 1 });
  }

  /** The answer left under `key`, taken; `undefined` when none is. */
  take(key: string): { answer: Answer } | undefined {
    const left = this.#left.get(key);
    if (left && --left.finds === 0) this.#left.delete(key);
    return left;
  }

  /** A write answered or sent that a later find must see: nothing read before it is handed out. */
  forget(): void {
    this.#forgotten += 1;
    this.#left.clear();
  }
}
