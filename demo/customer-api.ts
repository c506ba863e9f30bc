/**
 * The customer's data in the demo resource API: profile, orders and invoices,
 * read with `profile:read`; the shipping address changed with
 * `profile:write`. Every change is recorded with the customer and, when made
 * while impersonating, the engineer acting and the impersonation session.
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import type { ChangeRecord } from './activity.js';
import { HttpError, readJson } from './http.js';
import type { VerifiedRequest } from './resource-api.js';
import { customerSeed, type Address } from './seed.js';

export interface CustomerApi {
  /** Changes to a customer's data, oldest first. */
  changesOf(customer: string): ChangeRecord[];
}

const ADDRESS_FIELDS = { line1: 200, city: 100, postcode: 20, country: 100 } as const;
/** Changes kept per customer: the demo's memory stays bounded. */
const MAX_CHANGES = 200;

export function customerRoutes(
  router: Router,
  verifyRequest: (ctx: Koa.Context) => Promise<VerifiedRequest>,
  log: (line: string) => void,
): CustomerApi {
  const customers = customerSeed();
  const changes = new Map<string, ChangeRecord[]>();

  async function authorized(ctx: Koa.Context, scope: 'profile:read' | 'profile:write') {
    ctx.set('Cache-Control', 'no-store');
    const payload = await verifyRequest(ctx);
    const granted = typeof payload['scope'] === 'string' ? payload['scope'].split(' ') : [];
    if (!granted.includes(scope)) {
      ctx.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
      throw new HttpError(403, 'insufficient_scope', `this needs the ${scope} scope`);
    }
    const record = customers.get(payload.sub);
    if (!record) throw new HttpError(404, 'not_found', `${payload.sub} has no customer account here`);
    const act = payload['act'] as { sub?: unknown } | undefined;
    return {
      customer: payload.sub,
      record,
      ...(typeof act?.sub === 'string' ? { actor: act.sub } : {}),
      ...(typeof payload['impersonation_session'] === 'string' ? { sessionId: payload['impersonation_session'] } : {}),
    };
  }

  router.get('/api/customer', async (ctx) => {
    const { record } = await authorized(ctx, 'profile:read');
    ctx.body = record;
  });

  router.put('/api/customer/shipping-address', async (ctx) => {
    const caller = await authorized(ctx, 'profile:write');
    const address = parseAddress(await readJson(ctx));
    caller.record.profile.shippingAddress = address;
    const list = changes.get(caller.customer) ?? [];
    list.push({
      at: new Date().toISOString(),
      customer: caller.customer,
      ...(caller.actor ? { actor: caller.actor } : {}),
      ...(caller.sessionId ? { sessionId: caller.sessionId } : {}),
      what: 'changed your shipping address',
    });
    if (list.length > MAX_CHANGES) list.shift();
    changes.set(caller.customer, list);
    log(
      `[api] shipping address of ${caller.customer} changed${caller.actor ? ` by ${caller.actor} (session ${caller.sessionId ?? '?'})` : ''}`,
    );
    ctx.body = caller.record.profile;
  });

  return { changesOf: (customer) => [...(changes.get(customer) ?? [])] };
}

function parseAddress(body: unknown): Address {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(
      400,
      'invalid_request',
      'the body must be a JSON object with line1, city, postcode and country',
    );
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => !(name in ADDRESS_FIELDS));
  if (unknown.length) throw new HttpError(400, 'invalid_request', `unknown field: ${unknown.join(', ')}`);
  const read = (name: keyof typeof ADDRESS_FIELDS): string => {
    const value = fields[name];
    if (typeof value !== 'string' || !value.trim())
      throw new HttpError(400, 'invalid_request', `${name} is required (a non-empty string)`);
    if (value.length > ADDRESS_FIELDS[name])
      throw new HttpError(400, 'invalid_request', `${name} is longer than ${ADDRESS_FIELDS[name]} characters`);
    return value.trim();
  };
  return { line1: read('line1'), city: read('city'), postcode: read('postcode'), country: read('country') };
}
