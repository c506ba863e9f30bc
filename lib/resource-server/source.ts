/**
 * Where a verifier learns which impersonation sessions were stopped: the
 * identity service's revocation feed, or an SSF stream. A read resolves once
 * it knows every revocation made before it began (the feed: a snapshot; an
 * SSF poll: the stream drained), and rejects when it cannot, which is what
 * makes the verifier refuse impersonation tokens once reads fail for longer
 * than `maxStaleness`.
 */
export interface RevocationSource {
  read(signal: AbortSignal): Promise<void>;
  isRevoked(sessionId: string): boolean;
  readonly size: number;
  /**
   * Impersonation tokens issued before this (seconds since the epoch) are
   * refused: the source cannot know of their revocations. Undefined when it
   * can (the feed is a snapshot of every revocation still in force).
   */
  readonly knowsSince?: number | undefined;
  /**
   * True while the source holds a revocation it could not read yet (an SSF
   * SET it could not verify for a reason that may pass): impersonation tokens
   * are refused, however recent the last complete read, until it can.
   */
  readonly uncertain?: boolean | undefined;
}

/** A page request with the verifier's bounds: the whole read's deadline, one request's timeout, closing. */
export function requestSignal(read: AbortSignal, timeout: number): AbortSignal {
  return AbortSignal.any([read, AbortSignal.timeout(timeout)]);
}
