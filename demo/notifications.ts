/**
 * The customers' notifications: "Alice from support started acting as you
 * (ticket T-1234) at 16:49 UTC on 22 November 2026", on their account page
 * seconds later. The identity service's webhooks (the plugin's `webhooks`
 * option) deliver each impersonation started and stopped to the backend's
 * receiver, which checks the delivery as Standard Webhooks signs it, then
 * keeps the notification in the customer's inbox.
 *
 * What the receiver refuses: a delivery without the three headers (400), a
 * signature that is not the HMAC of the demo's secret over
 * `<webhook-id>.<webhook-timestamp>.<body>` (401), a timestamp further than
 * `tolerance` from now (401: a captured delivery cannot be replayed later).
 * A delivery whose id it has already seen is acknowledged (204) and not kept
 * again: a replay adds nothing, and a delivery that arrived twice (the
 * sender delivers at least once) is not retried for ever. Everything it
 * keeps is bounded: the ids seen, the notifications per customer, and the
 * customers; only a signed delivery adds to them.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import { LRUCache } from 'lru-cache';
import { EVENTS } from '../lib/index.js';

/** What the customer is told of: an impersonation started or stopped (the approvals they answer themselves). */
const NOTIFIED = [EVENTS.exchangeSucceeded, EVENTS.sessionRevoked, EVENTS.sessionEnded];
import { HttpError, readRawBody } from './http.js';
import { logText } from './log-text.js';
import { AGENT_NAMES, type DemoUser } from './seed.js';

/** Where the identity service delivers: the backend's receiver. */
export const WEBHOOK_PATH = '/api/webhooks/impersonation';

export interface NotificationLimits {
  /** How far a delivery's `webhook-timestamp` may be from now, seconds. Default 300. */
  tolerance?: number;
  /** Delivery ids remembered, to recognise one delivered again. Default 10,000. */
  maxSeen?: number;
  /** Notifications kept per customer, the newest. Default 20. */
  perCustomer?: number;
  /** Customers whose notifications are kept, the most recently notified. Default 10,000. */
  maxCustomers?: number;
}

export interface Notification {
  /** The delivery's `webhook-id`. */
  id: string;
  /** When it happened (the payload's timestamp), ISO 8601. */
  at: string;
  text: string;
}

export interface NotificationOptions {
  /** The subscription's secret: `whsec_` and base64. */
  secret: string;
  users: ReadonlyMap<string, DemoUser>;
  log(line: string): void;
  limits?: NotificationLimits;
  /** Told of each impersonation that stopped, by its session: the consoles acting under it hear it. */
  stopped(sessionId: string): void;
}

/** Far more than a payload: its context is a ticket and a reason. */
const BODY_LIMIT = 64 * 1024;
const DELIVERY_ID = /^[A-Za-z0-9_.-]{1,128}$/;
const TIMESTAMP = /^\d{1,12}$/;
const MAX_TICKET = 100;

const TIME_FORMAT = new Intl.DateTimeFormat('en-GB', {
  hour: '2-digit',
  minute: '2-digit',
  timeZone: 'UTC',
  timeZoneName: 'short',
});
const DAY_FORMAT = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'long',
  year: 'numeric',
  timeZone: 'UTC',
});

/** The notifications of each customer, newest first, bounded; and the delivery ids seen. */
export class NotificationInbox {
  readonly #perCustomer: number;
  readonly #inboxes: LRUCache<string, Notification[]>;
  readonly #seen: LRUCache<string, true>;

  constructor(limits: NotificationLimits = {}) {
    this.#perCustomer = limits.perCustomer ?? 20;
    this.#inboxes = new LRUCache({ max: limits.maxCustomers ?? 10_000 });
    this.#seen = new LRUCache({ max: limits.maxSeen ?? 10_000 });
  }

