import type Router from '@koa/router';
import type { ApprovalDependencies } from '../approvals/deps.js';
import { readRequestFor } from '../approvals/requests.js';
import { authorize, type Authenticate } from '../http/auth.js';

/** `GET {requestsPath}/{id}`: a backend reads its approval request; another client's is answered as unknown. */
export function approvalRequestRoutes(
  router: Router,
  deps: ApprovalDependencies,
  authenticate: Authenticate,
  scope: string,
): void {
  const { approvals } = deps.options;
  if (!approvals) return;
  router.get(`${approvals.requestsPath}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, scope);
    ctx.body = await readRequestFor(deps, caller.clientId, ctx.params['id']!, ctx);
  });
}
