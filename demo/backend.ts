/**
 * The integrator's backend of the demo (spec 4.1), the support console it
 * serves, and a demo resource API for https://api.example.com.
 */
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import Router from '@koa/router';
import { createRemoteJWKSet } from 'jose';
import { createImpersonationVerifier } from '../lib/resource-server/index.js';
import Koa from 'koa';
import { basic, closeServer, escapeHtml, HttpError, jsonOf, listen, page, portOf, readJson, serve } from './http.js';
import { consolePage, type ConsoleConfig } from './console-page.js';
import { accountRoutes } from './account.js';
import type { Actor } from './actor.js';
import { CUSTOMER_EVENTS, type TrailEvent } from './activity.js';
import { customerRoutes } from './customer-api.js';
import { M2mTokenCache } from './m2m-token.js';
import { PendingSignIns, type PendingSignInLimits } from './pending-sign-ins.js';
import { createTokenCheck } from './resource-api.js';
import { stopRoutes, type Management } from './stop-routes.js';
import { API_RESOURCE, CLIENTS, demoSecrets, type DemoSecrets } from './seed.js';

export interface BackendOptions {
  /** A server from `listen()`, when the port must be known before the identity service is built. */
  server?: http.Server;
  /** Port to listen on when no server is given. Default 3001; 0 picks a free one. */
  port?: number;
  /** Address to bind when no server is given. Default 127.0.0.1. */
  bindAddress?: string;
  /** Host name in this backend's URLs (redirect URIs). Default `localhost`. */
  hostname?: string;
  /** Issuer of the identity service, e.g. http://localhost:3000/oidc. */
  issuer: string;
  /** Subject-token endpoint of the Management API. Default: /api/subject-tokens at the issuer's origin. */
  managementUrl?: string;
  /** The revocation feed of impersonation sessions. Default: /api/impersonations/revocations at the issuer's origin. */
  revocationsUrl?: string;
  /** Resource indicator of the Management API. Default: /api at the issuer's origin. */
  managementResource?: string;
  /** Default `subject-tokens:create`. */
  managementScope?: string;
  /** The impersonation sessions of the Management API. Default: /api/impersonations at the issuer's origin. */
  sessionsUrl?: string;
  secrets?: DemoSecrets;
  /** Bound on every call to the identity service, milliseconds. Default 5000. */
  timeoutMs?: number;
  /** Bound and lifetime of the sign-ins in progress at `/web/login` and, apart, at `/account/login`. */
  pendingSignIns?: PendingSignInLimits;
  log?: (line: string) => void;
}

export interface Backend {
  /** http://{hostname}:{port} */
  url: string;
  server: http.Server;
  /** How many M2M tokens were fetched (the rest came from the cache). */
  readonly m2mTokensFetched: number;
  /** Sign-ins started and not yet back, at `/web/login` and at `/account/login`. */
  readonly pendingSignIns: { web: number; account: number };
  close(): Promise<void>;
}

interface ImpersonationRequest {
  userId: string;
  reason: string;
  ticketId: string;
  /** `edit` asks for an impersonation that may change the customer's data (profile:write). */
  access: 'read' | 'edit';
}

const SUPPORT_ROLE = 'support';
const READ_SCOPE = 'impersonations:read';
const REVOKE_SCOPE = 'impersonations:revoke';
const MAX_FIELD = { userId: 256, reason: 500, ticketId: 100, access: 4 } as const;

