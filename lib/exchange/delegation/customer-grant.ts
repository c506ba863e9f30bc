/** The customer's access grant an impersonation started under bounds every delegation made from it. */
import { invalidGrant, invalidScope, invalidTarget } from '../../errors.js';
import type { SessionRecord } from '../../sessions/record.js';
import type { CustomerGrant, CustomerGrants } from '../customer-grant.js';

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
