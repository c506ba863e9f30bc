/** Invariant 50: each principal's share, counted in the write. */
import { createHash } from 'node:crypto';
import { optionChecks } from './config/checks.js';
import { principalQuotaReached, type PrincipalQuotaReached } from './errors.js';

/** One principal's share: counter `key` takes at most `max` charges until `expiresAt` (ms), set by its first charge. */
export interface QuotaCharge {
  key: string;
  max: number;
  expiresAt: number;
}

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
    check.fail('delegation.limits', `must be an object of ${LIMIT_NAMES.join(', ')}`);
  }
  const given = input as Record<string, unknown>;
  const unknown = Object.keys(given).find((name) => !(LIMIT_NAMES as string[]).includes(name));
  if (unknown !== undefined) check.fail(`delegation.limits.${unknown}`, `is not one of ${LIMIT_NAMES.join(', ')}`);
  const limits = { ...DEFAULT_DELEGATION_LIMITS };
  for (const name of LIMIT_NAMES) {
    limits[name] = check.integerOr(`delegation.limits.${name}`, given[name], DEFAULT_DELEGATION_LIMITS[name], MOST);
  }
  return Object.freeze(limits);
}

/** Whom a delegation is charged to: its impersonation session, or the subject token, the user and the client, in that order. */
export type DelegationPrincipals =
  { impersonationSessionId: string } | { subjectTokenId: string; user: string; clientId: string };

type Principal =
  | 'subject token'
  | 'user'
  | 'client'
  | 'impersonation session'
  | 'ID-JAG assertion'
  | 'ID-JAG issuer'
  | 'ID-JAG issuer stops'
  | 'ID-JAG client'
  | 'ID-JAG user'
  | 'ID-JAG requester';

export interface DelegationCharge extends QuotaCharge {
  principal: Principal;
}

/** The store's charges for one new delegation session. */
export function delegationQuotas(
  limits: Readonly<DelegationLimits>,
  principals: DelegationPrincipals,
  now = Date.now(),
): DelegationCharge[] {
  if ('impersonationSessionId' in principals) {
    return [charge('impersonation session', principals.impersonationSessionId, limits.perImpersonationSession, now)];
  }
  return [
    charge('subject token', principals.subjectTokenId, limits.perSubjectToken, now),
    charge('user', principals.user, limits.perUser, now),
    charge('client', principals.clientId, limits.perClient, now),
  ];
}

/** Subject tokens a Management API client may create per hour. Its attacker: one trusted client whose unredeemed tokens fill the store. */
export function subjectTokenQuota(clientId: string, max: number, now = Date.now()): DelegationCharge {
  return charge('client', clientId, max, now);
}

/** An issuer's share of ID-JAG redemptions, in clients' shares: one client never uses up what the issuer's others need. */
const CLIENT_SHARES_PER_ISSUER = 10;

/** The store's charges for one ID-JAG issued: its user's share at its client (one client never uses up the user's others'), and its client's. */
export function idJagIssueQuotas(
  { maxPerUser, maxPerClient }: { maxPerUser: number; maxPerClient: number },
  user: string,
  clientId: string,
  now = Date.now(),
): DelegationCharge[] {
  const userAtClient = charge('ID-JAG user', JSON.stringify([clientId, user]), maxPerUser, now);
  return [userAtClient, charge('ID-JAG requester', clientId, maxPerClient, now)];
}

/** The share of an issuer's session stops marked here per hour. Its attacker: an issuer whose stream carries stops without end. */
export function issuerStopQuota(issuer: string, max: number, now = Date.now()): DelegationCharge {
  return charge('ID-JAG issuer stops', issuer, max, now);
}

/** The shares an ID-JAG redemption takes: its client's, `perClient` an hour, and its issuer's, ten clients' worth. */

export function redemptionQuotas(perClient: number, clientId: string, issuer: string, now = Date.now()) {
  const issuerShare = charge('ID-JAG issuer', issuer, perClient * CLIENT_SHARES_PER_ISSUER, now);
  return [charge('ID-JAG client', clientId, perClient, now), issuerShare];
}

function charge(principal: Principal, id: string, max: number, now: number): DelegationCharge {
  const window = Math.floor(now / 1000 / QUOTA_WINDOW_SECONDS);
  return {
    principal,
    // A digest: ids of any length and content make keys every store holds, and name nobody in the store.
    key: `quota:${principal.replaceAll(' ', '-')}:${createHash('sha256').update(id).digest('base64url')}:${window}`,
    max,
    expiresAt: (window + 1) * QUOTA_WINDOW_SECONDS * 1000,
  };
}

/** Seconds until `charge`'s share starts again. */
export function secondsUntilRenewed(charge: QuotaCharge, now = Date.now()): number {
  return Math.max(1, Math.ceil((charge.expiresAt - now) / 1000));
}

const WHOSE: Record<Principal, string> = {
  'impersonation session': 'this impersonation session has',
  'subject token': 'this subject_token has',
  user: "this user's tokens have",
  client: 'this client has',
  'ID-JAG assertion': 'this assertion has',
  'ID-JAG issuer': "this assertion's issuer has",
  'ID-JAG issuer stops': "this assertion's issuer has",
  'ID-JAG client': 'this client has',
  'ID-JAG user': 'this user, at this client, has',
  'ID-JAG requester': 'this client has',
};

/** The refusal for the spent quota `key`: 429, when it starts again, never whose it is. */
export function quotaRefusal(
  charges: readonly DelegationCharge[],
  key: string,
  now = Date.now(),
): PrincipalQuotaReached {
  const spent = charges.find((charge) => charge.key === key) ?? charges[0]!;
  const retryAfter = secondsUntilRenewed(spent, now);
  if (spent.principal === 'ID-JAG client' || spent.principal === 'ID-JAG issuer') {
    return principalQuotaReached(
      `this client's, or the assertion issuer's, redemptions this hour are spent; retry in ${retryAfter} s`,
      retryAfter,
    );
  }
  if (spent.principal === 'ID-JAG user' || spent.principal === 'ID-JAG requester') {
    return principalQuotaReached(
      `${WHOSE[spent.principal]} been issued as many ID-JAGs this hour as allowed (${spent.max}); retry in ${retryAfter} s`,
      retryAfter,
    );
  }
  return principalQuotaReached(
    `${WHOSE[spent.principal]} started as many delegations this hour as allowed (${spent.max}); ` +
      `retry in ${retryAfter} s, or use a delegated token already issued`,
    retryAfter,
  );
}
