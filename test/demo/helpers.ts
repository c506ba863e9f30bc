import { createHash, randomBytes } from 'node:crypto';
import type { Demo } from '../../demo/demo.js';
import { scaled } from '../support/time.js';

/** Bound on every request a test makes. */
export const REQUEST_TIMEOUT = scaled(5000);

/** Cookies of one user agent. Every server of a test is on the same host, where cookies ignore the port. */
export class CookieJar {
  readonly #cookies = new Map<string, string>();

  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const separator = pair.indexOf('=');
      const name = pair.slice(0, separator).trim();
      const value = pair.slice(separator + 1).trim();
      const expired = attributes.some((attribute) => {
        const [key = '', date = ''] = attribute.split('=');
        return key.trim().toLowerCase() === 'expires' && Date.parse(date) <= Date.now();
      });
      if (expired || !value) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }
}

/** One request, redirects not followed, cookies kept in `jar`. */
export async function request(jar: CookieJar, url: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const cookie = jar.header();
  if (cookie) headers.set('cookie', cookie);
  const response = await fetch(url, {
    ...init,
    headers,
    redirect: 'manual',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  jar.store(response);
  return response;
}

/** Like a browser: follows up to 10 redirects (303 turns a POST into a GET); `response.url` is where it ended. */
export async function follow(jar: CookieJar, url: string, init: RequestInit = {}): Promise<Response & { url: string }> {
  let target = url;
  let current = init;
  for (let hop = 0; hop < 10; hop += 1) {
    const response = await request(jar, target, current);
    const next = response.headers.get('location');
    if (response.status < 300 || response.status > 399 || !next) {
      Object.defineProperty(response, 'url', { value: target });
      return response;
    }
    await response.body?.cancel();
    target = new URL(next, target).href;
    current = {};
  }
  throw new Error(`too many redirects from ${url}`);
}

export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

export interface SignInOptions {
  login: string;
  password: string;
  /** `support-console` (public, the default) or `support-web` (confidential). */
  client?: 'support-console' | 'support-web';
  scope?: string;
  /** An API to ask a token for (RFC 8707), as a first-party app does for its own API. */
  resource?: string;
}

/**
 * What a browser does to sign in, over plain HTTP: authorization request,
 * the login form, resume, then the code for tokens. Resolves the access token.
 */
export async function signIn(demo: Demo, options: SignInOptions): Promise<string> {
  const client = options.client ?? 'support-console';
  const redirectUri =
    client === 'support-console' ? `${demo.backend.url}/callback` : `${demo.backend.url}/web/callback`;
  const jar = new CookieJar();
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(8).toString('base64url');
  const authorize = new URL(`${demo.identity.issuer}/auth`);
  authorize.search = new URLSearchParams({
    client_id: client,
    response_type: 'code',
    scope: options.scope ?? 'openid profile',
    redirect_uri: redirectUri,
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    ...(options.resource ? { resource: options.resource } : {}),
  }).toString();

  let response = await request(jar, authorize.href);
  const interaction = new URL(location(response), authorize).href;
  response = await request(jar, interaction);
  if (response.status !== 200) throw new Error(`login page answered ${response.status}`);
  response = await request(jar, `${interaction}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ login: options.login, password: options.password }),
  });
  response = await request(jar, new URL(location(response), interaction).href);
  const callback = new URL(location(response));
  if (callback.searchParams.get('state') !== state || !callback.searchParams.get('code')) {
    throw new Error(`sign-in did not end with a code: ${callback.href}`);
  }

  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code: callback.searchParams.get('code')!,
    redirect_uri: redirectUri,
    code_verifier: verifier,
    ...(options.resource ? { resource: options.resource } : {}),
  });
  if (client === 'support-web') headers['authorization'] = basic('support-web', 'support-web-secret');
  else body.set('client_id', client);
  response = await request(jar, `${demo.identity.issuer}/token`, { method: 'POST', headers, body });
  const tokens = (await response.json()) as { access_token?: string };
  if (response.status !== 200 || !tokens.access_token)
    throw new Error(`token request answered ${response.status}: ${JSON.stringify(tokens)}`);
  return tokens.access_token;
}

function location(response: Response): string {
  const value = response.headers.get('location');
  if (response.status < 300 || response.status > 399 || !value) {
    throw new Error(`expected a redirect, got ${response.status}`);
  }
  return value;
}

export interface ImpersonationBody {
  userId?: unknown;
  reason?: unknown;
  ticketId?: unknown;
  [field: string]: unknown;
}

/** POST /api/request-impersonation of the backend. */
export async function requestImpersonation(
  demo: Demo,
  token: string | undefined,
  body: ImpersonationBody | string,
  contentType = 'application/json',
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const headers: Record<string, string> = { 'content-type': contentType };
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  const response = await fetch(`${demo.backend.url}/api/request-impersonation`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    headers: response.headers,
  };
}

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** The token exchange as the console makes it (public client), or as support-web does (HTTP Basic). */
export async function exchange(
  demo: Demo,
  subjectToken: string,
  actorToken?: string,
  client: { id: string; secret?: string } = { id: 'support-console' },
  headers: Record<string, string> = {},
  scope = 'profile:read',
): Promise<{ status: number; body: Record<string, unknown> }> {
  if (client.secret)
    headers['authorization'] = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}`;
  const body = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE,
    ...(client.secret ? {} : { client_id: client.id }),
    scope,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    resource: 'https://api.example.com',
  });
  if (actorToken) {
    body.set('actor_token', actorToken);
    body.set('actor_token_type', ACCESS_TOKEN_TYPE);
  }
  const response = await fetch(`${demo.identity.issuer}/token`, {
    method: 'POST',
    headers,
    body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function callResourceApi(
  demo: Demo,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${demo.backend.url}/api/me`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export const quiet = (): void => {};

/** A machine client of the demo's identity service. */
export interface MachineClient {
  id: string;
  secret: string;
}

const CONSOLE_BACKEND: MachineClient = { id: 'impersonation-backend', secret: 'impersonation-backend-secret' };
/** The on-call team's client, the one the demo lets break glass (`approvals.breakGlassClients`). */
export const EMERGENCY_ACCESS: MachineClient = { id: 'emergency-access', secret: 'emergency-access-secret' };

/** An M2M token for the Management API, of the demo backend's client unless another is named. */
export async function managementToken(demo: Demo, scope: string, client = CONSOLE_BACKEND): Promise<string> {
  const response = await fetch(`${demo.identity.issuer}/token`, {
    method: 'POST',
    headers: { authorization: basic(client.id, client.secret) },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource: demo.identity.managementResource, scope }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  const { access_token: token } = (await response.json()) as { access_token: string };
  return token;
}

/** POST /api/subject-tokens of the Management API with `token`: its status and body. */
export async function askSubjectToken(
  demo: Demo,
  token: string,
  creation: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(demo.identity.managementUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(creation),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A customer signed in at the account page (`/account`), as a browser would: its cookies and the page. */
export async function accountSignIn(
  backendUrl: string,
  login: string,
  password = `${login}-password`,
): Promise<{ jar: CookieJar; html: string }> {
  const jar = new CookieJar();
  const form = await follow(jar, `${backendUrl}/account/login`);
  if (form.status !== 200) throw new Error(`the sign-in page answered ${form.status}`);
  await form.body?.cancel();
  const page = await follow(jar, `${form.url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ login, password }),
  });
  if (page.url !== `${backendUrl}/account`) throw new Error(`the sign-in ended at ${page.url}`);
  return { jar, html: await page.text() };
}

/** The CSRF token the account page's forms carry. */
export function csrfOf(html: string): string {
  const token = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  if (!token) throw new Error('the account page has no form with a CSRF token');
  return token;
}

/** Posts one of the account page's forms, as the browser of `jar` would; the redirect is not followed. */
export async function postAccountForm(
  backendUrl: string,
  jar: CookieJar,
  action: string,
  fields: Record<string, string>,
): Promise<Response> {
  return request(jar, `${backendUrl}${action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields),
  });
}

/**
 * Bob lets anyone in support see and change his account for a day, from his
 * account page: without it, every impersonation of bob waits for his approval.
 */
export async function letSupportIn(backendUrl: string, customer = 'bob'): Promise<void> {
  const { jar, html } = await accountSignIn(backendUrl, customer);
  const given = await postAccountForm(backendUrl, jar, '/account/support-access/grants', {
    csrf: csrfOf(html),
    duration: '86400',
    actor: '',
    access: 'edit',
  });
  await given.body?.cancel();
  const page = await request(jar, `${backendUrl}/account`);
  const text = await page.text();
  if (given.status !== 303 || !text.includes('id="grants"'))
    throw new Error(`bob could not give access: ${given.status}`);
}

/**
 * What the resource API answers a token's call of `GET /api/customer`, asked
 * again every 50 ms until it refuses the token or `ms` have passed.
 */
export async function refusedWithin(demo: Demo, token: string, ms: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const response = await fetch(`${demo.backend.url}/api/customer`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    await response.body?.cancel();
    if (response.status !== 200 || Date.now() - started >= ms) return response.status;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
