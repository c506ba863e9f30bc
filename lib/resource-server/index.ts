/** What a resource server imports: verifies the identity service's JWTs and refuses revoked impersonations (docs/resource-server.md); Invariant 53. */
import { setTimeout as sleep } from 'node:timers/promises';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
// The record module only: a resource server has no oidc-provider installed.
import { SESSION_CLAIM } from '../sessions/record.js';
import { tokenRefused, unavailable } from '../errors/standalone.js';
import { optionChecks } from '../config/checks.js';
import { feedSource } from './feed.js';
import type { RevocationSource } from './source.js';
import { POLL_OPTION_NAMES, secureUrl, ssfPollSource, type SsfPollOptions } from './ssf-poll.js';
import { PUSH_OPTION_NAMES, ssfPushSource, type PushAnswer, type PushSource, type SsfPushOptions } from './ssf-push.js';
import { clockSkewOf, type SsfReceiverOptions } from './set.js';

export { SESSION_CLAIM, type PushAnswer, type SsfPollOptions, type SsfPushOptions, type SsfReceiverOptions };

export interface ImpersonationVerifierOptions {
  /** The identity service's issuer (`iss`). */
  issuer: string;
  /** This resource server's identifier (`aud`). */
  audience: string | string[];
  /** The issuer's JWKS: a URL (cached by jose) or a key resolver. Default `${issuer}/jwks`. */
  jwks?: string | URL | JWTVerifyGetKey | undefined;
  /** The revocation feed (`{sessionsPath}/revocations`); give this or `ssf`, not both. */
  revocationsUri?: string | URL | undefined;
  /** An SSF stream to take revocations from instead: polled (RFC 8936) or pushed (RFC 8935, through `receivePush()`). */
  ssf?: SsfPollOptions | SsfPushOptions | undefined;
  /** How often the feed is read, ms. Default 500; with a pushed stream 30,000, at least `min_verification_interval`. */
  refreshInterval?: number | undefined;
  /** Impersonation tokens are refused when the last complete read began longer ago than this, ms. Default 5000 (push: 35,000). */
  maxStaleness?: number | undefined;
  /** Bound on one request of the feed (one page), milliseconds. Default 2000. */
  timeout?: number | undefined;
}

export { ImpersonationTokenError, type ImpersonationTokenErrorCode } from '../errors/standalone.js';

export interface VerifiedToken {
  payload: JWTPayload;
  /** `sub`: the customer, for an impersonation token. */
  subject: string;
  /** `act`: who is acting, when this is an impersonation token with an actor. */
  actor?: { sub: string; act?: unknown };
  /** The impersonation session, when this is an impersonation token. */
  sessionId?: string;
  scopes: ReadonlySet<string>;
}

export interface ImpersonationVerifier {
  verify(token: string): Promise<VerifiedToken>;
  /** Resolves once the feed was read (rejects when the first read fails); with SSF, once new tokens are sure to pass. */
  ready(): Promise<void>;
  /** Stops reading the feed. */
  close(): void;
  /** Takes one SET pushed to this server (RFC 8935): answer with the status and body it returns. Only with `delivery: 'push'`. */
  receivePush(request: { body: string; authorization?: string | undefined }): Promise<PushAnswer>;
  /** Revocations known, when the last complete read began, failures in a row, and whether impersonation tokens are refused (`stale`). */
  readonly state: { revoked: number; refreshedAt: number; failures: number; stale: boolean };
}

const check = optionChecks('createImpersonationVerifier');
const OPTION_NAMES = Object.keys({
  issuer: true,
  audience: true,
  jwks: true,
  revocationsUri: true,
  ssf: true,
  refreshInterval: true,
  maxStaleness: true,
  timeout: true,
} satisfies Record<keyof ImpersonationVerifierOptions, true>);

