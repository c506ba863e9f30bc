import { expect } from 'chai';
import { EVENTS } from '../../lib/index.js';
import { API, CLIENTS, OPAQUE_API, READ_SCOPE, REVOKE_SCOPE, type TestProvider } from './provider.js';
import {
  ACCESS_TOKEN,
  apiRequest,
  decodeJwt,
  exchange,
  introspect,
  m2mToken,
  subjectToken,
  userAccessToken,
  type Reply,
} from './http.js';

/** The Management API's sessions, under the provider's base URL. */
export const SESSIONS = '/api/impersonations';

/** A token of the support team's administration that may list and stop impersonations. */
export function adminToken(tp: TestProvider): Promise<string> {
  return m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
}

export interface ActorExchange {
  /** The subject token to redeem. */
  subjectToken: string;
  /** The support engineer's access token, sent as actor_token. */
  actorToken: string;
  /** Default: API (JWT access tokens). */
  resource?: string;
  /** Default: none, i.e. what the resource server grants by default. */
  scope?: string;
}

/** A token exchange by the support console with an actor token; the reply as it comes, whatever its status. */
export function exchangeAsActor(tp: TestProvider, request: ActorExchange): Promise<Reply> {
  return exchange(tp, {
    subject_token: request.subjectToken,
    resource: request.resource ?? API,
    ...(request.scope === undefined ? {} : { scope: request.scope }),
    actor_token: request.actorToken,
    actor_token_type: ACCESS_TOKEN,
  });
}

export interface ImpersonationRequest {
  /** The support engineer's access token. */
  actorToken: string;
  /** Default: API (JWT access tokens); OPAQUE_API's tokens are introspected to find their session. */
  resource?: string;
  scope?: string;
  /** The body the backend sends for the subject token; default subjectToken()'s, `{ userId: 'bob' }`. */
  subject?: Record<string, unknown>;
}

export interface Impersonation {
  /** The impersonation access token. */
  token: string;
  /** Its session id, from the JWT or from introspection. */
  session: string;
  reply: Reply;
}

/** A whole impersonation: a new subject token, exchanged with an actor token; asserts it succeeded. */
export async function impersonate(tp: TestProvider, request: ImpersonationRequest): Promise<Impersonation> {
  const reply = await exchangeAsActor(tp, {
    subjectToken: await subjectToken(tp, request.subject),
    actorToken: request.actorToken,
    ...(request.resource === undefined ? {} : { resource: request.resource }),
    ...(request.scope === undefined ? {} : { scope: request.scope }),
  });
  expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
  const token = reply.body['access_token'] as string;
  const session =
    request.resource === OPAQUE_API
      ? ((await introspect(tp, token))['impersonation_session'] as string)
      : (decodeJwt(token)['impersonation_session'] as string);
  return { token, session, reply };
}

/** DELETE of a session by `token`'s client, with a `{ reason }` body when given; the reply as it comes. */
export function revokeSession(tp: TestProvider, token: string, session: string, body?: unknown): Promise<Reply> {
  return apiRequest(tp, 'DELETE', `${SESSIONS}/${session}`, token, body);
}

/**
 * What a deployment's trail holds after a working day, for the audit logs'
 * own tests: four subject tokens created for bob, three exchanged with
 * alice as actor (JWT, opaque, JWT), one refused for an unknown resource
 * (recorded: the token exists), and the first of bob's
 * listed sessions revoked.
 */
export async function runFullFlow(tp: TestProvider): Promise<void> {
  const alice = await userAccessToken(tp, 'alice');
  for (const resource of [API, OPAQUE_API, API]) {
    const result = await exchangeAsActor(tp, {
      subjectToken: await subjectToken(tp, { userId: 'bob', context: { ticketId: 'T-1', reason: 'invoices' } }),
      actorToken: alice,
      resource,
    });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
  }
  // A refusal of a subject token that exists is recorded (an unknown one's is not: see trail-flood.test.ts).
  const refused = await exchange(tp, {
    subject_token: await subjectToken(tp),
    resource: 'https://unknown.example.com',
  });
  expect(refused.status).to.equal(400);
  const admin = await adminToken(tp);
  const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, admin);
  const { items } = listed.body as { items: Array<{ id: string }> };
  const revoked = await revokeSession(tp, admin, items[0]!.id);
  expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
}

/** The audit trail as the Management API serves it; `query` starts with `?` or is empty. */
export function trailEvents(tp: TestProvider, token: string, query = ''): Promise<Reply> {
  return apiRequest(tp, 'GET', `${SESSIONS}/events${query}`, token);
}

/**
 * What the trail served after runFullFlow() says, whichever log keeps it:
 * bob's rows newest first, three to a page, the next page older, and alice's
 * exchange with the ticket it named.
 */
export async function expectFullFlowTrail(tp: TestProvider, token: string): Promise<void> {
  const page = await trailEvents(tp, token, '?subject=bob&limit=3');
  expect(page.status).to.equal(200);
  const items = page.body['items'] as Array<{ seq: number; subject: string }>;
  expect(items).to.have.length(3);
  expect(items[0]!.seq).to.be.above(items[2]!.seq);
  for (const item of items) expect(item.subject).to.equal('bob');
  const next = await trailEvents(tp, token, `?subject=bob&limit=3&cursor=${page.body['nextCursor'] as string}`);
  expect((next.body['items'] as Array<{ seq: number }>)[0]!.seq).to.be.below(items[2]!.seq);
  const exchanged = (await trailEvents(tp, token, '?actor=alice&since=2000-01-01T00:00:00Z')).body['items'] as Array<{
    event: string;
    context: unknown;
  }>;
  expect(exchanged.find((item) => item.event === EVENTS.exchangeSucceeded)!.context).to.deep.equal({
    ticketId: 'T-1',
    reason: 'invoices',
  });
}
