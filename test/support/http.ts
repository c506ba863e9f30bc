import { expect } from 'chai';
import {
  ACCESS_TOKEN,
  CLIENTS,
  MANAGEMENT,
  MANAGEMENT_SCOPE,
  REDIRECT_URI,
  TOKEN_EXCHANGE,
  pkcePair,
  type TestProvider,
} from './provider.js';

export interface Reply {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export interface ClientCredentials {
  client_id: string;
  client_secret?: string;
}

export function basic(client: ClientCredentials): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret ?? '')}`).toString('base64')}`;
}

async function reply(response: Response): Promise<Reply> {
  const text = await response.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    body = { text };
  }
  return { status: response.status, headers: response.headers, body };
}

/** POSTs a form to the token endpoint; confidential clients authenticate with Basic, public ones send client_id. */
export async function tokenRequest(
  tp: TestProvider,
  params: Record<string, string | string[] | undefined>,
  client: ClientCredentials | undefined = CLIENTS.console,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    for (const entry of Array.isArray(value) ? value : [value]) form.append(name, entry);
  }
  const extra: Record<string, string> = { ...headers };
  if (client?.client_secret) extra['authorization'] = basic(client);
  else if (client) form.set('client_id', client.client_id);
  const response = await fetch(`${tp.base}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...extra },
    body: form,
    signal: AbortSignal.timeout(10_000),
  });
  return reply(response);
}

export async function m2mToken(
  tp: TestProvider,
  client: ClientCredentials = CLIENTS.backend,
  scope: string | null = MANAGEMENT_SCOPE,
  resource: string = MANAGEMENT,
): Promise<string> {
  const result = await tokenRequest(
    tp,
    { grant_type: 'client_credentials', scope: scope ?? undefined, resource },
    client,
  );
  if (result.status !== 200) throw new Error(`client_credentials failed: ${JSON.stringify(result.body)}`);
  return result.body['access_token'] as string;
}

export async function managementRequest(
  tp: TestProvider,
  body: unknown,
  token: string | undefined,
  { contentType = 'application/json', raw }: { contentType?: string; raw?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': contentType };
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  const response = await fetch(`${tp.base}/api/subject-tokens`, {
    method: 'POST',
    headers,
    body: raw ?? JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return reply(response);
}

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
    signal: AbortSignal.timeout(10_000),
  });
  return reply(response);
}

/** Creates a subject token through the Management API with a fresh M2M token. */
export async function subjectToken(
  tp: TestProvider,
  body: Record<string, unknown> = { userId: 'bob' },
): Promise<string> {
  const result = await managementRequest(tp, body, await m2mToken(tp));
  if (result.status !== 201) throw new Error(`subject token creation failed: ${JSON.stringify(result.body)}`);
  return result.body['subjectToken'] as string;
}

export function exchange(
  tp: TestProvider,
  params: Record<string, string | string[] | undefined>,
  client: ClientCredentials | undefined = CLIENTS.console,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return tokenRequest(
    tp,
    {
      grant_type: TOKEN_EXCHANGE,
      subject_token_type: ACCESS_TOKEN,
      ...params,
    },
    client,
    headers,
  );
}

/** A cookie jar just big enough for oidc-provider's interaction and session cookies. */
class Jar {
  readonly #cookies = new Map<string, string>();
  store(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair] = line.split(';');
      const index = pair!.indexOf('=');
      this.#cookies.set(pair!.slice(0, index), pair!.slice(index + 1));
    }
  }
  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

/**
 * Obtains a real access token for `user` through the authorization-code flow
 * with PKCE: authorization request, login interaction, code redemption.
 */
export async function userAccessToken(
  tp: TestProvider,
  user: string,
  options: {
    client?: ClientCredentials;
    scope?: string;
    resource?: string;
    headers?: Record<string, string>;
    acr?: string;
  } = {},
): Promise<string> {
  return (await userSignIn(tp, user, options)).accessToken;
}

/** The sign-in of userAccessToken, with the browser's cookies (for a logout later). */
export async function userSignIn(
  tp: TestProvider,
  user: string,
  {
    client = CLIENTS.console,
    scope = 'openid profile',
    resource,
    headers = {},
    acr,
  }: {
    client?: ClientCredentials;
    scope?: string;
    resource?: string;
    headers?: Record<string, string>;
    /** The sign-in's authentication context class, as the login step reports it. */
    acr?: string;
  } = {},
): Promise<{ accessToken: string; cookies: string }> {
  const jar = new Jar();
  const { verifier, challenge } = pkcePair();
  const authorize = new URL(`${tp.base}/auth`);
  authorize.search = new URLSearchParams({
    client_id: client.client_id,
    response_type: 'code',
    redirect_uri: REDIRECT_URI,
    scope,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'state-1',
    ...(resource ? { resource } : {}),
  }).toString();

  let location: string = authorize.href;
  let code: string | undefined;
  for (let hop = 0; hop < 8 && !code; hop += 1) {
    const url = new URL(location, tp.base);
    if (url.href.startsWith(REDIRECT_URI)) {
      const error = url.searchParams.get('error');
      if (error) throw new Error(`authorization failed: ${error} ${url.searchParams.get('error_description')}`);
      code = url.searchParams.get('code') ?? undefined;
      break;
    }
    const interaction = /\/interaction\/([^/]+)$/.exec(url.pathname);
    const login = new URLSearchParams({ login: user, ...(acr ? { acr } : {}) });
    const response = await fetch(interaction ? `${url.href}/login?${login}` : url, {
      method: interaction ? 'POST' : 'GET',
      headers: { cookie: jar.header() },
      redirect: 'manual',
      signal: AbortSignal.timeout(10_000),
    });
    jar.store(response.headers);
    await response.arrayBuffer();
    const next = response.headers.get('location');
    if (!next) throw new Error(`authorization flow stopped at ${url.pathname} with ${response.status}`);
    location = next;
  }
  if (!code) throw new Error('authorization flow did not return a code');

  const result = await tokenRequest(
    tp,
    {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
      code_verifier: verifier,
      ...(resource ? { resource } : {}),
    },
    client,
    headers,
  );
  if (result.status !== 200) throw new Error(`code redemption failed: ${JSON.stringify(result.body)}`);
  return { accessToken: result.body['access_token'] as string, cookies: jar.header() };
}

/** An RP-initiated logout in the browser that signed in: the end-session form, confirmed. */
export async function logout(tp: TestProvider, cookies: string): Promise<void> {
  const form = await fetch(`${tp.base}/session/end`, {
    headers: { cookie: cookies },
    signal: AbortSignal.timeout(10_000),
  });
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(await form.text())?.[1];
  if (!xsrf) throw new Error('the end-session page has no xsrf field');
  const confirmed = await fetch(`${tp.base}/session/end/confirm`, {
    method: 'POST',
    headers: { cookie: cookies, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ xsrf, logout: 'yes' }),
    redirect: 'manual',
    signal: AbortSignal.timeout(10_000),
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
