/**
 * The requests each scenario sends, as autocannon takes them, and the
 * credentials they carry.
 */
import {
  ACCESS_TOKEN,
  ACTOR_API,
  API,
  CLIENTS,
  DOWNSTREAM_API,
  TOKEN_EXCHANGE,
  type FixtureProvider,
} from '../fixtures/provider.js';
import { basic, m2mToken, userAccessToken } from '../fixtures/flows.js';
import type { RequestSpec } from './load.js';
import { MINIMAL_GRANT, MINIMAL_READS_GRANT, MINIMAL_SEED_PATH } from './minimal-grant.js';
import type { ScenarioName } from './scenarios.js';
import type { TokenPool } from './token-pool.js';

/** The support engineer whose tokens are the actor tokens. */
export const ACTOR = 'alice';

/**
 * The customers subject tokens are created for, in turn: a support team
 * impersonates many customers, not one, and a webhook subscription delivers
 * each customer's notifications in order, one at a time (one customer's
 * exchanges at bench rates would queue behind each other).
 */
const CUSTOMERS = 1000;
const CUSTOMER = /^customer-(\d+)$/;

/** Whether `sub` is one of the bench's customers (the provider's findAccount knows them: bench/server.ts). */
export function isCustomer(sub: string): boolean {
  const match = CUSTOMER.exec(sub);
  return match !== null && Number(match[1]) < CUSTOMERS;
}

/** Every customer the bench creates subject tokens for. */
export function customers(): string[] {
  return Array.from({ length: CUSTOMERS }, (_, index) => `customer-${index}`);
}

let nextCustomer = 0;
/**
 * What the backend sends to create a subject token, for the next customer;
 * `named` adds the actor (actorId) and the client that exchanges it
 * (clientId), which a customer's approval requires: the token then binds both.
 */
function subjectTokenBody(named: boolean): string {
  nextCustomer = (nextCustomer + 1) % CUSTOMERS;
  return JSON.stringify({
    userId: `customer-${nextCustomer}`,
    ...(named ? { actorId: ACTOR, clientId: CLIENTS.console.client_id } : {}),
    context: { ticketId: 'T-4711', reason: 'checkout fails' },
  });
}

export interface Credentials {
  /** alice's access token from a plain OpenID Connect login (opaque, bound to her session). */
  actorToken: string;
  /** alice's access token issued as a JWT for a resource (checked by signature, no store access). */
  jwtActorToken: string;
  /** bob's JWT access token for API, which the orders service exchanges for a delegated one. */
  delegationSubject: string;
  /** A fresh M2M token of the backend for the Management API (it lives 5 minutes: fetched per run). */
  m2m(): Promise<string>;
  /** The body of the next subject-token creation (creationRequest). */
  subjectTokenBody: () => string;
}

/**
 * Credentials obtained once through the real flows: checking the opaque actor
 * token reads the token and the session from the store; the JWT one is checked
 * by signature alone. `namedActor`: subject tokens name the actor (actorId)
 * and the client (clientId), as a provider requiring the customer's approval needs.
 */
export async function obtainCredentials(base: string, { namedActor = false } = {}): Promise<Credentials> {
  const tp = { base } as FixtureProvider;
  const actorToken = await userAccessToken(tp, ACTOR);
  const jwtActorToken = await userAccessToken(tp, ACTOR, { scope: 'openid profile:read', resource: ACTOR_API });
  const delegationSubject = await userAccessToken(tp, 'bob', { scope: 'openid profile:read', resource: API });
  return {
    actorToken,
    jwtActorToken,
    delegationSubject,
    m2m: () => m2mToken(tp),
    subjectTokenBody: () => subjectTokenBody(namedActor),
  };
}

function form(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}

// Exchanges need a new body for every request, so autocannon builds each one
// as it sends it (setupRequest). The other scenarios are built the same way,
// though their requests never change: autocannon would otherwise build them
// once and resend the bytes, and on a machine it shares with the provider the
// baseline would get CPU that the exchanges give to the load generator.
const rebuiltEachTime = (request: RequestSpec): RequestSpec => request;

