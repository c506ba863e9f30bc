/**
 * The customer's account activity in words, from rows of the audit trail
 * (`GET /api/impersonations/events`) and the changes the demo API recorded.
 */
import { EVENTS } from '../lib/index.js';
import type { DemoUser } from './seed.js';

/** The rows the customer is shown: each access by support staff and each stop. */
export const CUSTOMER_EVENTS: readonly string[] = [
  EVENTS.exchangeSucceeded,
  EVENTS.sessionRevoked,
  EVENTS.sessionEnded,
];

/** A row of the audit trail as the Management API serves it. */
export interface TrailEvent {
  seq: number;
  at: string;
  event: string;
  subject: string | null;
  actor: string | null;
  context: unknown;
  sessionId: string | null;
  reason: string | null;
}

/** A change the demo resource API made to a customer's data. */
export interface ChangeRecord {
  at: string;
  customer: string;
  /** Who made it: the support engineer acting as the customer, or absent when it was the customer. */
  actor?: string;
  sessionId?: string;
  what: string;
}

export interface ActivityLine {
  at: string;
  text: string;
}

const DATE_FORMAT = new Intl.DateTimeFormat('en-GB', {
  day: 'numeric',
  month: 'long',
  year: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  timeZone: 'UTC',
  timeZoneName: 'short',
});

export function formatDate(iso: string): string {
  return DATE_FORMAT.format(new Date(iso));
}

/** "Alice Adams (support)" from the seed accounts; the bare id for an account the demo does not know. */
export function actorName(id: string, users: ReadonlyMap<string, DemoUser>): string {
  const user = users.get(id);
  if (!user) return id;
  return user.roles.includes('support') ? `${user.name} (support)` : user.name;
}

function ticketOf(context: unknown): string {
  if (typeof context !== 'object' || context === null) return '';
  const { ticketId, reason } = context as { ticketId?: unknown; reason?: unknown };
  const ticket = typeof ticketId === 'string' ? `ticket ${ticketId}` : '';
  const why = typeof reason === 'string' ? reason : '';
  return ticket && why ? `, ${ticket}: ${why}` : ticket || why ? `, ${ticket || why}` : '';
}

/**
 * Newest first: each access by support staff ("… accessed your account on …,
 * ticket …: …"), each stop, each change made while acting as the customer.
 */
export function activityLines(
  events: readonly TrailEvent[],
  changes: readonly ChangeRecord[],
  users: ReadonlyMap<string, DemoUser>,
): ActivityLine[] {
  const lines: ActivityLine[] = [];
  for (const event of events) {
    if (!event.actor) continue;
    const who = actorName(event.actor, users);
    if (event.event === EVENTS.exchangeSucceeded) {
      lines.push({
        at: event.at,
        text: `${who} accessed your account on ${formatDate(event.at)}${ticketOf(event.context)}`,
      });
    } else if (event.event === EVENTS.sessionRevoked || event.event === EVENTS.sessionEnded) {
      lines.push({ at: event.at, text: `Access by ${who} to your account ended on ${formatDate(event.at)}` });
    }
  }
  for (const change of changes) {
    if (!change.actor) continue;
    lines.push({ at: change.at, text: `${actorName(change.actor, users)} ${change.what} on ${formatDate(change.at)}` });
  }
  return lines.sort((a, b) => b.at.localeCompare(a.at));
}
