import { randomBytes } from 'node:crypto';
import type { JsonObject } from '../json.js';

/** The most a customer allows: every scope of `resource` when `scope` is absent; absent `resource`: any. */
export interface AccessCeiling {
  resource?: string;
  scope?: string[];
}

/** Access a customer gave: standing, or an approved request's. Times in seconds since the epoch. */
export interface AccessGrant extends AccessCeiling {
  id: string;
  /** The customer (account id) whose account it opens. */
  subject: string;
  /** Only this actor (account id) may use it; absent: any actor the deployment allows. */
  actor?: string;
  /** The customer's words for support, shown back to them and to support. */
  note?: string;
  /** `approval` for the grant an approved request became. */
  origin: 'customer' | 'approval';
  approvalRequestId?: string;
  /** What an approval's grant is bound to as the customer read it (client, caller, context); absent: not bound. */
  clientId?: string;
  requestedBy?: string;
  context?: JsonObject;
  createdAt: number;
  expiresAt: number;
  ended?: { at: number; by: 'customer' | 'expiry' };
}

export type ApprovalDecision = 'approved' | 'denied' | 'expired';
export type ApprovalState = 'pending' | ApprovalDecision;

/** A backend's ask to act as a customer, waiting for the customer's answer. */
export interface ApprovalRequest extends AccessCeiling {
  id: string;
  subject: string;
  /** Who would act: a customer approves a person, never "someone". */
  actor: string;
  /** The Management API caller's client that asked. */
  requestedBy: string;
  /** The client that would exchange the subject token, when the request named it. */
  clientId?: string;
  /** Ticket, reason and the rest of the creation context, as the customer sees them. */
  context: JsonObject;
  createdAt: number;
  /** Until when it waits for an answer. */
  expiresAt: number;
  answer?: { at: number; decision: ApprovalDecision; grantId?: string; reason?: string };
}

/** Grant (`agr_`) and request (`apr_`) ids: the prefix, then 16 random bytes as base64url. */
const newIdOf = (prefix: string) => (): string => `${prefix}_${randomBytes(16).toString('base64url')}`;
const isIdOf = (prefix: string) => (value: string) => new RegExp(`^${prefix}_[A-Za-z0-9_-]{22}$`).test(value);

export const newAccessGrantId = newIdOf('agr');
export const newApprovalRequestId = newIdOf('apr');
export const isAccessGrantId = isIdOf('agr');
export const isApprovalRequestId = isIdOf('apr');

export type GrantState = 'active' | 'ended' | 'expired';

export function grantStateOf(grant: AccessGrant, now = Date.now() / 1000): GrantState {
  if (grant.ended) return 'ended';
  return grant.expiresAt <= now ? 'expired' : 'active';
}

export function requestStateOf(request: ApprovalRequest, now = Date.now() / 1000): ApprovalState {
  if (request.answer) return request.answer.decision;
  return request.expiresAt <= now ? 'expired' : 'pending';
}
