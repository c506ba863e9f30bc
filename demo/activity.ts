/**
 * The customer's account activity in words, from rows of the audit trail
 * (`GET /api/impersonations/events`) and the changes the demo API recorded.
 */
import { EVENTS } from '../lib/index.js';
import type { DemoUser } from './seed.js';

/**
 * The rows the customer is shown: each access by support staff and each
 * stop; the access they gave and ended, the requests they denied; each
 * break-glass, which marks the access it allowed as an emergency.
 */
export const CUSTOMER_EVENTS: readonly string[] = [
  EVENTS.exchangeSucceeded,
  EVENTS.sessionRevoked,
  EVENTS.sessionEnded,
  EVENTS.accessGrantCreated,
  EVENTS.accessGrantEnded,
  EVENTS.approvalDenied,
  EVENTS.breakGlassUsed,
];

/** A row of the audit trail as the Management API serves it. */
export interface TrailEvent {
  seq: number;
  at: string;
  event: string;
  subject: string | null;
  actor: string | null;
  scope?: string | null;
  context: unknown;
  /** The subject token behind an access, and behind a break-glass: how the two are matched. */
  subjectTokenId?: string | null;
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
  /** Support came in without the customer's approval (break-glass): the page marks it. */
  emergency?: true;
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

/** ", ticket T-1234: Cannot see the invoices" from a request's context; empty when it names neither. */
export function ticketOf(context: unknown): string {
  if (typeof context !== 'object' || context === null) return '';
  const { ticketId, reason } = context as { ticketId?: unknown; reason?: unknown };
  const ticket = typeof ticketId === 'string' ? `ticket ${ticketId}` : '';
  const why = typeof reason === 'string' ? reason : '';
  return ticket && why ? `, ${ticket}: ${why}` : ticket || why ? `, ${ticket || why}` : '';
}

/** "see" or "see and change": what a grant's scopes (space-separated, or none: anything) let support do. */
function grantAccess(scope: string | null | undefined): string {
  return !scope || scope.split(' ').includes('profile:write') ? 'see and change' : 'see';
}

/**
 * Newest first: each access by support staff ("… accessed your account on …,
 * ticket …: …"), marked when it came without the customer's approval; each
 * stop; the access the customer gave and ended, the requests they denied;
 * each change made while acting as the customer.
 */
export function activityLines(
  events: readonly TrailEvent[],
  changes: readonly ChangeRecord[],
  users: ReadonlyMap<string, DemoUser>,
): ActivityLine[] {
  const lines: ActivityLine[] = [];
  // The break-glass behind each subject token: the access it allowed is an emergency access.
  const emergencies = new Map<string, TrailEvent>();
  for (const event of events) {
    if (event.event === EVENTS.breakGlassUsed && event.subjectTokenId) emergencies.set(event.subjectTokenId, event);
  }
  const used = new Set<string>();
  for (const event of events) {
    const who = event.actor ? actorName(event.actor, users) : undefined;
    const on = formatDate(event.at);
    switch (event.event) {
      case EVENTS.exchangeSucceeded: {
        if (!who) break;
        const emergency = event.subjectTokenId ? emergencies.get(event.subjectTokenId) : undefined;
        if (emergency && event.subjectTokenId) used.add(event.subjectTokenId);
        lines.push({
          at: event.at,
          text: `${who} accessed your account on ${on}${ticketOf(event.context)}${emergency ? `, without your approval: ${emergency.reason ?? 'no reason given'}` : ''}`,
          ...(emergency ? { emergency: true as const } : {}),
        });
        break;
      }
      case EVENTS.sessionRevoked:
      case EVENTS.sessionEnded:
        if (who) lines.push({ at: event.at, text: `Access by ${who} to your account ended on ${on}` });
        break;
      case EVENTS.accessGrantCreated:
        lines.push({
          at: event.at,
          text: `You let ${who ?? 'anyone in support'} ${grantAccess(event.scope)} your account, on ${on}`,
        });
        break;
      case EVENTS.accessGrantEnded:
        lines.push({ at: event.at, text: `You ended the access you gave ${who ?? 'support'} on ${on}` });
        break;
      case EVENTS.approvalDenied:
        if (who)
          lines.push({
            at: event.at,
            text: `You denied ${who} access to your account on ${on}${ticketOf(event.context)}`,
          });
        break;
    }
  }
  // A break-glass whose subject token was not (yet) used: the customer still learns of it.
  for (const [subjectTokenId, event] of emergencies) {
    if (used.has(subjectTokenId) || !event.actor) continue;
    lines.push({
      at: event.at,
      text: `${actorName(event.actor, users)} was let into your account without your approval on ${formatDate(event.at)}${ticketOf(event.context)}: ${event.reason ?? 'no reason given'}`,
      emergency: true,
    });
  }
  for (const change of changes) {
    if (!change.actor) continue;
    lines.push({ at: change.at, text: `${actorName(change.actor, users)} ${change.what} on ${formatDate(change.at)}` });
  }
  return lines.sort((a, b) => b.at.localeCompare(a.at));
}