export function createImpersonationVerifier(options: ImpersonationVerifierOptions): ImpersonationVerifier {
  check.known(options, OPTION_NAMES);
  const push = options.ssf?.delivery === 'push';
  if (options.ssf) check.known(options.ssf, push ? PUSH_OPTION_NAMES : POLL_OPTION_NAMES, 'ssf.');
  const endpoint = push ? undefined : (options.ssf as SsfPollOptions | undefined)?.endpoint;
  if (endpoint !== undefined && typeof endpoint !== 'function' && !secureUrl(endpoint))
    check.fail('ssf.endpoint', 'must be an https URL (http only on a loopback host), or a function resolving one');
  const refreshInterval = check.positive('refreshInterval', options.refreshInterval ?? (push ? 30_000 : 500));
  const maxStaleness = check.positive('maxStaleness', options.maxStaleness ?? (push ? 35_000 : 5000));
  const timeout = check.positive('timeout', options.timeout ?? 2000);
  if (push && maxStaleness <= refreshInterval)
    check.fail('maxStaleness', 'must be more than "refreshInterval", which each verification waits');
  const keys =
    typeof options.jwks === 'function'
      ? options.jwks
      : createRemoteJWKSet(new URL(options.jwks ?? `${options.issuer.replace(/\/$/, '')}/jwks`));
  if ((options.revocationsUri === undefined) === (options.ssf === undefined))
    check.fail('revocationsUri', 'or "ssf" must be given, and only one of them');
  const trust = { issuer: options.issuer, keys };
  const expected = {
    issuer: options.issuer,
    audience: options.audience,
    typ: 'at+jwt',
    requiredClaims: ['sub', 'exp'],
  };
  const pushed: PushSource | undefined = push
    ? ssfPushSource(options.ssf as SsfPushOptions, trust, { timeout, maxStaleness, refreshInterval })
    : undefined;
  const source: RevocationSource =
    pushed ??
    (options.ssf === undefined
      ? feedSource(options.revocationsUri!, timeout)
      : ssfPollSource(options.ssf as SsfPollOptions, trust, timeout));

  /** When the last complete read began: `performance.now()` for the checks, the wall clock for `state`. */
  let freshSince = -Infinity;
  let refreshedAt = 0;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  const closing = new AbortController();

  async function readFeed(): Promise<void> {
    const startedAt = performance.now();
    const startedAtWall = Date.now();
    // Invariant 53: one deadline for every page of a read.
    const deadline = AbortSignal.timeout(maxStaleness);
    await source.read(AbortSignal.any([deadline, closing.signal])).catch((error: unknown) => {
      failures += 1;
      if (!deadline.aborted) throw error;
      throw unavailable(`a read of the revocations took longer than "maxStaleness" (${maxStaleness} ms)`, error);
    });
    failures = 0;
    freshSince = startedAt;
    refreshedAt = startedAtWall;
  }

  function schedule(): void {
    if (closing.signal.aborted) return;
    timer = setTimeout(() => void readFeed().then(schedule, schedule), refreshInterval);
    timer.unref();
  }

  /** Whether what is known of the revocations may miss one: too old, or holding one it could not read. */
  const stale = (): boolean => performance.now() - freshSince > maxStaleness || source.uncertain?.() === true;

  const first = readFeed().finally(schedule);
  // Until a token issued from now on, by a clock up to clockSkew behind, carries an `iat` past knowsSince.
  const ready = first.then(() => {
    const wait = ((source.knowsSince?.() ?? 0) + clockSkewOf(options.ssf)) * 1000 - Date.now();
    return wait > 0 ? sleep(wait, undefined, { signal: closing.signal }) : undefined;
  });
  ready.catch(() => {});

  return {
    async verify(token) {
      const { payload } = await jwtVerify(token, keys, expected).catch(() => {
        throw tokenRefused('invalid_token', 'the access token is invalid, expired or not for this resource');
      });
      const sessionId = payload[SESSION_CLAIM];
      if (sessionId !== undefined) {
        if (typeof sessionId !== 'string')
          throw tokenRefused('invalid_token', 'the impersonation session claim is malformed');
        // Checked against the read that last completed: one still in flight proves nothing yet.
        if (stale()) {
          throw tokenRefused(
            'revocations_unavailable',
            'revocations of impersonation sessions cannot be read; retry shortly',
          );
        }
        if (source.isRevoked(sessionId)) throw tokenRefused('session_revoked', 'this impersonation was stopped');
        const knowsSince = source.knowsSince?.();
        if (knowsSince !== undefined && (payload.iat === undefined || payload.iat < knowsSince)) {
          throw tokenRefused(
            'invalid_token',
            'this impersonation token predates the revocations this server knows of; obtain a new one',
          );
        }
      }
      const act = payload['act'] as { sub?: unknown } | undefined;
      const scope = payload['scope'];
      return {
        payload,
        subject: payload.sub!,
        ...(typeof act?.sub === 'string' ? { actor: act as { sub: string } } : {}),
        ...(typeof sessionId === 'string' ? { sessionId } : {}),
        scopes: new Set(typeof scope === 'string' ? scope.split(' ').filter(Boolean) : []),
      };
    },
    ready: () => ready,
    async receivePush(request) {
      if (pushed) return pushed.receive(request);
      return { status: 404, body: { err: 'invalid_request', description: 'this server takes no pushed SETs' } };
    },
    close() {
      clearTimeout(timer);
      closing.abort();
    },
    get state() {
      return { revoked: source.size(), refreshedAt, failures, stale: stale() };
    },
  };
}
