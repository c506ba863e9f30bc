import type Router from '@koa/router';
import type { ApprovalDependencies } from '../approvals/deps.js';
import { readRequestFor } from '../approvals/requests.js';
import { authorize, type Authenticate } from '../http/auth.js';

/**
 * `GET {requestsPath}/{id}`: a backend reads an approval request it made, to
 * learn the customer's answer. Another client's request is answered as an
 * unknown one.
 */
export function approvalRequestRoutes(router: Router, deps: ApprovalDependencies, authenticate: Authenticate): void {
  const { options } = deps;
  if (!options.approvals) return;
  router.get(`${options.approvals.requestsPath}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.managementScope);
    ctx.body = await readRequestFor(deps, caller.clientId, ctx.params['id']!, ctx);
  });
}
