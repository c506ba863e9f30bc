/**
 * What the resource-server helper costs per request, in this process:
 *
 *   node build/bench/resource-server.js [--count N] [--json]
 *
 * A provider with the plugin issues one impersonation JWT. Then, for N calls each:
 * - `jose` jwtVerify with the provider's JWKS as a local key set (what a resource
 *   server does without the helper: the comparison the targets use);
 * - the helper's verify(), with a fresh revocation feed, once while the feed lists
 *   no revoked session and once while it lists 1,000 (a Map lookup either way);
 * - the helper's verify() once the feed is stale: the fail-closed refusal.
 * The feed is read in the background; no request waits for it.
 */
import { createLocalJWKSet, jwtVerify } from 'jose';
import { createImpersonationVerifier, type ImpersonationVerifier } from '../lib/resource-server/index.js';
import { providerJwks } from '../lib/provider-internals.js';
import { exchange, m2mToken, subjectToken, userAccessToken } from '../fixtures/flows.js';
import {
  ACCESS_TOKEN,
  API,
  CLIENTS,
  READ_SCOPE,
  REVOKE_SCOPE,
  startProvider,
  type FixtureProvider,
} from '../fixtures/provider.js';

export interface VerifierResult {
  count: number;
  /** Microseconds per verification. */
  plainJose: number;
  helperFresh: number;
  helperFreshWithRevocations: number;
  helperStale: number;
  revokedListed: number;
}

async function perCall(count: number, call: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(2000, count); i += 1) await call();
  const started = performance.now();
  for (let i = 0; i < count; i += 1) await call();
  return ((performance.now() - started) * 1000) / count;
}

/** Sessions the feed lists as revoked while the second fresh measurement runs. */
const REVOKED_LISTED = 1000;

export async function measureVerifier(count: number): Promise<VerifierResult> {
  const tp = await startProvider();
  try {
    const issue = await impersonationIssuer(tp);
    const token = await issue();
    const keys = createLocalJWKSet(providerJwks(tp.provider) as never);
    const make = (maxStaleness: number): ImpersonationVerifier =>
      createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        jwks: keys,
        revocationsUri: `${tp.base}/api/impersonations/revocations`,
        refreshInterval: 200,
        maxStaleness,
      });

    const plainJose = await perCall(count, () =>
      jwtVerify(token, keys, { issuer: tp.issuer, audience: API, typ: 'at+jwt' }),
    );
    const fresh = make(60_000);
    await fresh.ready();
    const helperFresh = await perCall(count, () => fresh.verify(token));

    await revokeSessions(tp, issue, REVOKED_LISTED);
    await new Promise((resolve) => setTimeout(resolve, 500));
    if (fresh.state.revoked < REVOKED_LISTED) throw new Error(`the feed lists ${fresh.state.revoked} revoked sessions`);
    const helperFreshWithRevocations = await perCall(count, () => fresh.verify(token));
    fresh.close();

    const stale = await staleVerifier(make);
    const helperStale = await perCall(count, () => stale.verify(token).catch(() => undefined));
    return { count, plainJose, helperFresh, helperFreshWithRevocations, helperStale, revokedListed: REVOKED_LISTED };
  } finally {
    await tp.close();
  }
}

/** Issues impersonation JWTs for bob with alice as actor, each of a session of its own. */
async function impersonationIssuer(tp: FixtureProvider): Promise<() => Promise<string>> {
  const alice = await userAccessToken(tp, 'alice');
  return async () =>
    (
      await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        scope: 'profile:read',
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      })
    ).body['access_token'] as string;
}

/** `count` impersonation sessions issued and revoked, so that the revocation feed lists them. */
async function revokeSessions(tp: FixtureProvider, issue: () => Promise<string>, count: number): Promise<void> {
  const admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
  for (let i = 0; i < count; i += 1) {
    const other = await issue();
    const session = JSON.parse(Buffer.from(other.split('.')[1]!, 'base64url').toString())[
      'impersonation_session'
    ] as string;
    await fetch(`${tp.base}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    });
  }
}

/**
 * A verifier whose feed is stale: a read is abandoned after maxStaleness
 * (1 ms), so it is stale whether its first read completed or not.
 */
async function staleVerifier(make: (maxStaleness: number) => ImpersonationVerifier): Promise<ImpersonationVerifier> {
  const stale = make(1);
  await stale.ready().catch(() => undefined);
  stale.close();
  await new Promise((resolve) => setTimeout(resolve, 5));
  return stale;
}

export function describeVerifier(result: VerifierResult): string[] {
  const us = (value: number) => `${value.toFixed(1)} µs`;
  return [
    `resource-server helper, ${result.count.toLocaleString('en')} verifications each: plain jose jwtVerify ${us(result.plainJose)}; ` +
      `helper with a fresh feed ${us(result.helperFresh)} (${(result.plainJose / result.helperFresh).toFixed(2)}× jose's rate), ` +
      `with ${result.revokedListed.toLocaleString('en')} revoked sessions listed ${us(result.helperFreshWithRevocations)}; ` +
      `stale feed (refused, fail closed) ${us(result.helperStale)}`,
  ];
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const countIndex = process.argv.indexOf('--count');
  const count = countIndex > 0 ? Number(process.argv[countIndex + 1]) : 20_000;
  const result = await measureVerifier(count);
  if (process.argv.includes('--json')) console.log(JSON.stringify(result));
  else for (const line of describeVerifier(result)) console.log(line);
  process.exit(0);
}