export async function startBackend(options: BackendOptions): Promise<Backend> {
  const server = options.server ?? (await listen(options.port ?? 3001, options.bindAddress));
  const url = `http://${options.hostname ?? 'localhost'}:${portOf(server)}`;
  const issuer = options.issuer.replace(/\/$/, '');
  const identityOrigin = new URL(issuer).origin;
  const endpoints = {
    authorization: `${issuer}/auth`,
    token: `${issuer}/token`,
    userinfo: `${issuer}/me`,
    introspection: `${issuer}/token/introspection`,
    jwks: `${issuer}/jwks`,
    management: options.managementUrl ?? `${identityOrigin}/api/subject-tokens`,
    sessions: options.sessionsUrl ?? `${identityOrigin}/api/impersonations`,
  };
  const users = new Map((options.secrets ?? demoSecrets()).users.map((user) => [user.id, user]));
  const managementResource = options.managementResource ?? `${identityOrigin}/api`;
  const managementScope = options.managementScope ?? 'subject-tokens:create';
  const secrets = options.secrets ?? demoSecrets();
  const timeoutMs = options.timeoutMs ?? 5000;
  const log = options.log ?? (() => {});
  const jwks = createRemoteJWKSet(new URL(endpoints.jwks), { timeoutDuration: timeoutMs });

  /** Calls the identity service; a network failure or timeout is a 502, never a hang. */
  async function call(target: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(target, { ...init, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    } catch (error) {
      log(`[backend] ${init.method ?? 'GET'} ${target} failed: ${(error as Error).message}`);
      throw new HttpError(502, 'bad_gateway', `the identity service cannot be reached (${new URL(target).pathname})`);
    }
  }

  const m2m = new M2mTokenCache(async () => {
    const response = await call(endpoints.token, {
      method: 'POST',
      headers: {
        authorization: basic(CLIENTS.backend, secrets.backendClientSecret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: managementResource,
        scope: `${managementScope} ${READ_SCOPE} ${REVOKE_SCOPE}`,
      }),
    });
    const body = await jsonOf(response);
    if (!response.ok || typeof body?.['access_token'] !== 'string' || typeof body['expires_in'] !== 'number') {
      log(
        `[backend] client_credentials failed: ${response.status} ${String(body?.['error'] ?? '')} ${String(body?.['error_description'] ?? '')}`,
      );
      throw new HttpError(502, 'bad_gateway', 'the backend could not obtain its machine-to-machine token');
    }
    return { value: body['access_token'], expiresIn: body['expires_in'] };
  });

  /**
   * The actor's access token, checked by the identity service itself: userinfo
   * says who it is, introspection which application it was issued to. Any
   * failure is a 401.
   */
  async function authenticateActor(ctx: Koa.Context): Promise<Actor> {
    const token = bearer(ctx.get('authorization'));
    if (!token) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw new HttpError(401, 'invalid_token', 'a Bearer access token of the support engineer is required');
    }
    const [userinfo, introspection] = await Promise.all([
      call(endpoints.userinfo, { headers: { authorization: `Bearer ${token}` } }),
      call(endpoints.introspection, {
        method: 'POST',
        headers: {
          authorization: basic(CLIENTS.backend, secrets.backendClientSecret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ token }),
      }),
    ]);
    if (userinfo.status >= 500 || introspection.status >= 500) {
      throw new HttpError(
        502,
        'bad_gateway',
        `the identity service answered ${Math.max(userinfo.status, introspection.status)}`,
      );
    }
    const [claims, details] = await Promise.all([jsonOf(userinfo), jsonOf(introspection)]);
    // Introspection answers 400 for a JWT: only the opaque tokens of a sign-in are actor tokens here.
    if (
      !userinfo.ok ||
      !introspection.ok ||
      typeof claims?.['sub'] !== 'string' ||
      details?.['active'] !== true ||
      details['sub'] !== claims['sub'] ||
      typeof details['client_id'] !== 'string'
    ) {
      ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new HttpError(401, 'invalid_token', 'the access token is invalid or expired; sign in again');
    }
    const roles = Array.isArray(claims['roles'])
      ? claims['roles'].filter((role): role is string => typeof role === 'string')
      : [];
    return {
      sub: claims['sub'],
      ...(typeof claims['name'] === 'string' ? { name: claims['name'] } : {}),
      roles,
      clientId: details['client_id'],
    };
  }

  async function createSubjectToken(
    request: ImpersonationRequest,
    actor: Actor,
  ): Promise<{ status: number; body: unknown }> {
    // Bound to the engineer and the application they signed in with: a subject
    // token that leaks can be redeemed only there, and only with their own token.
    const body = JSON.stringify({
      userId: request.userId,
      context: {
        ticketId: request.ticketId,
        reason: request.reason,
        supportEngineerId: actor.sub,
        access: request.access,
      },
      actorId: actor.sub,
      clientId: actor.clientId,
    });
    for (let attempt = 0; ; attempt += 1) {
      const token = await m2m.get();
      const response = await call(endpoints.management, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
      const answer = await jsonOf(response);
      if (response.status === 401 && attempt === 0) {
        // Revoked, or the identity service restarted: fetch a fresh M2M token once.
        m2m.invalidate();
        continue;
      }
      if (response.ok && typeof answer?.['subjectToken'] === 'string' && typeof answer['expiresIn'] === 'number') {
        return { status: 200, body: { subjectToken: answer['subjectToken'], expiresIn: answer['expiresIn'] } };
      }
      // Only the error fields: a malformed success could still carry a subject token.
      log(
        `[backend] Management API answered ${response.status} ${String(answer?.['error'] ?? '')} ${String(answer?.['error_description'] ?? '')}`,
      );
      if (response.ok || response.status === 401) {
        throw new HttpError(502, 'bad_gateway', `the Management API answered ${response.status}`);
      }
      // Its refusal (403, 404, 400, 503, ...) is passed on as it is.
      return {
        status: response.status,
        body: {
          error: typeof answer?.['error'] === 'string' ? answer['error'] : 'management_api_error',
          error_description:
            typeof answer?.['error_description'] === 'string'
              ? answer['error_description']
              : `the Management API answered ${response.status}`,
        },
      };
    }
  }

  /** A call of the Management API with the M2M token, fetched again once if it was refused. */
  const management: Management = async (method, target, body) => {
    for (let attempt = 0; ; attempt += 1) {
      const token = await m2m.get();
      const response = await call(target, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (response.status === 401 && attempt === 0) {
        m2m.invalidate();
        continue;
      }
      if (response.status >= 500 || response.status === 401) {
        log(`[backend] Management API ${method} ${new URL(target).pathname} answered ${response.status}`);
        throw new HttpError(502, 'bad_gateway', `the Management API answered ${response.status}`);
      }
      return { status: response.status, body: response.status === 204 ? undefined : await jsonOf(response) };
    }
  };

  async function supportActor(ctx: Koa.Context): Promise<Actor> {
    const actor = await authenticateActor(ctx);
    if (!actor.roles.includes(SUPPORT_ROLE)) {
      throw new HttpError(403, 'access_denied', `${actor.sub} is not support staff and may not impersonate users`);
    }
    return actor;
  }

  const consoleConfig: ConsoleConfig = {
    issuer,
    clientId: CLIENTS.console,
    redirectUri: `${url}/callback`,
    authorizationEndpoint: endpoints.authorization,
    tokenEndpoint: endpoints.token,
    userinfoEndpoint: endpoints.userinfo,
    endSessionEndpoint: `${issuer}/session/end`,
    postLogoutRedirectUri: `${url}/`,
    resource: API_RESOURCE,
    scope: 'profile:read',
    editScope: 'profile:read profile:write',
    accountUrl: `${url}/account`,
  };
  const consoleScript = await readFile(new URL('./browser/console.js', import.meta.url), 'utf8');
  // One store per sign-in page: a flood of one cannot refuse sign-ins at the other.
  const webLogins = new PendingSignIns(options.pendingSignIns);
  const accountLogins = new PendingSignIns(options.pendingSignIns);

  const router = new Router();

  router.get(['/', '/callback'], (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set(
      'Content-Security-Policy',
      [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'unsafe-inline'",
        `connect-src 'self' ${identityOrigin}`,
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
      ].join('; '),
    );
    ctx.type = 'html';
    ctx.body = consolePage(consoleConfig);
  });

  router.get('/console.js', (ctx) => {
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/javascript';
    ctx.body = consoleScript;
  });

  router.post('/api/request-impersonation', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await supportActor(ctx);
    const request = parseImpersonationRequest(await readJson(ctx));
    if (request.userId === actor.sub) throw new HttpError(400, 'invalid_request', 'you cannot impersonate yourself');
    const { status, body } = await createSubjectToken(request, actor);
    log(`[backend] ${actor.sub} requested impersonation of ${request.userId} (ticket ${request.ticketId}): ${status}`);
    ctx.status = status;
    ctx.body = body;
  });

  // The demo resource API: JWT access tokens for https://api.example.com, revocations and sender constraint honoured.
  const verifier = createImpersonationVerifier({
    issuer,
    audience: API_RESOURCE,
    jwks,
    revocationsUri: options.revocationsUrl ?? `${identityOrigin}/api/impersonations/revocations`,
    refreshInterval: 250,
  });
  verifier.ready().catch((error: Error) => log(`[backend] the revocation feed is not readable yet: ${error.message}`));
  const verifyRequest = createTokenCheck({ verifier, publicUrl: (ctx) => `${url}${ctx.path}` });
  router.get('/api/me', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const payload = await verifyRequest(ctx);
    const act = payload['act'] as { sub?: unknown } | undefined;
    const actor = typeof act?.sub === 'string' ? act.sub : null;
    ctx.body = {
      message: actor ? `${actor} is acting as ${payload.sub}` : `${payload.sub} is acting as themselves`,
      subject: payload.sub,
      actor,
      client_id: payload['client_id'] ?? null,
      scope: payload['scope'] ?? null,
      impersonation_context: payload['impersonation_context'] ?? null,
      expires_at: new Date(payload.exp * 1000).toISOString(),
    };
  });

  stopRoutes(router, { sessionsUrl: endpoints.sessions, users, management, supportActor, log });

  const customers = customerRoutes(router, verifyRequest, log);
  accountRoutes(router, {
    url,
    endpoints,
    secrets,
    users,
    call,
    pending: accountLogins,
    changesOf: customers.changesOf,
    // Every access and every stop, page after page: refusals and other rows are not asked for,
    // so no number of them can push an access out of what the customer is shown.
    trailOf: async (subject) => {
      const rows: TrailEvent[] = [];
      let cursor: string | null = null;
      do {
        const query = new URLSearchParams([
          ['subject', subject],
          ...CUSTOMER_EVENTS.map((name) => ['event', name]),
          ['limit', '100'],
        ]);
        if (cursor) query.set('cursor', cursor);
        const answer = await management('GET', `${endpoints.sessions}/events?${query}`);
        if (answer.status !== 200 || !Array.isArray(answer.body?.['items']))
          throw new HttpError(502, 'bad_gateway', `the audit trail answered ${answer.status}`);
        rows.push(...(answer.body['items'] as TrailEvent[]));
        const next: unknown = answer.body['nextCursor'];
        cursor = typeof next === 'string' ? next : null;
      } while (cursor);
      return rows;
    },
  });

  // The confidential web client: a server-side sign-in that shows the actor token, for the curl walk-through.
  router.get('/web/login', (ctx) => {
    const { state, codeChallenge } = webLogins.start();
    ctx.cookies.set('web_state', state, { httpOnly: true, sameSite: 'lax', path: '/web', overwrite: true });
    const target = new URL(endpoints.authorization);
    target.search = new URLSearchParams({
      client_id: CLIENTS.web,
      response_type: 'code',
      scope: 'openid profile',
      redirect_uri: `${url}/web/callback`,
      state,
      code_challenge: codeChallenge,
      code_challenge_method: 'S256',
    }).toString();
    ctx.redirect(target.href);
  });

  router.get('/web/callback', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const state = typeof ctx.query['state'] === 'string' ? ctx.query['state'] : '';
    const verifier = webLogins.take(state);
    if (typeof ctx.query['error'] === 'string') {
      throw new HttpError(400, ctx.query['error'], String(ctx.query['error_description'] ?? 'the sign-in failed'));
    }
    if (!verifier || ctx.cookies.get('web_state') !== state || typeof ctx.query['code'] !== 'string') {
      throw new HttpError(400, 'invalid_request', 'this sign-in is unknown or expired; start again at /web/login');
    }
    const response = await call(endpoints.token, {
      method: 'POST',
      headers: {
        authorization: basic(CLIENTS.web, secrets.webClientSecret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: ctx.query['code'],
        redirect_uri: `${url}/web/callback`,
        code_verifier: verifier,
      }),
    });
    const tokens = await jsonOf(response);
    if (!response.ok || typeof tokens?.['access_token'] !== 'string') {
      throw new HttpError(
        502,
        String(tokens?.['error'] ?? 'bad_gateway'),
        String(tokens?.['error_description'] ?? `token endpoint answered ${response.status}`),
      );
    }
    const userinfo = await jsonOf(
      await call(endpoints.userinfo, { headers: { authorization: `Bearer ${tokens['access_token']}` } }),
    );
    ctx.type = 'html';
    ctx.body = webTokenPage(String(userinfo?.['sub'] ?? '?'), tokens['access_token'], Number(tokens['expires_in']));
  });

  const app = new Koa();
  app.on('error', (error: Error) => log(`[backend] ${error.stack ?? error.message}`));
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (caught) {
      const error =
        caught instanceof HttpError ? caught : new HttpError(500, 'server_error', 'the backend failed; see its log');
      if (!(caught instanceof HttpError)) ctx.app.emit('error', caught, ctx);
      ctx.status = error.status;
      ctx.set('Cache-Control', 'no-store');
      if (ctx.path.startsWith('/api/')) {
        ctx.body = { error: error.error, error_description: error.message };
      } else {
        ctx.type = 'html';
        ctx.body = page(
          'Support web',
          `<header><h1>Support web</h1></header>
<main><div class="card"><h2>Sign-in failed</h2><div class="error" role="alert">${escapeHtml(`${error.error}: ${error.message}`)}</div>
<a class="button" href="/web/login">Start again</a></div></main>`,
        );
      }
    }
  });
  app.use(router.routes()).use(router.allowedMethods());

  serve(server, app);
  return {
    url,
    server,
    get m2mTokensFetched() {
      return m2m.fetched;
    },
    get pendingSignIns() {
      return { web: webLogins.size, account: accountLogins.size };
    },
    close: () => {
      verifier.close();
      return closeServer(server);
    },
  };
}

