/**
 * Stopping an impersonation from the support console: the backend checks
 * that it is the engineer's own, revokes it with the Management API, and
 * later says what became of it (active, expired, or stopped by whom). A
 * console acting as a customer listens for its impersonation's stop, which
 * the identity service's webhook tells the backend of wherever it was made.
 */
import { PassThrough } from 'node:stream';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Actor } from './actor.js';
import { HttpError, readJson } from './http.js';
import type { DemoUser } from './seed.js';

/** A call of the Management API with the backend's M2M token. */
export type Management = (
  method: 'GET' | 'POST' | 'DELETE',
  target: string,
  body?: unknown,
) => Promise<{ status: number; body: Record<string, unknown> | undefined }>;

export interface StopRouteOptions {
  /** The Management API's impersonation sessions, e.g. http://localhost:3000/api/impersonations. */
  sessionsUrl: string;
  users: ReadonlyMap<string, DemoUser>;
  management: Management;
  /** The signed-in support engineer behind the request's Bearer token; 401 or 403 otherwise. */
  supportActor(ctx: Koa.Context): Promise<Actor>;
  log(line: string): void;
  listeners: StopListeners;
}

/** The consoles listening for the stop of an impersonation, by session; a few per engineer. */
export class StopListeners {
  readonly #bySession = new Map<string, Set<() => void>>();
  readonly #perActor = new Map<string, number>();

  constructor(readonly maxPerActor = 10) {}

  /** Undefined when the engineer has `maxPerActor` listening already; otherwise what removes this one. */
  add(actor: string, sessionId: string, heard: () => void): (() => void) | undefined {
    const count = this.#perActor.get(actor) ?? 0;
    if (count >= this.maxPerActor) return undefined;
    this.#perActor.set(actor, count + 1);
    const listeners = this.#bySession.get(sessionId) ?? new Set();
    this.#bySession.set(sessionId, listeners.add(heard));
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      listeners.delete(heard);
      if (!listeners.size) this.#bySession.delete(sessionId);
      const left = (this.#perActor.get(actor) ?? 1) - 1;
      if (left) this.#perActor.set(actor, left);
      else this.#perActor.delete(actor);
    };
  }

  stopped(sessionId: string): void {
    for (const heard of this.#bySession.get(sessionId) ?? []) heard();
  }
}

const SESSION_ID = /^imp_[A-Za-z0-9_-]{1,100}$/;
/** How a stop's revocation reason is worded, so that who stopped it can be told later. */
const STOPPED_BY = 'stopped in the support console by ';

export function stopRoutes(router: Router, options: StopRouteOptions): void {
  // Stop: the engineer's own impersonation is revoked through the Management API; the resource API refuses its token at once.
  router.post('/api/stop-impersonation', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await options.supportActor(ctx);
    const body = (await readJson(ctx)) as Record<string, unknown> | null;
    const session = await ownSession(options, actor, body?.['sessionId']);
    if (session['state'] === 'active') {
      const revoked = await options.management('DELETE', `${options.sessionsUrl}/${String(session['id'])}`, {
        reason: `${STOPPED_BY}${actor.sub}`,
      });
      if (revoked.status !== 204)
        throw new HttpError(502, 'bad_gateway', `the Management API answered ${revoked.status}`);
      options.log(`[backend] ${actor.sub} stopped impersonation ${String(session['id'])}`);
    }
    ctx.status = 204;
  });

  // Server-sent events: `stopped` once the impersonation is no longer active, and the stream ends.
  router.get('/api/impersonation-events', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await options.supportActor(ctx);
    const id = String(ctx.query['sessionId']);
    const stream = new PassThrough();
    stream.write(': listening\n\n');
    const heard = () => {
      if (!stream.writableEnded) stream.end('event: stopped\ndata: {}\n\n');
    };
    // Listening before reading the session: a stop made meanwhile is heard, one made before is read.
    const remove = options.listeners.add(actor.sub, id, heard);
    if (!remove) throw new HttpError(429, 'too_many_requests', 'too many consoles of yours are listening already');
    stream.once('close', remove);
    try {
      if ((await ownSession(options, actor, ctx.query['sessionId']))['state'] !== 'active') heard();
    } catch (error) {
      remove();
      throw error;
    }
    ctx.type = 'text/event-stream';
    ctx.body = stream;
  });

  // What became of an impersonation, in words the console can show: active, expired, or stopped by whom.
  router.get('/api/impersonation-status', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await options.supportActor(ctx);
    const session = await ownSession(options, actor, ctx.query['sessionId']);
    const reason = typeof session['revocationReason'] === 'string' ? session['revocationReason'] : '';
    const stopper = reason.startsWith(STOPPED_BY) ? reason.slice(STOPPED_BY.length) : undefined;
    ctx.body = {
      state: session['state'],
      expiresAt: session['expiresAt'],
      // An access grant the customer ended ended this session too: the console says who ended it.
      ...(session['state'] === 'ended'
        ? {
            endReason: session['endReason'],
            customer: options.users.get(String(session['subject']))?.name ?? String(session['subject']),
          }
        : {}),
      ...(session['state'] === 'revoked'
        ? {
            stoppedBy: stopper
              ? (options.users.get(stopper)?.name ?? stopper)
              : `the support team's administration (${String(session['revokedBy'])})`,
            ...(reason && !stopper ? { reason } : {}),
          }
        : {}),
    };
  });
}

/** The session, if this engineer started it; 404 otherwise (others' sessions are not theirs to see). */
async function ownSession(options: StopRouteOptions, actor: Actor, id: unknown): Promise<Record<string, unknown>> {
  if (typeof id !== 'string' || !SESSION_ID.test(id))
    throw new HttpError(400, 'invalid_request', 'sessionId is not an impersonation session id');
  const found = await options.management('GET', `${options.sessionsUrl}/${id}`);
  if (found.status !== 200 || found.body?.['actor'] !== actor.sub)
    throw new HttpError(404, 'not_found', 'you have no impersonation with this id');
  return found.body;
}
