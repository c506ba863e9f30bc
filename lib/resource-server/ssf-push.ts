import { randomUUID, timingSafeEqual } from 'node:crypto';
import { decodeJwt, type JWTVerifyGetKey } from 'jose';
import { invalidCall, invalidOption, unavailable } from '../errors/standalone.js';
import { PUSH_METHOD, SESSION_REVOKED_EVENT, VERIFICATION_EVENT } from '../ssf/names.js';
import { clockSkewOf, RECEIVER_OPTIONS, receiverRequest, verifySet, type SsfReceiverOptions } from './set.js';
import type { RevocationSource } from './source.js';
import { StreamRevocations } from './stream-revocations.js';

export interface SsfPushOptions extends SsfReceiverOptions {
  /** This stream is pushed to the resource server (RFC 8935), which hands each request to `receivePush()`. */
  delivery: 'push';
  /** The URL of this server's route that hands pushes to `receivePush()`; one stream per endpoint across restarts. */
  endpointUrl: string | URL;
  /** The transmitter's `configuration_endpoint` (its stream API), as its metadata shows it. */
  configurationEndpoint: string | URL;
  /** The transmitter's `verification_endpoint`, as its metadata shows it. */
  verificationEndpoint: string | URL;
  /** The `Authorization` header every push must carry (the stream's `authorization_header`); without it, 401. */
  authorization: string;
}

export const PUSH_OPTION_NAMES = Object.keys({
  ...RECEIVER_OPTIONS,
  delivery: true,
  endpointUrl: true,
  configurationEndpoint: true,
  verificationEndpoint: true,
  authorization: true,
} satisfies Record<keyof SsfPushOptions, true>);

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

