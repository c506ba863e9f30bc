/** The scenarios the bench times, and how the table and the targets name them. */

export const SCENARIOS = [
  'baseline',
  'create',
  'exchange',
  'exchange-actor',
  'exchange-actor-jwt',
  'delegation',
  'exchange-bound',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export const LABELS: Record<ScenarioName, string> = {
  baseline: 'client_credentials (baseline)',
  create: 'create subject token (Management API)',
  exchange: 'token exchange',
  'exchange-actor': 'token exchange + actor_token (opaque)',
  'exchange-actor-jwt': 'token exchange + actor_token (JWT)',
  delegation: 'delegation (JWT subject token, RFC 8693)',
  'exchange-bound': "the bound: an exchange + actor_token (opaque)'s unavoidable work alone",
};

/** The grant type of the exchange's bound, a grant of the bench's own provider (bench/bound-grant.ts). */
export const BOUND_GRANT = 'urn:oidc-provider-impersonation:bench:bound';

/** The scenarios that redeem a subject token per request, from the token pool. */
export const EXCHANGES: readonly ScenarioName[] = [
  'exchange',
  'exchange-actor',
  'exchange-actor-jwt',
  'exchange-bound',
];

export function isScenario(name: string): name is ScenarioName {
  return (SCENARIOS as readonly string[]).includes(name);
}