  of(customer: string): Notification[] {
    return [...(this.#inboxes.peek(customer) ?? [])];
  }

  /** False when the id was seen already: nothing is kept again. */
  add(customer: string, notification: Notification): boolean {
    if (this.#seen.has(notification.id)) return false;
    this.#seen.set(notification.id, true);
    const inbox = [notification, ...(this.#inboxes.peek(customer) ?? [])];
    inbox.sort((a, b) => b.at.localeCompare(a.at));
    this.#inboxes.set(customer, inbox.slice(0, this.#perCustomer));
    return true;
  }
}

export function notificationRoutes(router: Router, inbox: NotificationInbox, options: NotificationOptions): void {
  const key = Buffer.from(options.secret.replace(/^whsec_/, ''), 'base64');
  const tolerance = options.limits?.tolerance ?? 300;

  router.post(WEBHOOK_PATH, async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const id = ctx.get('webhook-id');
    const timestamp = ctx.get('webhook-timestamp');
    const signature = ctx.get('webhook-signature');
    if (!DELIVERY_ID.test(id) || !TIMESTAMP.test(timestamp) || !signature) {
      throw new HttpError(400, 'invalid_request', 'webhook-id, webhook-timestamp and webhook-signature are required');
    }
    const body = await readRawBody(ctx, BODY_LIMIT);
    if (!signatureMatches(key, id, timestamp, body, signature)) {
      options.log('[backend] webhook refused: its signature does not match');
      throw new HttpError(401, 'invalid_signature', 'the signature does not match');
    }
    // Checked once the signature holds: the timestamp is signed, so it cannot be moved forward.
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > tolerance) {
      options.log('[backend] webhook refused: its timestamp is too far from now');
      throw new HttpError(401, 'invalid_signature', 'the timestamp is too far from now');
    }
    let payload: unknown;
    try {
      payload = JSON.parse(body.toString('utf8'));
    } catch {
      throw new HttpError(400, 'invalid_request', 'the body is not JSON');
    }
    const { type, data } = (payload ?? {}) as { type?: unknown; data?: { sessionId?: unknown } };
    if ((type === EVENTS.sessionRevoked || type === EVENTS.sessionEnded) && typeof data?.sessionId === 'string')
      options.stopped(data.sessionId);
    const notification = notificationOf(payload, id, options.users);
    if (notification && !inbox.add(notification.customer, notification)) {
      options.log(`[backend] webhook ${id} was delivered before: not kept again`);
    } else if (notification) {
      options.log(`[backend] notification for ${logText(notification.customer)}: ${logText(notification.text)}`);
    }
    ctx.status = 204;
  });
}

/** Whether one of the header's `v1,<base64>` signatures is the HMAC of the key over `<id>.<timestamp>.<body>`. */
function signatureMatches(key: Buffer, id: string, timestamp: string, body: Buffer, header: string): boolean {
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  return header.split(' ').some((candidate) => {
    const comma = candidate.indexOf(',');
    if (candidate.slice(0, comma) !== 'v1') return false;
    const given = Buffer.from(candidate.slice(comma + 1), 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** The notification a payload makes, for whom; undefined for an event the customer is not told of. */
function notificationOf(
  payload: unknown,
  id: string,
  users: ReadonlyMap<string, DemoUser>,
): (Notification & { customer: string }) | undefined {
  const { type, timestamp, data } = (payload ?? {}) as { type?: unknown; timestamp?: unknown; data?: unknown };
  if (!(NOTIFIED as readonly unknown[]).includes(type)) return undefined;
  const fields = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
  const at = typeof timestamp === 'string' ? new Date(timestamp) : new Date(Number.NaN);
  if (typeof fields['subject'] !== 'string' || Number.isNaN(at.getTime()))
    throw new HttpError(400, 'invalid_request', 'the payload names no customer or no time');
  const actor = typeof fields['actor'] === 'string' ? fields['actor'] : undefined;
  const agent = typeof fields['clientId'] === 'string' ? AGENT_NAMES.get(fields['clientId']) : undefined;
  if (actor === undefined && agent !== undefined && type !== EVENTS.exchangeSucceeded) {
    // An agent's ID-JAG stopped: no one from support was involved.
    const application = typeof fields['resource'] === 'string' ? fields['resource'] : 'another application';
    return {
      customer: fields['subject'],
      id,
      at: at.toISOString(),
      text: `${agent} stopped acting for you at ${AGENT_NAMES.get(application) ?? application} at ${TIME_FORMAT.format(at)} on ${DAY_FORMAT.format(at)}`,
    };
  }
  const user = actor === undefined ? undefined : users.get(actor);
  const who = user?.roles.includes('support')
    ? `${user.name.split(' ')[0]} from support`
    : actor === undefined
      ? 'Someone from support'
      : `${actor} from support`;
  const context = fields['context'] as { ticketId?: unknown } | undefined;
  const ticket = typeof context?.ticketId === 'string' ? ` (ticket ${context.ticketId.slice(0, MAX_TICKET)})` : '';
  const what = type === EVENTS.exchangeSucceeded ? 'started' : 'stopped';
  return {
    customer: fields['subject'],
    id,
    at: at.toISOString(),
    text: `${who} ${what} acting as you${ticket} at ${TIME_FORMAT.format(at)} on ${DAY_FORMAT.format(at)}`,
  };
}
