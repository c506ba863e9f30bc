/**
 * One rule for capacity: no principal (an anonymous caller, a user, a
 * client) can use up a bounded or durable capacity that others' safety
 * depends on: the sessions the store keeps (a bounded memory store refuses
 * impersonations once full; Redis and PostgreSQL grow without end) and the
 * audit trail (a full memory trail refuses every impersonation; a durable
 * one only grows). Each principal gets a share of its own, counted by the
 * store in the same operation that writes (the exchange's commit,
 * `commitOnce` with `quotas`, see lib/adapters/contract.ts), so that no burst of concurrent requests gets
 * past it. The numbers and the principals are here, and only here; the
 * stores count, whatever they are charged for.
 */
import { createHash } from 'node:crypto';
import type { QuotaCharge } from './adapters/contracts/commit.js';
import { optionChecks } from './config/checks.js';
import { invalidOption, principalQuotaReached, type PrincipalQuotaReached } from './errors.js';

/** Shares that are counted per hour start again on the hour (UTC). */
export const QUOTA_WINDOW_SECONDS = 3600;

/** New delegation sessions (RFC 8693 delegation) each principal may start per hour. */
export interface DelegationLimits {
  /** From one subject token of a user's own. Its attacker: one token asked for every resource and scope there is. */
  perSubjectToken: number;
  /** From the tokens of one user, across clients. Its attacker: a user who signs in again and again. */
  perUser: number;
  /** By one client, for all its users' own tokens. Its attacker: many accounts, or a client that misbehaves. */
  perClient: number;
  /** Under one impersonation session, however deep. Its attacker: an actor, or a client it calls, that delegates without end. */
  perImpersonationSession: number;
}

export const DEFAULT_DELEGATION_LIMITS: Readonly<DelegationLimits> = Object.freeze({
  perSubjectToken: 20,
  perUser: 100,
  perClient: 5000,
  perImpersonationSession: 100,
});

const LIMIT_NAMES = Object.keys(DEFAULT_DELEGATION_LIMITS) as Array<keyof DelegationLimits>;
const MOST = 1_000_000;
const check = optionChecks('createImpersonation');

/** `delegation.limits`, checked at construction: each a whole number from 1 to 1,000,000, the rest defaulted. */
export function resolveDelegationLimits(input: unknown): Readonly<DelegationLimits> {
  if (input === undefined) return DEFAULT_DELEGATION_LIMITS;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalidOption('createImpersonation', 'delegation.limits', `must be an object of ${LIMIT_NAMES.join(', ')}`);
  }
  const given = input as Record<string, unknown>;
  for (const name of Object.keys(given)) {
    if (!(LIMIT_NAMES as string[]).includes(name)) {
      throw invalidOption(
        'createImpersonation',
        `delegation.limits.${name}`,
        `is not one of ${LIMIT_NAMES.join(', ')}`,
      );
    }
  }
  const limits = { ...DEFAULT_DELEGATION_LIMITS };
  for (const name of LIMIT_NAMES) {
    const value = given[name];
    if (value === undefined) continue;
    limits[name] = check.integer(`delegation.limits.${name}`, value, MOST);
  }
  return Object.freeze(limits);
}

/**
 * Whom a delegation is charged to. Under an impersonation (its subject token
 * belongs to an impersonation session, or to a delegation made from one):
 * that impersonation session, which an authenticated Management API caller
 * created. Otherwise, a user delegating a token of their own: the subject
 * token, the user and the client, in that order, so that a user who has used
 * up their share is refused before anything is charged to the client's.
 */
export type DelegationPrincipals =
  { impersonationSessionId: string } | { subjectTokenId: string; user: string; clientId: string };

type Principal = 'subject token' | 'user' | 'client' | 'impersonation session';

export interface DelegationCharge extends QuotaCharge {
  principal: Principal;
}

/** The store's charges for one new delegation session. */
export function delegationQuotas(
  limits: Readonly<DelegationLimits>,
  principals: DelegationPrincipals,
  now = Date.now(),
): DelegationCharge[] {
  const window = Math.floor(now / 1000 / QUOTA_WINDOW_SECONDS);
  const charge = (principal: Principal, id: string, max: number): DelegationCharge => ({
    principal,
    // A digest: ids of any length and content make keys every store holds, and name nobody in the store.
    key: `quota:${principal.replaceAll(' ', '-')}:${createHash('sha256').update(id).digest('base64url')}:${window}`,
    max,
    expiresAt: (window + 1) * QUOTA_WINDOW_SECONDS * 1000,
  });
  if ('impersonationSessionId' in principals) {
    return [charge('impersonation session', principals.impersonationSessionId, limits.perImpersonationSession)];
  }
  return [
    charge('subject token', principals.subjectTokenId, limits.perSubjectToken),
    charge('user', principals.user, limits.perUser),
    charge('client', principals.clientId, limits.perClient),
  ];
}

/**
 * The refusal for the spent quota `key` of `charges`: 429, saying whose share
 * it was and when it starts again, never whose it is.
 */
export function quotaRefusal(
  charges: readonly DelegationCharge[],
  key: string,
  now = Date.now(),
): PrincipalQuotaReached {
  const spent = charges.find((charge) => charge.key === key) ?? charges[0]!;
  const retryAfter = Math.max(1, Math.ceil((spent.expiresAt - now) / 1000));
  const whose =
    spent.principal === 'impersonation session'
      ? 'this impersonation session has'
      : spent.principal === 'subject token'
        ? 'this subject_token has'
        : spent.principal === 'user'
          ? "this user's tokens have"
          : 'this client has';
  return principalQuotaReached(
    `${whose} started as many delegations this hour as allowed (${spent.max}); ` +
      `retry in ${retryAfter} s, or use a delegated token already issued`,
    retryAfter,
  );
}