export function baselineRequest(): RequestSpec {
  return {
    method: 'POST',
    path: '/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.noScopeBackend) },
    body: form({ grant_type: 'client_credentials', resource: API, scope: 'profile:read' }),
    setupRequest: rebuiltEachTime,
  };
}

/** A subject-token creation; each token created goes into `pool` (none without one). */
export function creationRequest(
  m2m: string,
  pool?: TokenPool,
  body: () => string = () => subjectTokenBody(false),
): RequestSpec {
  return {
    method: 'POST',
    path: '/api/subject-tokens',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${m2m}` },
    setupRequest(request) {
      request.body = body();
      return request;
    },
    ...(pool && {
      onResponse(status: number, body: string) {
        if (status === 201) pool.add((JSON.parse(body) as { subjectToken: string }).subjectToken);
      },
    }),
  };
}

/** A creation of a subject token of the minimal grant (bench/minimal-grant.ts), bound to the actor and the console. */
export function minimalSeedRequest(pool: TokenPool): RequestSpec {
  const request = creationRequest('', pool, () => subjectTokenBody(true));
  return { ...request, path: MINIMAL_SEED_PATH, headers: { 'content-type': 'application/json' } };
}

/**
 * A token exchange redeeming the next token of `pool`, with `actor` as actor token when given;
 * with `grantType`, the same request to another grant (the minimal grant's, bench/minimal-grant.ts).
 */
export function exchangeRequest(actor: string | undefined, pool: TokenPool, grantType = TOKEN_EXCHANGE): RequestSpec {
  const fixed = form({
    grant_type: grantType,
    client_id: CLIENTS.console.client_id,
    subject_token_type: ACCESS_TOKEN,
    resource: API,
    scope: 'profile:read',
    ...(actor ? { actor_token: actor, actor_token_type: ACCESS_TOKEN } : {}),
  });
  return {
    method: 'POST',
    path: '/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    setupRequest(request) {
      // Subject tokens are base64url: nothing to escape.
      request.body = `${fixed}&subject_token=${pool.takeOrPlaceholder()}`;
      return request;
    },
  };
}

/**
 * A delegation: the orders service exchanges the same user's token for one for
 * DOWNSTREAM_API, naming itself in `act`. Nothing is redeemed, so the request
 * never changes; the first lists a session, and each one after it is issued a
 * token under that session (a read of its index and record, no write).
 */
export function delegationRequest(subjectToken: string): RequestSpec {
  return {
    method: 'POST',
    path: '/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.orders) },
    body: form({
      grant_type: TOKEN_EXCHANGE,
      subject_token_type: ACCESS_TOKEN,
      subject_token: subjectToken,
      resource: DOWNSTREAM_API,
      scope: 'profile:read',
    }),
    setupRequest: rebuiltEachTime,
  };
}

export async function requestsFor(
  scenario: ScenarioName,
  credentials: Credentials,
  pool: TokenPool,
): Promise<RequestSpec[]> {
  switch (scenario) {
    case 'baseline':
      return [baselineRequest()];
    case 'create':
      return [creationRequest(await credentials.m2m(), pool, credentials.subjectTokenBody)];
    case 'exchange':
      return [exchangeRequest(undefined, pool)];
    case 'exchange-actor':
      return [exchangeRequest(credentials.actorToken, pool)];
    case 'exchange-actor-jwt':
      return [exchangeRequest(credentials.jwtActorToken, pool)];
    case 'delegation':
      return [delegationRequest(credentials.delegationSubject)];
    case 'exchange-minimal':
      return [exchangeRequest(credentials.actorToken, pool, MINIMAL_GRANT)];
    case 'exchange-minimal-reads':
      return [exchangeRequest(credentials.actorToken, pool, MINIMAL_READS_GRANT)];
  }
}
