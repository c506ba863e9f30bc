import { grantStateOf, type AccessGrant, type GrantState } from './record.js';
import type { ApprovalStore } from './store.js';

/** An access grant as the token exchange reads it: the record, and its state as of the read. */
type GrantAsRead = AccessGrant & { state: GrantState };

/** The reader of grants the plugin hands the token exchange. */
export function grantsForExchange(approvals: ApprovalStore): { find(id: string): Promise<GrantAsRead | undefined> } {
  return {
    async find(id) {
      const grant = await approvals.findGrant(id);
      return grant && { ...grant, state: grantStateOf(grant) };
    },
  };
}
