import type Router from '@koa/router';
import type Koa from 'koa';
import { readJsonObject, readOptionalJsonObject, refuseUnknown } from '../http/body.js';
import {
  approveRequest,
  denyRequest,
  endAccessGrant,
  giveGrant,
  listGrants,
  listPendingRequests,
} from '../approvals/actions.js';
import type { ApprovalDependencies } from '../approvals/deps.js';
import type { ResolvedApprovalOptions } from '../approvals/options.js';
import { existing, sessionPage } from '../management/impersonations.js';
import { deniedByPolicy } from '../errors.js';
import { closeSession } from '../sessions/close.js';
import { storeCall } from '../store-call.js';
import { createCustomerCheck } from './check.js';

/** Far more than any valid body of these endpoints: a note of 500 characters is at most 2000 bytes. */
const BODY_LIMIT = 8192;

/** The customer's API below `approvals.customerPath`, each call for the customer its token names and no one else. */
export function customerRoutes(router: Router, deps: ApprovalDependencies, approvals: ResolvedApprovalOptions): void {
  const path = approvals.customerPath;
  // Authenticated by the customer's access token, never by a Management API token.
  const authorizeCustomer = createCustomerCheck(deps.bus.provider, approvals);
  /** The customer (their account id), once the request is theirs to make. The actions check the bodies. */
  async function customerOf(ctx: Koa.Context, parameters: readonly string[] = []): Promise<string> {
    const { accountId } = await authorizeCustomer(ctx);
    refuseUnknown('query parameter', ctx.query, parameters);
    return accountId;
  }

  router.get(`${path}/grants`, async (ctx) => {
    ctx.body = await listGrants(deps, await customerOf(ctx));
  });

  router.post(`${path}/grants`, async (ctx) => {
    const customer = await customerOf(ctx);
    ctx.body = await giveGrant(deps, customer, await readJsonObject(ctx, BODY_LIMIT), ctx);
    ctx.status = 201;
  });

  router.delete(`${path}/grants/:id`, async (ctx) => {
    await endAccessGrant(deps, await customerOf(ctx), ctx.params['id']!, ctx);
    ctx.status = 204;
  });

  router.get(`${path}/requests`, async (ctx) => {
    ctx.body = await listPendingRequests(deps, await customerOf(ctx));
  });

  router.post(`${path}/requests/:id/approve`, async (ctx) => {
    const customer = await customerOf(ctx);
    ctx.body = await approveRequest(deps, customer, ctx.params['id']!, await readJsonObject(ctx, BODY_LIMIT), ctx);
  });

  router.post(`${path}/requests/:id/deny`, async (ctx) => {
    const customer = await customerOf(ctx);
    // The reason is optional, and so is a body that would only carry it.
    ctx.body = await denyRequest(deps, customer, ctx.params['id']!, await readOptionalJsonObject(ctx, BODY_LIMIT), ctx);
  });

  // The customer's own sessions, whoever acts in them: listed and stopped as the Management API does.
  router.get(`${path}/sessions`, async (ctx) => {
    ctx.body = await sessionPage(deps.sessions, { subject: await customerOf(ctx, ['limit', 'cursor']) }, ctx.query);
  });

  router.delete(`${path}/sessions/:id`, async (ctx) => {
    const customer = await customerOf(ctx);
    const session = await existing(deps.sessions, ctx.params['id']!, (record) => record.subject === customer);
    // Break-glass acts without the customer's consent: they see it, the deployment's administrators stop it.
    if (session.breakGlass) throw deniedByPolicy('a break-glass session is stopped by the administrators only');
    await storeCall(() => closeSession(deps.bus, deps.sessions, session, { revokedBy: 'customer' }, ctx));
    ctx.status = 204;
  });
}
