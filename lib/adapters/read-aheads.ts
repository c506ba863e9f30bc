/** Invariant 52: what a readAhead read, for the finds of its turn; each answer taken once per readAhead that left it. */
export class ReadAheads<Answer> {
  readonly #left = new Map<string, { answer: Answer; finds: number }>();
  /** Writes a later find must see (`forget()`): a read asked before the last one leaves nothing. */
  forgotten = 0;

  leave(key: string, answer: Answer, asked: number): void {
    if (asked !== this.forgotten) return;
    if (!this.#left.size) setImmediate(() => this.#left.clear());
    this.#left.set(key, { answer, finds: (this.#left.get(key)?.finds ?? 0) + 1 });
  }

  take(key: string): { answer: Answer } | undefined {
    const left = this.#left.get(key);
    if (left && --left.finds === 0) this.#left.delete(key);
    return left;
  }

  forget(): void {
    this.forgotten += 1;
    this.#left.clear();
  }
}
