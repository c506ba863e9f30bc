import type Router from '@koa/router';
import type Koa from 'koa';
import type { JsonObject } from '../json.js';
import { readJsonObject } from '../management/body.js';
import { badRequest, isIdentifier } from '../management/http.js';
import {
  approveRequest,
  denyRequest,
  endAccessGrant,
  giveGrant,
  listGrants,
  listPendingRequests,
  type ApprovalDeps,
} from './actions.js';
import type { Customer } from './customer.js';

/** Far more than any valid body of these endpoints: a note of 500 characters is at most 2000 bytes. */
const BODY_LIMIT = 8192;
const MAX_TEXT = 500;
const MAX_SCOPES = 100;
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * The customer's API, below `approvals.customerPath`, each call for the
 * customer the access token names and no one else:
 * `GET /grants`, `POST /grants`, `DELETE /grants/{id}`,
 * `GET /requests`, `POST /requests/{id}/approve`, `POST /requests/{id}/deny`.
 */
export function customerRoutes(
  router: Router,
  path: string,
  deps: Omit<ApprovalDeps, 'ctx'>,
  authorizeCustomer: (ctx: Koa.Context) => Promise<Customer>,
): void {
  /** The customer, once the request is theirs to make; the request's own deps. */
  async function caller(ctx: Koa.Context): Promise<{ customer: string; deps: ApprovalDeps }> {
    const { accountId } = await authorizeCustomer(ctx);
    const unknown = Object.keys(ctx.query);
    if (unknown.length) throw badRequest(`unknown query parameter: ${unknown.join(', ')}`);
    return { customer: accountId, deps: { ...deps, ctx } };
  }

  router.get(`${path}/grants`, async (ctx) => {
    const call = await caller(ctx);
    ctx.body = { items: await listGrants(call.deps, call.customer) };
  });

  router.post(`${path}/grants`, async (ctx) => {
    const call = await caller(ctx);
    const body = fields(await readJsonObject(ctx, BODY_LIMIT), ['duration', 'scope', 'resource', 'actorId', 'note']);
    const { actorId, resource } = body;
    if (actorId !== undefined && !isIdentifier(actorId)) throw badRequest('actorId must be a non-empty string');
    if (resource !== undefined && !isResourceIndicator(resource)) {
      throw badRequest('resource must be an absolute URI without a fragment');
    }
    ctx.body = await giveGrant(call.deps, call.customer, {
      duration: duration(body),
      ...scope(body),
      ...(resource === undefined ? {} : { resource }),
      ...(actorId === undefined ? {} : { actorId }),
      ...text(body, 'note'),
    });
    ctx.status = 201;
  });

  router.delete(`${path}/grants/:id`, async (ctx) => {
    const call = await caller(ctx);
    await endAccessGrant(call.deps, call.customer, ctx.params['id']!);
    ctx.status = 204;
  });

  router.get(`${path}/requests`, async (ctx) => {
    const call = await caller(ctx);
    ctx.body = { items: await listPendingRequests(call.deps, call.customer) };
  });

  router.post(`${path}/requests/:id/approve`, async (ctx) => {
    const call = await caller(ctx);
    const body = fields(await readJsonObject(ctx, BODY_LIMIT), ['duration', 'scope']);
    ctx.body = await approveRequest(call.deps, call.customer, ctx.params['id']!, {
      duration: duration(body),
      ...scope(body),
    });
  });

  router.post(`${path}/requests/:id/deny`, async (ctx) => {
    const call = await caller(ctx);
    // The reason is optional, and so is a body that would only carry it.
    const sent = ctx.request.length || ctx.get('transfer-encoding');
    const body = sent ? fields(await readJsonObject(ctx, BODY_LIMIT), ['reason']) : {};
    ctx.body = await denyRequest(call.deps, call.customer, ctx.params['id']!, text(body, 'reason'));
  });
}

function fields(body: JsonObject, allowed: readonly string[]): JsonObject {
  const unknown = Object.keys(body).filter((name) => !allowed.includes(name));
  if (unknown.length) throw badRequest(`unknown field: ${unknown.join(', ')}`);
  return body;
}

function duration(body: JsonObject): number {
  const { duration: seconds } = body;
  if (typeof seconds !== 'number' || !Number.isSafeInteger(seconds) || seconds < 1) {
    throw badRequest('duration must be a positive integer number of seconds');
  }
  return seconds;
}

/** The scope names, each once; a ceiling of no scope at all would allow nothing, so it is refused. */
function scope(body: JsonObject): { scope?: string[] } {
  const { scope: names } = body;
  if (names === undefined) return {};
  if (
    !Array.isArray(names) ||
    !names.length ||
    names.length > MAX_SCOPES ||
    names.some((name) => typeof name !== 'string' || !SCOPE_TOKEN.test(name))
  ) {
    throw badRequest(`scope must be a non-empty array of at most ${MAX_SCOPES} scope names`);
  }
  return { scope: [...new Set(names as string[])] };
}

/** An optional text of the customer's: non-empty, at most 500 characters, kept without its outer white space. */
function text<Name extends 'note' | 'reason'>(body: JsonObject, name: Name): { [key in Name]?: string } {
  const value = body[name];
  if (value === undefined) return {};
  if (typeof value !== 'string' || !value.trim() || value.trim().length > MAX_TEXT) {
    throw badRequest(`${name} must be a non-empty string of at most ${MAX_TEXT} characters`);
  }
  return { [name]: value.trim() } as { [key in Name]?: string };
}

function isResourceIndicator(value: unknown): value is string {
  if (!isIdentifier(value)) return false;
  const url = URL.parse(value);
  return url !== null && !url.hash && !value.includes('#');
}
