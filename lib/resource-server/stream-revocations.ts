import type { JWTPayload } from 'jose';
import { revokedSessionOf, type SsfReceiverOptions } from './set.js';
import type { RevocationSource } from './source.js';

/** What an SSF stream told a resource server: sessions revoked (each kept `retention` seconds) and `knowsSince`. */
export class StreamRevocations {
  readonly #until = new Map<string, number>();
  readonly #retentionMs: number;
  knowsSince: number | undefined;

  constructor(options: Pick<SsfReceiverOptions, 'retention'>) {
    this.#retentionMs = (options.retention ?? 86_400) * 1000;
  }

  /** Takes a verified SET in: remembers the session it revokes, if it revokes one. */
  take(payload: JWTPayload): void {
    const sessionId = revokedSessionOf(payload);
    if (sessionId !== undefined) this.#until.set(sessionId, Date.now() + this.#retentionMs);
  }

  /** Forgets the revocations past their retention. */
  forgetBefore(now: number): void {
    for (const [id, until] of this.#until) if (until < now) this.#until.delete(id);
  }

  /** The stream as a verifier reads it; `read` and `uncertain` are the delivery's own. */
  source(read: RevocationSource['read'], uncertain: () => boolean): RevocationSource {
    return {
      read,
      uncertain,
      isRevoked: (sessionId) => this.#until.has(sessionId),
      size: () => this.#until.size,
      knowsSince: () => this.knowsSince,
    };
  }
}
