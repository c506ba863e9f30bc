/** The customer's access grant behind a subject token, checked again at the exchange, bounds it (Invariant 20). */
import { invalidGrant, invalidScope, invalidTarget } from '../errors.js';
import type { SessionRecord } from '../sessions/record.js';
import type { SubjectTokenRecord } from '../subject-tokens/store.js';

/** A customer's access grant as the exchange reads it; its reader is passed in, so exchange imports no approvals. */
export interface CustomerGrant {
  subject: string;
  /** Only this actor may use it; absent: any. */
  actor?: string | undefined;
  /** The one resource it opens; absent: any. */
  resource?: string | undefined;
  /** The scopes it allows; absent: any. */
  scope?: string[] | undefined;
  expiresAt: number;
  state: 'active' | 'ended' | 'expired';
}

export interface CustomerGrants {
  /** The grant `id`, or undefined for one the store does not hold; rejects when the store cannot answer. */
  find(id: string): Promise<CustomerGrant | undefined>;
}

export interface GrantBounds {
  grant: CustomerGrant;
  /** The requested scopes the grant allows: never more than the customer allowed. */
  scope: string[];
  /** Seconds until the grant expires: the token must not outlive it. */
  secondsLeft: number;
}

/** A read of the grant, started early to share a wait with the actor's; never rejects, so it may go unawaited. */
export type CustomerGrantRead = Promise<{ grant: CustomerGrant | undefined } | { failure: unknown }> | undefined;

export function readCustomerGrant(grants: CustomerGrants, record: SubjectTokenRecord): CustomerGrantRead {
  if (record.accessGrantId === undefined) return undefined;
  return grants.find(record.accessGrantId).then(
    (grant) => ({ grant }),
    (failure: unknown) => ({ failure }),
  );
}

/** The grant in force behind `record`, read by `readCustomerGrant` (a subject token issued under none has no read). */
export async function customerGrantBounds(
  read: NonNullable<CustomerGrantRead>,
  record: SubjectTokenRecord,
  exchange: { actor: string | undefined; resource: string; scope: string[] },
): Promise<GrantBounds> {
  const outcome = await read;
  if ('failure' in outcome) throw outcome.failure;
  const grant = usable(outcome.grant, record);
  if (grant.actor !== undefined && grant.actor !== exchange.actor) {
    throw invalidGrant("the customer's access grant is for another actor");
  }
  if (grant.resource !== undefined && grant.resource !== exchange.resource) {
    throw invalidTarget("the customer's access grant does not cover this resource");
  }
  let scope = exchange.scope;
  if (grant.scope !== undefined) {
    const allowed = new Set(grant.scope);
    scope = exchange.scope.filter((name) => allowed.has(name));
    if (!scope.length) {
      throw invalidScope(`the customer's access grant allows only: ${grant.scope.join(' ')}`, exchange.scope.join(' '));
    }
  }
  const secondsLeft = Math.floor(grant.expiresAt - Date.now() / 1000);
  // A token that would expire as it is issued is no token.
  if (secondsLeft < 1) throw invalidGrant("the customer's access grant expired");
  return { grant, scope, secondsLeft };
}

function usable(grant: CustomerGrant | undefined, record: SubjectTokenRecord): CustomerGrant {
  const state = grant && grant.subject === record.subject ? grant.state : 'ended';
  if (state === 'ended') throw invalidGrant("the customer's access grant ended");
  if (state === 'expired') throw invalidGrant("the customer's access grant expired");
  return grant!;
}

// A delegation made under an impersonation stays within the grant that impersonation started under.

/** The grant the session was started under: an impersonation's own, or the one its delegation inherited. */
export function accessGrantOf(session: SessionRecord): string | undefined {
  return session.accessGrantId ?? session.underAccessGrantId;
}

/** Refuses a delegation outside the grant; a store that cannot answer rejects (no token). */
export async function checkCustomerGrant(
  grants: CustomerGrants,
  grantId: string,
  delegation: { subject: string; resource: string; scope: readonly string[] },
): Promise<void> {
  const grant = await grants.find(grantId);
  if (!grant || grant.subject !== delegation.subject || grant.state !== 'active') {
    throw invalidGrant("the customer's access grant this impersonation was started under is no longer in force");
  }
  checkCeiling(grant, delegation);
}

/** The ceiling alone, once the grant is known to be in force. */
export function checkCeiling(
  ceiling: Pick<CustomerGrant, 'resource' | 'scope'>,
  delegation: { resource: string; scope: readonly string[] },
): void {
  if (ceiling.resource !== undefined && ceiling.resource !== delegation.resource) {
    throw invalidTarget(
      "the customer's access grant this impersonation was started under does not cover this resource",
    );
  }
  if (ceiling.scope !== undefined) {
    const allowed = new Set(ceiling.scope);
    const outside = delegation.scope.filter((name) => !allowed.has(name));
    if (outside.length) {
      throw invalidScope(
        `the customer's access grant this impersonation was started under allows only: ${ceiling.scope.join(' ')}`,
        outside.join(' '),
      );
    }
  }
}
