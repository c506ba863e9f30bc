/** Every option's default and each number's most, in one table (delegation's shares are lib/capacity.ts's). */

/** `createImpersonation`'s own options. */
export const IMPERSONATION_DEFAULTS = {
  managementScope: 'subject-tokens:create',
  readScope: 'impersonations:read',
  revokeScope: 'impersonations:revoke',
  managementPath: '/api/subject-tokens',
  sessionsPath: '/api/impersonations',
  managementTokenTTL: 300,
  managementTokenFormat: 'jwt',
  subjectTokenTTL: 60,
  accessTokenTTL: 900,
  maxContextBytes: 2048,
  maxSubjectTokensPerClient: 10_000,
  customClaimsTimeout: 2000,
  deliverOutbox: true,
} as const;

export const IMPERSONATION_MAXIMA = {
  managementTokenTTL: 86_400,
  subjectTokenTTL: 3600,
  accessTokenTTL: 86_400,
  maxContextBytes: 1_048_576,
  maxSubjectTokensPerClient: 1_000_000,
  customClaimsTimeout: 60_000,
} as const;

export const ACTOR_AUTHENTICATION_MAXIMA = { maxAge: 86_400 * 30 } as const;

/** `approvals` (a function's default is a value too: `require` answers `none`). */
export const APPROVAL_DEFAULTS = {
  customerScope: 'support-access',
  customerPath: '/api/support-access',
  requestsPath: '/api/approval-requests',
  maxGrantDuration: 30 * 24 * 3600,
  requestTTL: 900,
  maxGrantsPerCustomer: 20,
  maxPendingPerCustomer: 20,
} as const;

export const APPROVAL_MAXIMA = {
  maxGrantDuration: 366 * 24 * 3600,
  requestTTL: 7 * 24 * 3600,
  maxGrantsPerCustomer: 1000,
  maxPendingPerCustomer: 1000,
} as const;

/** `delegation`. */
export const DELEGATION_DEFAULTS = { maxChainDepth: 3, accessTokenTTL: 300 } as const;

export const DELEGATION_MAXIMA = { maxChainDepth: 10, accessTokenTTL: 86_400 } as const;

/** `idJag`. */
export const ID_JAG_DEFAULTS = { maxRedemptionsPerClient: 1000, maxStopsPerIssuer: 10_000 } as const;

export const ID_JAG_MAXIMA = { maxRedemptionsPerClient: 100_000, maxStopsPerIssuer: 1_000_000 } as const;

/** `idJagIssuance`: ID-JAGs issued per hour for one user, and to one client. */
export const ID_JAG_ISSUANCE_DEFAULTS = { maxPerUser: 100, maxPerClient: 5000 } as const;

export const ID_JAG_ISSUANCE_MAXIMA = { maxPerUser: 1_000_000, maxPerClient: 1_000_000 } as const;

/** `webhooks`: durations in the unit the option takes (seconds, or milliseconds for `timeout` and `pollInterval`). */
export const WEBHOOK_DEFAULTS = {
  maxPending: 100_000,
  maxAttempts: 15,
  maxAge: 259_200,
  deadLetterRetention: 604_800,
  timeout: 10_000,
  pollInterval: 1000,
  maxBackoff: 3600,
} as const;

export const WEBHOOK_MAXIMA = {
  maxPending: 10_000_000,
  maxAttempts: 100,
  maxAge: 2_592_000,
  deadLetterRetention: 2_592_000,
  timeout: 120_000,
  pollInterval: 60_000,
  maxBackoff: 86_400,
} as const;

/** `ssf`: durations in the unit the option takes. */
export const SSF_DEFAULTS = {
  scope: 'ssf:streams',
  path: '/ssf',
  maxStreams: 100,
  maxStreamsPerReceiver: 5,
  maxPending: 10_000,
  maxQueued: 10_000,
  retention: 604_800,
  minVerificationInterval: 30,
  longPollTimeout: 10_000,
  maxAttempts: 15,
  timeout: 10_000,
  pollInterval: 1000,
} as const;

export const SSF_MAXIMA = {
  maxStreams: 10_000,
  maxStreamsPerReceiver: 1000,
  maxPending: 1_000_000,
  maxQueued: 1_000_000,
  retention: 2_592_000,
  minVerificationInterval: 86_400,
  longPollTimeout: 60_000,
  maxAttempts: 100,
  timeout: 120_000,
  pollInterval: 60_000,
  pushAllowList: 100,
} as const;
