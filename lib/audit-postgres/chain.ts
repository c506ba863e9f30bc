import { createHash } from 'node:crypto';
import type { ImpersonationEvent, ImpersonationEventName } from '../audit.js';

/** The hash the chain starts from: the `prev_hash` of row 1. */
export const GENESIS = '0'.repeat(64);

/** One row of the trail: what it says, as typed columns and as the canonical text its hash covers. */
export interface AuditRow {
  at: string;
  event: string;
  subject: string | null;
  actor: string | null;
  clientId: string | null;
  resource: string | null;
  scope: string | null;
  context: unknown;
  subjectTokenId: string | null;
  sessionId: string | null;
  accessTokenId: string | null;
  outcome: string;
  reason: string | null;
}

/** The fields of a row, in the order the canonical text lists them. */
const FIELDS = [
  'at', 'event', 'subject', 'actor', 'clientId', 'resource', 'scope', 'context',
  'subjectTokenId', 'sessionId', 'accessTokenId', 'outcome', 'reason',
] as const;

export function rowOf(name: ImpersonationEventName, event: ImpersonationEvent, at = new Date()): AuditRow {
  return {
    at: at.toISOString(),
    event: name,
    subject: event.subject ?? null,
    actor: event.actor ?? null,
    clientId: event.clientId ?? null,
    resource: event.resource ?? null,
    scope: event.scope ?? null,
    context: event.context ?? null,
    subjectTokenId: event.subjectTokenId ?? null,
    sessionId: event.sessionId ?? null,
    accessTokenId: event.accessTokenId ?? null,
    outcome: outcomeOf(name),
    reason: event.error !== undefined
      ? `${event.error}: ${event.reason ?? ''}`
      : event.reason ?? event.endReason ?? null,
  };
}

function outcomeOf(name: ImpersonationEventName): string {
  if (name.endsWith('.refused')) return 'refused';
  if (name.endsWith('.revoked') || name.endsWith('.withdrawn')) return 'revoked';
  if (name.endsWith('.ended')) return 'ended';
  return 'success';
}

/**
 * The text a row's hash covers: a JSON array of its fields in a fixed order,
 * objects with their keys sorted, so that the same row always gives the same
 * text whatever produced it.
 */
export function canonicalContent(row: AuditRow): string {
  return canonicalJson(FIELDS.map((field) => row[field]));
}

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>).sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(',')}}`;
}

/** Each row's hash covers its number, its canonical text and the previous row's hash. */
export function rowHash(previousHash: string, seq: number | bigint | string, content: string): string {
  return createHash('sha256').update(`${previousHash}:${seq}:${content}`, 'utf8').digest('hex');
}

/** A row as its canonical text says it, for comparing with its typed columns. */
export function rowFromContent(content: string): AuditRow {
  const values = JSON.parse(content) as unknown[];
  if (!Array.isArray(values) || values.length !== FIELDS.length) throw new Error('not a row of this trail');
  return Object.fromEntries(FIELDS.map((field, index) => [field, values[index]])) as unknown as AuditRow;
}
