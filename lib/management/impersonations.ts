import type Router from '@koa/router';
import type Koa from 'koa';
import type { IndexEntry } from '../adapters/contracts/indexes.js';
import { announce } from '../events/publish.js';
import type { EventBus } from '../events/subscriber.js';
import { EVENTS, type ImpersonationEventName } from '../event-types.js';
import { badRequest, notFound } from '../errors.js';
import { authorize, type Authenticate } from '../http/auth.js';
import { readOptionalJsonObject, refuseUnknown } from '../http/body.js';
import type { ResolvedOptions } from '../options.js';
import { closeSession } from '../sessions/close.js';
import { isSessionId, viewOf, type SessionRecord } from '../sessions/record.js';
import type { SessionFilter, SessionStore } from '../sessions/store.js';
import { isStorableText } from '../storable-text.js';
import { isIdentifier, readText } from '../approvals/input.js';
import { storeCall } from '../store-call.js';

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;
const LIST_PARAMETERS = ['subject', 'actor', 'clientId', 'limit', 'cursor'];

/** The impersonation sessions: list, read, revoke (opaque tokens at once, JWTs through the feed), and the revocation feed. */
export function impersonationRoutes(
  router: Router,
  bus: EventBus,
  options: ResolvedOptions,
  sessions: SessionStore,
  authenticate: Authenticate,
): void {
  const path = options.sessionsPath;

  // Public, as the JWKS is: it lists random ids and only ever makes a resource server refuse more.
  router.get(`${path}/revocations`, async (ctx) => {
    const after = readCursor(ctx.query['cursor'], FEED_PARAMETERS, ctx.query);
    const limit = readLimit(ctx.query['limit'], MAX_PAGE_OF_REVOCATIONS, MAX_PAGE_OF_REVOCATIONS);
    const entries = await storeCall(() => sessions.closedSince(after, limit));
    const last = entries.at(-1);
    ctx.body = {
      revoked: entries.map((entry) => ({ id: entry.member, expiresAt: Math.ceil(entry.expiresAt / 1000) })),
      nextCursor: entries.length === limit && last ? cursorOf(last) : null,
    };
    announce(bus.provider, { name: EVENTS.revocationsServed, count: entries.length }, ctx);
  });

  // What a customer can be shown of who acted on their account: the audit trail, by subject or actor.
  const trail = options.auditLog;
  if (trail?.query) {
    const query = trail.query.bind(trail);
    // Its first read may create the trail, so one with no row yet reads as empty.
    const { migrate } = trail as { migrate?: unknown };
    router.get(`${path}/events`, async (ctx) => {
      await authorize(ctx, authenticate, options.readScope);
      refuseUnknown('query parameter', ctx.query, ['subject', 'actor', 'event', 'since', 'until', 'limit', 'cursor']);
      const filter = readFilter(ctx.query);
      const cursor = ctx.query['cursor'];
      if (cursor !== undefined && (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]{1,40}$/.test(cursor)))
        throw badRequest('cursor is not one this API returned');
      ctx.body = await storeCall(async () => {
        if (typeof migrate === 'function') await (migrate as () => Promise<void>).call(trail);
        try {
          return await query({
            ...filter,
            ...readEvents(ctx.query['event']),
            ...readTime(ctx.query, 'since'),
            ...readTime(ctx.query, 'until'),
            limit: readLimit(ctx.query['limit']),
            ...(cursor === undefined ? {} : { cursor }),
          });
        } catch (error) {
          if (error instanceof TypeError) throw badRequest(error.message);
          throw error;
        }
      });
    });
  }

  router.get(path, async (ctx) => {
    await authorize(ctx, authenticate, options.readScope);
    ctx.body = await sessionPage(sessions, readFilter(ctx.query), ctx.query);
  });

  router.get(`${path}/:id`, async (ctx) => {
    await authorize(ctx, authenticate, options.readScope);
    ctx.body = viewOf(await existing(sessions, ctx.params['id']!));
  });

  router.delete(`${path}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.revokeScope);
    const body = await readOptionalJsonObject(ctx, 4096);
    refuseUnknown('field', body, ['reason']);
    const reason = readText(body['reason'], 'reason');
    const record = await existing(sessions, ctx.params['id']!);
    await storeCall(() => closeSession(bus, sessions, record, { revokedBy: caller.clientId, reason }, ctx));
    ctx.status = 204;
  });
}

/** Revoked ids one feed page lists, at most and by default. */
const MAX_PAGE_OF_REVOCATIONS = 1000;
const FEED_PARAMETERS = ['cursor', 'limit'];

/** A page of the active sessions `filter` names, as `query` asks: `limit`, `cursor`, and nothing but LIST_PARAMETERS. */
export async function sessionPage(sessions: SessionStore, filter: SessionFilter, query: Koa.Context['query']) {
  const limit = readLimit(query['limit']);
  const after = readCursor(query['cursor'], LIST_PARAMETERS, query);
  const page = await storeCall(() => sessions.list(filter, limit, after));
  return { items: page.items.map(viewOf), nextCursor: page.next ? cursorOf(page.next) : null };
}

/** The session `id`, if `isVisible` lets the caller see it; any other is answered exactly as an unknown id. */
export async function existing(sessions: SessionStore, id: string, isVisible = (_session: SessionRecord) => true) {
  const record = isSessionId(id) ? await storeCall(() => sessions.find(id)) : undefined;
  if (!record || !isVisible(record)) throw notFound('not_found', 'no impersonation session has this id');
  return record;
}

function readFilter(query: Koa.Context['query']): SessionFilter {
  const filter: SessionFilter = {};
  for (const name of ['subject', 'actor', 'clientId'] as const) {
    const value = query[name];
    if (value === undefined) continue;
    if (!isIdentifier(value)) throw badRequest(`${name} must be given once, as a non-empty string`);
    filter[name] = value;
  }
  return filter;
}

const EVENT_NAMES: ReadonlySet<string> = new Set(Object.values(EVENTS));

/** `event`, repeated for several: only rows of those events. */
function readEvents(value: unknown): { events?: ImpersonationEventName[] } {
  if (value === undefined) return {};
  const names = Array.isArray(value) ? value : [value];
  if (names.some((name) => typeof name !== 'string' || !EVENT_NAMES.has(name)))
    throw badRequest(`event must name impersonation events: ${[...EVENT_NAMES].join(', ')}`);
  return { events: [...new Set(names as ImpersonationEventName[])] };
}

function readTime(query: Koa.Context['query'], name: 'since' | 'until'): { since?: Date; until?: Date } {
  const value = query[name];
  if (value === undefined) return {};
  const time = typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(value) ? new Date(value) : undefined;
  if (!time || Number.isNaN(time.getTime())) throw badRequest(`${name} must be an RFC 3339 time`);
  return { [name]: time };
}

function readLimit(value: unknown, fallback = DEFAULT_LIMIT, max = MAX_LIMIT): number {
  if (value === undefined) return fallback;
  const limit = typeof value === 'string' && /^[1-9][0-9]{0,3}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= max)) throw badRequest(`limit must be an integer from 1 to ${max}`);
  return limit;
}

/** Cursors are opaque to callers: a position in an index, base64url JSON. */
function cursorOf(position: IndexEntry): string {
  return Buffer.from(JSON.stringify([position.expiresAt, position.member])).toString('base64url');
}

function readCursor(value: unknown, allowed: readonly string[], query: Koa.Context['query']): IndexEntry | undefined {
  refuseUnknown('query parameter', query, allowed);
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > 200) throw badRequest('cursor is not one this API returned');
  try {
    const [expiresAt, member] = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown[];
    const isMember = typeof member === 'string' && member.length <= 64 && isStorableText(member);
    if (Number.isSafeInteger(expiresAt) && isMember) return { expiresAt: expiresAt as number, member };
  } catch {
    // Reported below.
  }
  throw badRequest('cursor is not one this API returned');
}
