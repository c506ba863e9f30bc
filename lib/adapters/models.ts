/** The adapter model names of the plugin's records, on the stores' floor so both sides import them from below. */

/** Subject tokens (`ist_…`): single use, consumed atomically. */
export const SUBJECT_TOKEN_MODEL = 'SubjectToken';

/** Impersonation and delegation sessions, with sorted indexes. */
export const SESSION_MODEL = 'ImpersonationSession';

/** The customer's grants and approval requests, with bounded indexes. */
export const APPROVAL_MODEL = 'ImpersonationApproval';

/** The adapter model name whose instance hands out the outbox. */
export const OUTBOX_MODEL = 'ImpersonationOutbox';

/** The SSF streams and the SETs awaiting a poll. */
export const SSF_MODEL = 'ImpersonationSsf';

/** The plugin's own models; every other is oidc-provider's (or the deployment's). */
export const PLUGIN_MODELS: ReadonlySet<string> = new Set([
  SUBJECT_TOKEN_MODEL,
  SESSION_MODEL,
  APPROVAL_MODEL,
  OUTBOX_MODEL,
  SSF_MODEL,
]);
