/**
 * Sign-ins that a server-side client of the demo started and that have not
 * come back yet: the PKCE verifier of each, under its `state`. Anyone can
 * start one without credentials, so the store is bounded, and it never makes
 * room by forgetting a sign-in in flight: that would let anyone cancel other
 * people's sign-ins by starting enough of their own. When it is full, a new
 * sign-in is refused (503) until the oldest expire.
 */
import { createHash, randomBytes } from 'node:crypto';
import { HttpError } from './http.js';

export interface PendingSignInLimits {
  /** Sign-ins in flight at once. Default 10,000. */
  max?: number;
  /** How long a started sign-in may take to come back, milliseconds. Default 10 minutes. */
  ttl?: number;
}

export interface StartedSignIn {
  state: string;
  /** The PKCE `code_challenge` (S256) of the verifier kept here. */
  codeChallenge: string;
}

export class PendingSignIns {
  readonly max: number;
  readonly ttl: number;
  /** In the order started; every entry lives as long, so this is also the order they expire in. */
  readonly #entries = new Map<string, { verifier: string; expires: number }>();

  constructor(limits: PendingSignInLimits = {}) {
    this.max = limits.max ?? 10_000;
    this.ttl = limits.ttl ?? 10 * 60_000;
    if (!Number.isSafeInteger(this.max) || this.max < 1) throw new TypeError('max must be a positive integer');
    if (!Number.isSafeInteger(this.ttl) || this.ttl < 1) throw new TypeError('ttl must be a positive integer');
  }

  /** Sign-ins in flight now. */
  get size(): number {
    this.#sweep(performance.now());
    return this.#entries.size;
  }

  /** Keeps a fresh verifier under a fresh state; 503 `temporarily_unavailable` when full. */
  start(): StartedSignIn {
    const now = performance.now();
    this.#sweep(now);
    if (this.#entries.size >= this.max) {
      throw new HttpError(
        503,
        'temporarily_unavailable',
        'too many sign-ins are in progress; try again in a few minutes',
      );
    }
    const state = randomBytes(16).toString('base64url');
    const verifier = randomBytes(32).toString('base64url');
    this.#entries.set(state, { verifier, expires: now + this.ttl });
    return { state, codeChallenge: createHash('sha256').update(verifier).digest('base64url') };
  }

  /** The verifier of the sign-in started with `state`, once: it is forgotten here. */
  take(state: string): string | undefined {
    const entry = this.#entries.get(state);
    this.#entries.delete(state);
    return entry && entry.expires > performance.now() ? entry.verifier : undefined;
  }

  #sweep(now: number): void {
    for (const [state, entry] of this.#entries) {
      if (entry.expires > now) return;
      this.#entries.delete(state);
    }
  }
}
