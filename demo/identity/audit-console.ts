/**
 * What the identity service prints of the plugin's events: one short line per
 * event an operator acts on (an impersonation asked for, refused, started,
 * withdrawn, stopped, ended; a customer's grant and answer; break-glass), in
 * words built from the event's own fields.
 * Each line starts with the event's name, as the trail and the docs name it.
 * The revocation feed's reads are left out unless asked for: every resource
 * server reads it several times a second, and its lines would bury the rest.
 */
import { EVENTS, type ImpersonationEvent, type ImpersonationEventName } from '../../lib/index.js';
import { logText as text } from '../log-text.js';

/** Events that report a read, not a change: many a second, printed only when asked for. */
export const READ_EVENTS: ReadonlySet<ImpersonationEventName> = new Set([EVENTS.revocationsServed]);

export function auditLine(name: ImpersonationEventName, event: ImpersonationEvent): string {
  return `[audit] ${name}: ${wordsOf(name, event)}`;
}

function wordsOf(name: ImpersonationEventName, event: ImpersonationEvent): string {
  const actor = text(event.actor ?? 'an unnamed actor');
  const subject = text(event.subject ?? 'an unknown user');
  const session = event.sessionId ? `, session ${event.sessionId}` : '';
  switch (name) {
    case EVENTS.subjectTokenCreated:
      return `${actor} may act as ${subject} until ${timeOf(event.expiresAt)}${ticketOf(event)} (subject token ${event.subjectTokenId ?? '?'}, asked for by ${text(event.createdBy ?? '?')})`;
    case EVENTS.subjectTokenRefused:
      return `${actor} may not act as ${subject}${ticketOf(event)}: ${refusalOf(event)}`;
    case EVENTS.exchangeSucceeded:
      return `${actor} is acting as ${subject}${ticketOf(event)}${session}, scope ${text(event.scope ?? '')}, until ${timeOf(event.expiresAt)} (client ${text(event.clientId ?? '?')})`;
    case EVENTS.exchangeRefused:
      return `${actor} was refused acting as ${subject}${session}: ${refusalOf(event)} (client ${text(event.clientId ?? '?')})`;
    case EVENTS.subjectTokenWithdrawn:
      return `subject token ${event.subjectTokenId ?? '?'} withdrawn by ${text(event.revokedBy ?? '?')}`;
    case EVENTS.sessionRevoked:
      return `${actor} no longer acts as ${subject}${session}: stopped by ${text(event.revokedBy ?? '?')}${event.reason ? ` (${text(event.reason)})` : ''}`;
    case EVENTS.sessionEnded:
      return `${actor} no longer acts as ${subject}${session}: ${text(event.endReason ?? 'ended')}`;
    case EVENTS.revocationsServed:
      return `the revocation feed listed ${event.count ?? 0} stopped sessions`;
    case EVENTS.accessGrantCreated:
      return `${subject} lets ${event.actor ? text(event.actor) : 'support'} act as them until ${timeOf(event.expiresAt)} (grant ${event.accessGrantId ?? '?'}${event.approvalRequestId ? `, approving request ${event.approvalRequestId}` : ''})`;
    case EVENTS.accessGrantEnded:
      return `${subject} ended grant ${event.accessGrantId ?? '?'}: support no longer acts as them under it`;
    case EVENTS.approvalRequested:
      return `${text(event.createdBy ?? '?')} asks ${subject} to let ${actor} act as them${ticketOf(event)} (request ${event.approvalRequestId ?? '?'}, waiting until ${timeOf(event.expiresAt)})`;
    case EVENTS.approvalApproved:
      return `${subject} approved ${actor} acting as them (request ${event.approvalRequestId ?? '?'}, grant ${event.accessGrantId ?? '?'})`;
    case EVENTS.approvalDenied:
      return `${subject} denied ${actor} acting as them (request ${event.approvalRequestId ?? '?'})${event.reason ? `: ${text(event.reason)}` : ''}`;
    case EVENTS.approvalExpired:
      return `${subject} did not answer whether ${actor} may act as them (request ${event.approvalRequestId ?? '?'} expired)`;
    case EVENTS.breakGlassUsed:
      return `${actor} may act as ${subject} without their approval${ticketOf(event)}: break-glass by ${text(event.createdBy ?? '?')} (${text(event.reason ?? '')})`;
    case EVENTS.delegationSucceeded:
      return `${actor} acts on behalf of ${subject}${session} at ${text(event.resource ?? '?')}, scope ${text(event.scope ?? '')}, until ${timeOf(event.expiresAt)} (delegation, chain of ${event.depth ?? 1})`;
    case EVENTS.delegationRefused:
      return `${actor} was refused acting on behalf of ${subject}: ${refusalOf(event)} (client ${text(event.clientId ?? '?')})`;
    case EVENTS.idJagIssued:
      return `client ${text(event.clientId ?? '?')} may act for ${subject} at ${text(event.resource ?? '?')}${session} until ${timeOf(event.expiresAt)}, by an identity assertion issued here`;
    case EVENTS.idJagRedeemed:
      return `client ${text(event.clientId ?? '?')} acts for ${subject} at ${text(event.resource ?? '?')} until ${timeOf(event.expiresAt)}, by an identity assertion of ${text(String(event.context?.['issuer'] ?? '?'))}`;
  }
}

function ticketOf(event: ImpersonationEvent): string {
  const ticket = event.context?.['ticketId'];
  return typeof ticket === 'string' ? `, ticket ${text(ticket)}` : '';
}

function refusalOf(event: ImpersonationEvent): string {
  return `${text(event.error ?? 'refused')}${event.reason ? ` (${text(event.reason)})` : ''}`;
}

function timeOf(seconds: number | undefined): string {
  return seconds === undefined ? '?' : new Date(seconds * 1000).toISOString().replace(/\.000Z$/, 'Z');
}
