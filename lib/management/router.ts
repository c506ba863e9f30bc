import Router from '@koa/router';
import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import type { ResolvedOptions } from '../options.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import { createCallerCheck } from './caller.js';
import { assertStorableQuery } from './body.js';
import { renderErrors } from './http.js';
import { impersonationRoutes } from './impersonations.js';
import { subjectTokenRoutes } from './subject-tokens.js';

/** The Management API: subject tokens, impersonation sessions and their revocation feed. */
export function createManagementRouter(
  provider: Provider,
  options: ResolvedOptions,
  stores: { subjectTokens: SubjectTokenStore; sessions: SessionStore },
): Router {
  const authenticate = options.authenticateManagementRequest ?? createCallerCheck(provider, options);
  // Exact paths, as a proxy's exact-path rule would match them: no case folding, no trailing slash.
  const router = new Router({ sensitive: true, strict: true });
  router.use([options.managementPath, options.sessionsPath], renderErrors, refuseUnstorableQuery);
  subjectTokenRoutes(router, provider, options, stores.subjectTokens, authenticate);
  impersonationRoutes(router, provider, options, stores.sessions, authenticate);
  return router;
}

/** Before any handler: a query value no store can hold is the caller's error (400), never a store's (503). */
async function refuseUnstorableQuery(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  assertStorableQuery(ctx.query);
  await next();
}