function parseImpersonationRequest(body: unknown): ImpersonationRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(
      400,
      'invalid_request',
      'the body must be a JSON object with userId, reason and ticketId (and access: read or edit)',
    );
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => !(name in MAX_FIELD));
  if (unknown.length) throw new HttpError(400, 'invalid_request', `unknown field: ${unknown.join(', ')}`);
  const read = (name: 'userId' | 'reason' | 'ticketId'): string => {
    const value = fields[name];
    if (typeof value !== 'string' || !value.trim())
      throw new HttpError(400, 'invalid_request', `${name} is required (a non-empty string)`);
    if (value.length > MAX_FIELD[name])
      throw new HttpError(400, 'invalid_request', `${name} is longer than ${MAX_FIELD[name]} characters`);
    return value.trim();
  };
  const access = fields['access'] ?? 'read';
  if (access !== 'read' && access !== 'edit')
    throw new HttpError(400, 'invalid_request', 'access must be read or edit');
  return { userId: read('userId'), reason: read('reason'), ticketId: read('ticketId'), access };
}

function bearer(header: string): string | undefined {
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header)?.[1];
}

function webTokenPage(sub: string, accessToken: string, expiresIn: number): string {
  return page(
    'Support web',
    `<header><h1>Support web</h1><span class="who">signed in as ${escapeHtml(sub)}</span></header>
<main><div class="card">
  <h2>Your access token (the actor token)</h2>
  <p>Scope <code>openid profile</code>, no resource; valid for ${escapeHtml(expiresIn)} seconds. Use it as
  <code>ACTOR_TOKEN</code> in the curl walk-through of the README.</p>
  <pre id="access-token">${escapeHtml(accessToken)}</pre>
  <pre>export ACTOR_TOKEN='${escapeHtml(accessToken)}'</pre>
  <a class="button secondary" href="/">Support console</a>
</div></main>`,
  );
}