/** Revocations from an SSF stream pushed to the resource server (RFC 8935); Invariants 54, 55, 56. */
export function ssfPushSource(
  options: SsfPushOptions,
  trust: { issuer: string; keys: JWTVerifyGetKey },
  { timeout, maxStaleness, refreshInterval }: { timeout: number; maxStaleness: number; refreshInterval: number },
): PushSource {
  if (typeof options.authorization !== 'string' || !options.authorization) {
    throw invalidOption(
      'createImpersonationVerifier',
      'ssf.authorization',
      'must be the Authorization header the transmitter pushes with: without it, anyone who reaches the push route could hold impersonation tokens refused',
    );
  }
  const endpointUrl = new URL(options.endpointUrl).href;
  const configurationEndpoint = new URL(options.configurationEndpoint);
  const verificationEndpoint = new URL(options.verificationEndpoint);
  const clockSkew = clockSkewOf(options);
  const expected = Buffer.from(options.authorization);
  const revocations = new StreamRevocations(options);
  /** The `state`s of verifications asked for and not seen yet, each with what to call when its SET arrives. */
  const waiting = new Map<string, () => void>();
  /** SETs answered 503, each with when it first was: their revocation is unknown until they come again. */
  const awaited = new Map<string, number>();
  /** When the last read that completed began (ms since the epoch). */
  let freshSince: number | undefined;
  let streamId: string | undefined;

  /** A SET awaited longer than `maxStaleness` may have been given up on: tokens issued before now are refused. */
  function uncertain(): boolean {
    const now = Date.now();
    for (const [jti, since] of awaited) {
      if (now - since <= maxStaleness) break;
      awaited.delete(jti);
      revocations.knowsSince = Math.floor(now / 1000) + clockSkew;
    }
    return awaited.size > 0;
  }

  /** A call of the transmitter's stream API, as this stream's receiver. */
  async function streamApi(method: string, url: URL, body: unknown, signal: AbortSignal): Promise<unknown> {
    const response = await receiverRequest(options, { method, url, body, signal, timeout });
    if (!response.ok) {
      // The transmitter's own words (a push URL it refuses, a bound): never a value of the request.
      const { error_description: why } = (await response.json().catch(() => ({}))) as { error_description?: unknown };
      const said = typeof why === 'string' ? `: ${why.slice(0, 300)}` : '';
      throw unavailable(`the SSF transmitter answered ${response.status} to ${method} ${url.pathname}${said}`);
    }
    return response.status === 204 ? undefined : response.json();
  }

  /** The stream pushed to `endpointUrl`, created anew (an earlier one deleted): restarts never pile streams up. */
  async function createStream(signal: AbortSignal): Promise<string> {
    const listed = await streamApi('GET', configurationEndpoint, undefined, signal);
    for (const stream of Array.isArray(listed) ? (listed as StreamView[]) : []) {
      if (stream.delivery?.method !== PUSH_METHOD || stream.delivery.endpoint_url !== endpointUrl) continue;
      const url = new URL(configurationEndpoint);
      url.searchParams.set('stream_id', String(stream.stream_id));
      await streamApi('DELETE', url, undefined, signal);
    }
    const requested = {
      delivery: { method: PUSH_METHOD, endpoint_url: endpointUrl, authorization_header: options.authorization },
      events_requested: [SESSION_REVOKED_EVENT],
    };
    const created = (await streamApi('POST', configurationEndpoint, requested, signal)) as StreamView;
    if (typeof created.stream_id !== 'string') throw unavailable('the SSF transmitter sent no stream_id');
    const interval = Number(created.min_verification_interval ?? 0) * 1000;
    if (!(refreshInterval >= interval)) {
      throw invalidCall(
        'createImpersonationVerifier',
        `the SSF stream takes a verification at most every ${created.min_verification_interval} s (its min_verification_interval), ` +
          `and each read asks for one: set option "refreshInterval" to at least ${interval} (and "maxStaleness" above it), ` +
          'or lower the transmitter\'s "ssf.minVerificationInterval"',
      );
    }
    return created.stream_id;
  }

  async function receive({ body, authorization }: Parameters<PushSource['receive']>[0]): Promise<PushAnswer> {
    const given = Buffer.from(authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { status: 401, body: { err: 'authentication_failed', description: 'the push is not authorized' } };
    const verified = await verifySet(body, trust, options.audience);
    if (!verified.payload) {
      if (verified.error !== undefined)
        return { status: 400, body: { err: verified.error, description: 'the SET could not be verified' } };
      const jti = jtiOf(body);
      if (jti === undefined) return { status: 400, body: { err: 'invalid_request', description: 'no jti' } };
      if (!awaited.has(jti) && awaited.size < MAX_AWAITED) awaited.set(jti, Date.now());
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
    streamId ??= await createStream(signal);
    // After the stream exists: a stop the transmitter sent to the streams it listed before is not this one's.
    const startedAt = Date.now();
    const state = randomUUID();
    const arrived = new Promise<void>((resolve, reject) => {
      const timedOut = () => reject(unavailable('no verification SET arrived in time'));
      waiting.set(state, resolve);
      signal.addEventListener('abort', timedOut, { once: true });
    });
    arrived.catch(() => {});
    try {
      await streamApi('POST', verificationEndpoint, { stream_id: streamId, state }, signal);
      await arrived;
    } finally {
      waiting.delete(state);
    }
    revocations.forgetBefore(Date.now());
    // Invariant 56: after a gap, nothing before the read is known.
    if (freshSince === undefined || startedAt - freshSince > maxStaleness)
      revocations.knowsSince = Math.floor(startedAt / 1000) + clockSkew;
    freshSince = startedAt;
  }

  return Object.assign(revocations.source(read, uncertain), { receive });
}

/** What this helper reads of a stream's configuration (SSF 1.0 8.1.1). */
interface StreamView {
  stream_id?: unknown;
  delivery?: { method?: unknown; endpoint_url?: unknown };
  min_verification_interval?: unknown;
}

function jtiOf(jwt: string): string | undefined {
  try {
    const jti = decodeJwt(jwt).jti;
    return typeof jti === 'string' && jti.length <= 256 ? jti : undefined;
  } catch {
    return undefined;
  }
}
