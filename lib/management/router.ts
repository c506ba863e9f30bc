import Router from '@koa/router';
import type Koa from 'koa';
import type { ApprovalDependencies } from '../approvals/deps.js';
import type { ResolvedApprovalOptions } from '../approvals/options.js';
import type { ApprovalStore } from '../approvals/store.js';
import type { EventBus } from '../events/subscriber.js';
import { findSettledAs, viewOf } from '../approvals/requests.js';
import { renderErrors } from '../http/answer.js';
import { authorize } from '../http/auth.js';
import { assertStorable } from '../http/body.js';
import type { ResolvedOptions } from '../options.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import { createCallerCheck } from './caller.js';
import { impersonationRoutes } from './impersonations.js';
import { subjectTokenRoutes } from './subject-tokens.js';
import { ssfPaths, ssfRoutes } from '../ssf/routes.js';
import { apiSpans } from '../telemetry/http.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import type { Transmitter } from '../ssf/transmit.js';

/** Mounts the customer's API (lib/customer/), which reads sessions as this API does, on the same router. */
export type CustomerRoutes = (router: Router, deps: ApprovalDependencies, approvals: ResolvedApprovalOptions) => void;

/** Subject tokens, impersonation sessions and their revocation feed, approval requests, as one Koa middleware. */
export function createManagementApi(
  bus: EventBus,
  options: ResolvedOptions,
  stores: { subjectTokens: SubjectTokenStore; sessions: SessionStore; approvals: ApprovalStore },
  transmitter: Transmitter | undefined,
  telemetry: Telemetry | undefined,
  customerRoutes: CustomerRoutes,
): Koa.Middleware {
  const { provider } = bus;
  const authenticate = options.authenticateManagementRequest ?? createCallerCheck(provider, options.managementResource);
  // Exact paths, as a proxy's exact-path rule would match them: no case folding, no trailing slash.
  const router = new Router({ sensitive: true, strict: true });
  const paths = [options.managementPath, options.sessionsPath];
  if (options.approvals) paths.push(options.approvals.requestsPath, options.approvals.customerPath);
  if (transmitter) paths.push(...ssfPaths(transmitter));
  router.use(
    paths,
    apiSpans(telemetry, apiOf(options, transmitter ? ssfPaths(transmitter) : [])),
    renderErrors,
    // Before any handler: a query value no store can hold is the caller's error (400), never a store's (503).
    (ctx: Koa.Context, next: Koa.Next) => {
      // The same rule for the query string: the parameter is named, its value never echoed.
      assertStorable(ctx.query, 'a query parameter name');
      return next();
    },
  );
  const approvalDeps = { bus, options, approvals: stores.approvals, sessions: stores.sessions };
  subjectTokenRoutes(router, bus, options, stores.subjectTokens, approvalDeps, authenticate);
  impersonationRoutes(router, bus, options, stores.sessions, authenticate);
  if (options.approvals) {
    // A backend reads the approval request a creation waits on; another client's is unknown.
    router.get(`${options.approvals.requestsPath}/:id`, async (ctx) => {
      const caller = await authorize(ctx, authenticate, options.managementScope);
      const mine = (request: { requestedBy: string }) => request.requestedBy === caller.clientId;
      ctx.body = await viewOf(approvalDeps, await findSettledAs(approvalDeps, ctx.params['id']!, mine, ctx));
    });
    customerRoutes(router, approvalDeps, options.approvals);
  }
  // The SSF transmitter: its metadata and stream management, mounted (or not) with the rest of the API.
  if (transmitter) ssfRoutes(router, transmitter, authenticate);
  const routes = router.routes() as unknown as Koa.Middleware;
  const allowedMethods = router.allowedMethods() as unknown as Koa.Middleware;
  return Object.assign((ctx: Koa.Context, next: Koa.Next) => routes(ctx, () => allowedMethods(ctx, next)), { router });
}

/** Which API a path belongs to, for its span: the customer's, SSF's, or the Management API. */
function apiOf(options: ResolvedOptions, ssf: readonly string[]): (path: string) => string {
  const customer = options.approvals?.customerPath;
  return (path) => {
    if (customer && path.startsWith(customer)) return 'customer';
    return ssf.some((each) => path.startsWith(each)) ? 'ssf' : 'management';
  };
}
