/**
 * The demo's second API, the orders service (https://orders.example.com), and
 * the resource API's call to it on the customer's behalf. The resource API
 * exchanges the token it received for a delegated one (RFC 8693 delegation,
 * as client `resource-api`): narrower (the orders service, `profile:read`),
 * no longer-lived, and naming the resource API in `act` above whoever acted
 * before (the engineer, while impersonating). The orders service shows that
 * chain. Its tokens are checked by the package's resource-server helper,
 * which follows the revocation feed: stopping the impersonation stops them.
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { createRemoteJWKSet } from 'jose';
import { createImpersonationVerifier } from '../lib/resource-server/index.js';
import type { BackendDependencies } from './backend-dependencies.js';
import { basic, HttpError, jsonOf } from './http.js';
import { createTokenCheck, type VerifiedRequest } from './resource-api.js';
import { CLIENTS, ORDERS_RESOURCE } from './seed.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export interface OrdersService {
  ready(): Promise<void>;
  close(): void;
}

export function ordersRoutes(
  router: Router,
  deps: BackendDependencies,
  verifyCaller: (ctx: Koa.Context) => Promise<VerifiedRequest>,
): OrdersService {
  const verifier = createImpersonationVerifier({
    issuer: deps.issuer,
    audience: ORDERS_RESOURCE,
    jwks: createRemoteJWKSet(new URL(deps.endpoints.jwks), { timeoutDuration: deps.timeoutMs }),
    revocationsUri: deps.endpoints.revocations,
    refreshInterval: 250,
  });
  const firstRead = verifier
    .ready()
    .catch((error: Error) => deps.log(`[orders] the revocation feed is not readable yet: ${error.message}`));
  const verifyRequest = createTokenCheck({ verifier, publicUrl: (ctx) => `${deps.url}${ctx.path}` });

  // The orders service: whom the token names, and every actor in its chain, the latest first.
  router.get('/orders-api/me', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const payload = await verifyRequest(ctx);
    const chain = actorsOf(payload['act']);
    ctx.body = {
      message: `${chain.join(' for ')} for ${payload.sub}`,
      subject: payload.sub,
      act: payload['act'] ?? null,
      actors: chain,
      scope: payload['scope'] ?? null,
      expires_at: new Date(payload.exp * 1000).toISOString(),
    };
  });

  // The resource API calls the orders service on the caller's behalf.
  router.get('/api/me/orders-service', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    await verifyCaller(ctx);
    const received = /^(?:Bearer|DPoP) +(\S+)$/i.exec(ctx.get('authorization'))?.[1];
    if (!received) throw new HttpError(401, 'invalid_token', 'a Bearer or DPoP access token is required');
    const delegated = await delegate(deps, received);
    const response = await deps.call(`${deps.url}/orders-api/me`, {
      headers: { authorization: `Bearer ${delegated}` },
    });
    ctx.status = response.status;
    ctx.body = { calledBy: CLIENTS.resourceApi, ordersService: (await jsonOf(response)) ?? {} };
  });

  return { ready: () => firstRead, close: () => verifier.close() };
}

/** The delegated token for the orders service; the identity service's refusal becomes the caller's 403. */
async function delegate(deps: BackendDependencies, subjectToken: string): Promise<string> {
  const response = await deps.call(deps.endpoints.token, {
    method: 'POST',
    headers: {
      authorization: basic(CLIENTS.resourceApi, deps.secrets.resourceApiClientSecret),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      grant_type: TOKEN_EXCHANGE,
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: ORDERS_RESOURCE,
      scope: 'profile:read',
    }),
  });
  const body = await jsonOf(response);
  if (!response.ok || typeof body?.['access_token'] !== 'string') {
    const reason = typeof body?.['error_description'] === 'string' ? body['error_description'] : 'refused';
    deps.log(`[backend] the orders service delegation was refused: ${reason}`);
    throw new HttpError(403, 'access_denied', `the orders service cannot be called on this token's behalf: ${reason}`);
  }
  return body['access_token'];
}

/** The actors of an `act` chain, the latest first. */
function actorsOf(act: unknown): string[] {
  const actors: string[] = [];
  for (let level = act; typeof level === 'object' && level !== null && actors.length < 16;) {
    const { sub, act: earlier } = level as { sub?: unknown; act?: unknown };
    if (typeof sub === 'string') actors.push(sub);
    level = earlier;
  }
  return actors;
}
