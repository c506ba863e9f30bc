import { expect } from 'chai';
import { ACCESS_TOKEN, CLIENTS, TOKEN_EXCHANGE, type TestProvider } from './provider.js';
import { basic, reply, type Reply } from '../../fixtures/flows.js';

export {
  basic,
  exchange,
  m2mToken,
  managementRequest,
  subjectToken,
  tokenRequest,
  userAccessToken,
  userSignIn,
  type ClientCredentials,
  type Reply,
} from '../../fixtures/flows.js';
import { scaled } from './time.js';

/** Any call of the Management API (sessions, withdrawal), with a bearer token and a JSON body when given. */
export async function apiRequest(
  tp: TestProvider,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${tp.base}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  return reply(response);
}

/** An RP-initiated logout in the browser that signed in: the end-session form, confirmed. */
export async function logout(tp: TestProvider, cookies: string): Promise<void> {
  const form = await fetch(`${tp.base}/session/end`, {
    headers: { cookie: cookies },
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(await form.text())?.[1];
  if (!xsrf) throw new Error('the end-session page has no xsrf field');
  const confirmed = await fetch(`${tp.base}/session/end/confirm`, {
    method: 'POST',
    headers: { cookie: cookies, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ xsrf, logout: 'yes' }),
    redirect: 'manual',
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  await confirmed.arrayBuffer();
  if (confirmed.status >= 400) throw new Error(`logout failed with ${confirmed.status}`);
}

export function decodeJwt(token: string): Record<string, unknown> {
  const [, payload] = token.split('.');
  return JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function decodeHeader(token: string): Record<string, unknown> {
  const [header] = token.split('.');
  return JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

export { ACCESS_TOKEN, TOKEN_EXCHANGE };

/** The parameters that send an actor token. */
export const actorParams = (actor: string) => ({ actor_token: actor, actor_token_type: ACCESS_TOKEN });

/** An OAuth-style error with this status and code (and a description matching `description`). */
export function expectError(result: Reply, status: number, error: string, description?: RegExp): void {
  expect(result.status, JSON.stringify(result.body)).to.equal(status);
  expect(result.body['error']).to.equal(error);
  if (description) expect(result.body['error_description']).to.match(description);
}

/** Introspection of `token` by the confidential support-web client. */
export async function introspect(tp: TestProvider, token: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${tp.base}/token/introspection`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.web) },
    body: new URLSearchParams({ token }),
  });
  return (await response.json()) as Record<string, unknown>;
}
