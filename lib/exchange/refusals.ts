/**
 * Which refused exchanges reach the durable trail. Anyone who can reach the
 * token endpoint can be refused, as often as they like, so a trail that
 * recorded every refusal would be filled (and, bounded, closed to every
 * impersonation) by anonymous traffic. Only refusals of a subject token that
 * exists are written: each one names a token that an authenticated
 * Management API caller created. Of those, the first few per token and per
 * instance are written and the rest reach listeners only, so that what one
 * caller can make the trail hold is bounded by what was created.
 */

/** Refusal rows one instance writes for one subject token. */
export const REFUSALS_RECORDED_PER_SUBJECT_TOKEN = 3;

/** Subject tokens whose refusals one instance counts at once. */
const MAX_TOKENS_COUNTED = 100_000;

export class RefusalBudget {
  readonly #counted = new Map<string, { left: number; until: number }>();
  readonly #perToken: number;
  readonly #maxTokens: number;

  constructor(perToken = REFUSALS_RECORDED_PER_SUBJECT_TOKEN, maxTokens = MAX_TOKENS_COUNTED) {
    this.#perToken = perToken;
    this.#maxTokens = maxTokens;
  }

  /**
   * True while this subject token's refusals may still be written; `until`
   * (ms) is when its record leaves the store, after which it is unknown and
   * its refusals are no longer written at all.
   */
  take(subjectTokenId: string, until: number, now = Date.now()): boolean {
    let entry = this.#counted.get(subjectTokenId);
    if (entry === undefined || entry.until <= now) {
      if (entry === undefined && this.#counted.size >= this.#maxTokens) this.#sweep(now);
      // Still full: as many live subject tokens as the bound were refused here. Recording
      // stops rather than forgetting what was counted, which would let a caller start over.
      if (entry === undefined && this.#counted.size >= this.#maxTokens) return false;
      entry = { left: this.#perToken, until };
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
