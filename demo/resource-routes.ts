/**
 * The demo resource API (https://api.example.com) as the backend serves it:
 * `GET /api/me` says whom a token names and who acts for them, the
 * customer's data (customer-api.ts), and `GET /api/me/orders-service`, which
 * calls the orders service on the caller's behalf (orders-service.ts). Tokens are checked by the package's
 * resource-server helper, which polls an SSF stream of its own for the impersonations that stop
 * (resource-api-stream.ts), or follows the revocation feed.
 */
import type Router from '@koa/router';
import { createRemoteJWKSet } from 'jose';
import { createImpersonationVerifier } from '../lib/resource-server/index.js';
import type { BackendDependencies } from './backend-dependencies.js';
import { customerRoutes, type CustomerApi } from './customer-api.js';
import { ordersRoutes } from './orders-service.js';
import { resourceApiStream } from './resource-api-stream.js';
import { createTokenCheck } from './resource-api.js';
import { API_RESOURCE } from './seed.js';

export interface ResourceRoutes extends CustomerApi {
  /** Resolves once the revocation feed was read, or its first read failed (which is logged); never rejects. */
  ready(): Promise<void>;
  /** Stops following the revocations, and deletes the resource API's SSF stream. */
  close(): Promise<void>;
}

export function resourceRoutes(router: Router, deps: BackendDependencies): ResourceRoutes {
  const stream = deps.revocationSource === 'ssf' ? resourceApiStream(deps) : undefined;
  const verifier = createImpersonationVerifier({
    issuer: deps.issuer,
    audience: API_RESOURCE,
    jwks: createRemoteJWKSet(new URL(deps.endpoints.jwks), { timeoutDuration: deps.timeoutMs }),
    ...(stream ? { ssf: stream.ssf } : { revocationsUri: deps.endpoints.revocations }),
    refreshInterval: 250,
  });
  const firstRead = verifier
    .ready()
    .catch((error: Error) =>
      deps.log(
        `[backend] the ${stream ? 'SSF stream of stopped impersonations' : 'revocation feed'} is not readable yet: ${error.message}`,
      ),
    );
  const verifyRequest = createTokenCheck({ verifier, publicUrl: (ctx) => `${deps.url}${ctx.path}` });

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

  const customers = customerRoutes(router, verifyRequest, deps.log);
  const orders = ordersRoutes(router, deps, verifyRequest);
  return {
    changesOf: (customer) => customers.changesOf(customer),
    ready: () => Promise.all([firstRead, orders.ready()]).then(() => undefined),
    close: async () => {
      verifier.close();
      orders.close();
      await stream?.close();
    },
  };
}
