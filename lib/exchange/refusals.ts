// Invariant 25: refusals on the trail are bounded.

/** Refusal rows one instance writes for one subject token. */
export const REFUSALS_RECORDED_PER_SUBJECT_TOKEN = 3;

/** Subject tokens whose refusals one instance counts at once. */
const MAX_TOKENS_COUNTED = 100_000;

export class RefusalBudget {
  readonly #counted = new Map<string, { left: number; until: number }>();

  /** Whether this subject token's refusals may still be written; `until` (ms) is when its record leaves the store. */
  take(subjectTokenId: string, until: number, now = Date.now()): boolean {
    let entry = this.#counted.get(subjectTokenId);
    if (entry === undefined || entry.until <= now) {
      if (entry === undefined && this.#counted.size >= MAX_TOKENS_COUNTED) this.#sweep(now);
      // Full: stop recording rather than forget a count, which would let a caller start over.
      if (entry === undefined && this.#counted.size >= MAX_TOKENS_COUNTED) return false;
      entry = { left: REFUSALS_RECORDED_PER_SUBJECT_TOKEN, until };
      this.#counted.set(subjectTokenId, entry);
    }
    if (entry.left === 0) return false;
    entry.left -= 1;
    return true;
  }

  #sweep(now: number): void {
    for (const [id, entry] of this.#counted) if (entry.until <= now) this.#counted.delete(id);
  }
}
