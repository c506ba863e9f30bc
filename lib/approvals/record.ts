import { randomBytes } from 'node:crypto';
import type { JsonObject } from '../json.js';

/** Every access grant id starts with this. */
const ACCESS_GRANT_PREFIX = 'agr_';
/** Every approval request id starts with this. */
const APPROVAL_REQUEST_PREFIX = 'apr_';

/**
 * The most a customer allows support to do as them: every scope of `resource`
 * when `scope` is absent, or only those listed. An absent `resource` allows
 * any resource the exchange itself allows.
 */
export interface AccessCeiling {
  resource?: string;
  scope?: string[];
}

/**
 * Access to a customer's account that the customer gave: standing (given
 * ahead of time, from their account) or the answer to one approval request.
 * Times in seconds since the epoch.
 */
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
  /**
   * What else an approval's grant is bound to, as the request asked it and
   * the customer read it: the client that redeems the subject tokens it
   * covers, the Management API client that asked, and the creation context
   * (the ticket). Absent: not bound (a standing grant, or a deployment that
   * widened its approvals with `widenApprovedGrants`).
   */
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

export function newAccessGrantId(): string {
  return `${ACCESS_GRANT_PREFIX}${randomBytes(16).toString('base64url')}`;
}

export function newApprovalRequestId(): string {
  return `${APPROVAL_REQUEST_PREFIX}${randomBytes(16).toString('base64url')}`;
}

export function isAccessGrantId(value: string): boolean {
  return /^agr_[A-Za-z0-9_-]{22}$/.test(value);
}

export function isApprovalRequestId(value: string): boolean {
  return /^apr_[A-Za-z0-9_-]{22}$/.test(value);
}

export type GrantState = 'active' | 'ended' | 'expired';

export function grantStateOf(grant: AccessGrant, now = Date.now() / 1000): GrantState {
  if (grant.ended) return 'ended';
  return grant.expiresAt <= now ? 'expired' : 'active';
}

export function requestStateOf(request: ApprovalRequest, now = Date.now() / 1000): ApprovalState {
  if (request.answer) return request.answer.decision;
  return request.expiresAt <= now ? 'expired' : 'pending';
}
