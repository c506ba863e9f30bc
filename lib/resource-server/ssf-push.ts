import { randomUUID, timingSafeEqual } from 'node:crypto';
import { decodeJwt, type JWTVerifyGetKey } from 'jose';
import { unavailable } from '../errors/standalone.js';
import { VERIFICATION_EVENT } from '../ssf/names.js';
import { verifySet, type SsfReceiverOptions } from './set.js';
import { requestSignal, type RevocationSource } from './source.js';
import { StreamRevocations } from './stream-revocations.js';

export interface SsfPushOptions extends SsfReceiverOptions {
  /** This stream is pushed to the resource server (RFC 8935), which hands each request to `receivePush()`. */
  delivery: 'push';
  /** The stream's id, as its configuration shows it. */
  streamId: string;
  /** The transmitter's `verification_endpoint`, as its metadata shows it. */
  verificationEndpoint: string | URL;
  /**
   * The `Authorization` header the pushes carry: the `authorization_header`
   * the stream was created with. A push without it is refused (401). Default:
   * none checked (the endpoint is reachable by the transmitter only).
   */
  authorization?: string | undefined;
}

/** What `receivePush()` answers the transmitter (RFC 8935 2.2, 2.3). */
export interface PushAnswer {
  status: 202 | 400 | 401 | 404 | 503;
  body?: { err: string; description: string };
}

/** A push source: a RevocationSource that also takes the SETs pushed to it. */
export interface PushSource extends RevocationSource {
  receive(request: { body: string; authorization?: string | undefined }): Promise<PushAnswer>;
}

/** The most SETs told "retry" (503) whose retry is awaited: past it the source stays uncertain until one comes. */
const MAX_AWAITED = 1000;

/**
 * Revocations from an SSF stream pushed to the resource server (RFC 8935).
 * SSF has no heartbeat: a quiet stream and a broken one look the same. So
 * every read asks the transmitter for a verification SET (SSF 1.0 8.1.4.2)
 * with a fresh `state`, and completes when that SET arrives, verified: the
 * stream then delivered what was queued before it, and the read's start is
 * what the verifier's `maxStaleness` counts from. No verified SET within
 * `maxStaleness` means stale, and impersonation tokens are refused (fail
 * closed). A pushed SET that cannot be verified for now (the keys
 * unavailable) is answered 503, so that the transmitter pushes it again, and
 * until it comes back verified the source is `uncertain`.
 *
 * The transmitter sends a stream's SETs in order, each after the one before
 * was delivered or given up on: a verification SET arrives behind every SET
 * queued before it. One given up on (the endpoint unreachable through every
 * retry) is lost, and only a gap in the heartbeat longer than `maxStaleness`
 * can hide it: after such a gap, impersonation tokens issued before the read
 * that ended it are refused (`knowsSince`), as after a restart.
 */
export function ssfPushSource(
  options: SsfPushOptions,
  trust: { issuer: string; keys: JWTVerifyGetKey },
  bounds: { timeout: number; maxStaleness: number },
): PushSource {
  const { timeout, maxStaleness } = bounds;
  const verificationEndpoint = new URL(options.verificationEndpoint);
  const clockSkew = options.clockSkew ?? 5;
  const expected = options.authorization === undefined ? undefined : Buffer.from(options.authorization);
  const revocations = new StreamRevocations(options);
  /** The `state`s of verifications asked for and not seen yet, each with what to call when its SET arrives. */
  const waiting = new Map<string, () => void>();
  /** SETs answered 503: their revocation is unknown until they come again. */
  const awaited = new Set<string>();
  /** When the last read that completed began (ms since the epoch). */
  let freshSince: number | undefined;

  async function token(): Promise<string> {
    return typeof options.accessToken === 'function' ? options.accessToken() : options.accessToken;
  }

  function authorized(header: string | undefined): boolean {
    if (expected === undefined) return true;
    const given = Buffer.from(header ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  async function receive({ body, authorization }: Parameters<PushSource['receive']>[0]): Promise<PushAnswer> {
    if (!authorized(authorization)) {
      return { status: 401, body: { err: 'authentication_failed', description: 'the push is not authorized' } };
    }
    const verified = await verifySet(body, trust, options.audience);
    if (!verified.payload) {
      if (verified.error !== undefined) {
        return { status: 400, body: { err: verified.error, description: 'the SET could not be verified' } };
      }
      const jti = jtiOf(body);
      if (jti !== undefined && awaited.size < MAX_AWAITED) awaited.add(jti);
      else if (jti === undefined) return { status: 400, body: { err: 'invalid_request', description: 'no jti' } };
      return { status: 503 };
    }
    const payload = verified.payload;
    if (typeof payload.jti === 'string') awaited.delete(payload.jti);
    revocations.take(payload);
    const events = payload['events'] as Record<string, unknown> | undefined;
    const state = (events?.[VERIFICATION_EVENT] as { state?: unknown } | undefined)?.state;
    if (typeof state === 'string') waiting.get(state)?.();
    return { status: 202 };
  }

  async function read(signal: AbortSignal): Promise<void> {
    const startedAt = Date.now();
    const state = randomUUID();
    const arrived = new Promise<void>((resolve, reject) => {
      waiting.set(state, resolve);
      signal.addEventListener('abort', () => reject(unavailable('no verification SET arrived in time')), {
        once: true,
      });
    });
    arrived.catch(() => {});
    try {
      const response = await fetch(verificationEndpoint, {
        method: 'POST',
        headers: { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' },
        body: JSON.stringify({ stream_id: options.streamId, state }),
        signal: requestSignal(signal, timeout),
      });
      if (response.status !== 204) {
        throw unavailable(`the SSF verification endpoint answered ${response.status}`);
      }
      await arrived;
    } finally {
      waiting.delete(state);
    }
    revocations.forgetBefore(Date.now());
    // The first read, or the first after a gap that may hide a SET given up on: nothing before it is known.
    if (freshSince === undefined || startedAt - freshSince > maxStaleness) {
      revocations.knowsSince = Math.floor(startedAt / 1000) + clockSkew;
    }
    freshSince = startedAt;
  }

  return Object.assign(
    revocations.source(read, () => awaited.size > 0),
    { receive },
  );
}

function jtiOf(jwt: string): string | undefined {
  try {
    const jti = decodeJwt(jwt).jti;
    return typeof jti === 'string' && jti.length <= 256 ? jti : undefined;
  } catch {
    return undefined;
  }
}
