import { invalidCall } from '../errors.js';
import type { ResolvedCoreOptions } from '../core-options.js';
import type { EventBus } from '../events/subscriber.js';
import type { ResolvedAuthzenOptions } from '../policy/options.js';
import type { SessionStore } from '../sessions/store.js';
import type { ResolvedApprovalOptions } from './options.js';
import type { ApprovalStore } from './store.js';

export { nowSeconds } from '../clock.js';

/** What the customer's and the backend's approval operations work on. */
export interface ApprovalDependencies {
  bus: EventBus;
  /** The options the approvals read: their own slice (which must be set), the audit log and the per-client bound. */
  options: ApprovalOptionsSlice;
  approvals: ApprovalStore;
  /** Ending a grant ends the sessions it allowed. */
  sessions: SessionStore;
}

export type ApprovalOptionsSlice = Pick<ResolvedCoreOptions, 'auditLog' | 'maxSubjectTokensPerClient'> & {
  approvals?: ResolvedApprovalOptions;
  authzen?: ResolvedAuthzenOptions;
};

/** The `approvals` option; calling an approval operation without it is the deployment's mistake. */
export function approvalSettings(options: ApprovalOptionsSlice, caller: string): ResolvedApprovalOptions {
  if (!options.approvals) throw invalidCall(caller, 'needs the "approvals" option of createImpersonation');
  return options.approvals;
}
