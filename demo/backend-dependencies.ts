/**
 * What every route of the backend shares: its address, the identity
 * service's endpoints, the seed users and secrets, and the calls to the
 * identity service (bounded; the M2M token for the Management API; the
 * engineer behind a Bearer token). Built once by `startBackend()` and passed
 * to each route module.
 */
import type Koa from 'koa';
import type { Actor } from './actor.js';
import { basic, HttpError, jsonOf } from './http.js';
import { M2mTokenCache } from './m2m-token.js';
import { CLIENTS, type DemoSecrets, type DemoUser } from './seed.js';
import type { Management } from './stop-routes.js';

export interface IdentityEndpoints {
  authorization: string;
  token: string;
  userinfo: string;
  introspection: string;
  jwks: string;
  endSession: string;
  /** The Management API's subject-token endpoint. */
  management: string;
  /** The Management API's impersonation sessions. */
  sessions: string;
  /** The revocation feed of impersonation sessions. */
  revocations: string;
  /** Where the Management API shows an approval request by id. */
  approvalRequests: string;
  /** The customer's support-access API (grants and requests), called with the customer's own token. */
  supportAccess: string;
  /** The SSF stream management API's streams (the transmitter's `configuration_endpoint`). */
  ssfStreams: string;
}

export interface BackendDependencies {
  /** This backend: http://{hostname}:{port} */
  url: string;
  /** The identity service's issuer, without a trailing slash. */
  issuer: string;
  identityOrigin: string;
  endpoints: IdentityEndpoints;
  /** The resource indicator the customer's token for the support-access API is asked for. */
  customerResource: string;
  /** The Management API's resource indicator, which SSF receivers' tokens are for too. */
  managementResource: string;
  /** Where the resource API learns which impersonations stopped: its own SSF stream (default), or the feed. */
  revocationSource: 'ssf' | 'feed';
  secrets: DemoSecrets;
  users: ReadonlyMap<string, DemoUser>;
  log(line: string): void;
  /** Bound on every call to the identity service, milliseconds. */
  timeoutMs: number;
  /** Calls the identity service; a network failure or timeout is a 502, never a hang. */
  call(target: string, init: RequestInit): Promise<Response>;
  m2m: M2mTokenCache;
  /** A call of the Management API with the M2M token, fetched again once if it was refused. */
  management: Management;
  /** The signed-in support engineer behind the request's Bearer token; 401 or 403 otherwise. */
  supportActor(ctx: Koa.Context): Promise<Actor>;
}

/** Where the identity service answers, as the backend is told. */
export interface IdentityServiceAddresses {
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
  /** Resource indicator of the customer's support-access API, also where it is served. Default: /api/support-access at the issuer's origin. */
  customerResource?: string;
  /**
   * Where the resource API learns which impersonations stopped: a poll stream
   * of the identity service's SSF transmitter of its own (`ssf`, the default),
   * or the revocation feed (`feed`). The orders service reads the feed.
   */
  revocationSource?: 'ssf' | 'feed';
}

export interface DependencySettings extends IdentityServiceAddresses {
  url: string;
  secrets: DemoSecrets;
  /** Bound on every call to the identity service, milliseconds. */
  timeoutMs: number;
  log(line: string): void;
}

const SUPPORT_ROLE = 'support';
const READ_SCOPE = 'impersonations:read';
const REVOKE_SCOPE = 'impersonations:revoke';

export function backendDependencies(settings: DependencySettings): BackendDependencies {
  const { secrets, timeoutMs, log } = settings;
  const issuer = settings.issuer.replace(/\/$/, '');
  const identityOrigin = new URL(issuer).origin;
  const endpoints: IdentityEndpoints = {
    authorization: `${issuer}/auth`,
    token: `${issuer}/token`,
    userinfo: `${issuer}/me`,
    introspection: `${issuer}/token/introspection`,
    jwks: `${issuer}/jwks`,
    endSession: `${issuer}/session/end`,
    management: settings.managementUrl ?? `${identityOrigin}/api/subject-tokens`,
    sessions: settings.sessionsUrl ?? `${identityOrigin}/api/impersonations`,
    revocations: settings.revocationsUrl ?? `${identityOrigin}/api/impersonations/revocations`,
    approvalRequests: `${identityOrigin}/api/approval-requests`,
    supportAccess: settings.customerResource ?? `${identityOrigin}/api/support-access`,
    ssfStreams: `${identityOrigin}/ssf/streams`,
  };
  const managementResource = settings.managementResource ?? `${identityOrigin}/api`;
  const managementScope = settings.managementScope ?? 'subject-tokens:create';

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

  async function supportActor(ctx: Koa.Context): Promise<Actor> {
    const actor = await authenticateActor(ctx);
    if (!actor.roles.includes(SUPPORT_ROLE)) {
      throw new HttpError(403, 'access_denied', `${actor.sub} is not support staff and may not impersonate users`);
    }
    return actor;
  }

  return {
    url: settings.url,
    issuer,
    identityOrigin,
    endpoints,
    customerResource: endpoints.supportAccess,
    managementResource,
    revocationSource: settings.revocationSource ?? 'ssf',
    secrets,
    users: new Map(secrets.users.map((user) => [user.id, user])),
    log,
    timeoutMs,
    call,
    m2m,
    management,
    supportActor,
  };
}

function bearer(header: string): string | undefined {
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header)?.[1];
}
