/** Where a verifier learns of stopped sessions; a read resolves once it knows every revocation before it began (Invariant 53). */
export interface RevocationSource {
  read(signal: AbortSignal): Promise<void>;
  isRevoked(sessionId: string): boolean;
  size(): number;
  /** Impersonation tokens issued before this (epoch seconds) are refused: their revocations are unknowable. */
  knowsSince?(): number | undefined;
  /** True while holding a revocation not yet readable: impersonation tokens are refused (Invariant 54). */
  uncertain?(): boolean;
}

/** A page request with the verifier's bounds: the whole read's deadline, one request's timeout, closing. */
export function requestSignal(read: AbortSignal, timeout: number): AbortSignal {
  return AbortSignal.any([read, AbortSignal.timeout(timeout)]);
}
