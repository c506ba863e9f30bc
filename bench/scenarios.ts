/** The scenarios the bench times, and how the table and the targets name them. */

export const SCENARIOS = [
  'baseline',
  'create',
  'exchange',
  'exchange-actor',
  'exchange-actor-jwt',
  'delegation',
  'exchange-minimal',
  'exchange-minimal-reads',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export const LABELS: Record<ScenarioName, string> = {
  baseline: 'client_credentials (baseline)',
  create: 'create subject token (Management API)',
  exchange: 'token exchange',
  'exchange-actor': 'token exchange + actor_token (opaque)',
  'exchange-actor-jwt': 'token exchange + actor_token (JWT)',
  delegation: 'delegation (JWT subject token, RFC 8693)',
  'exchange-minimal': 'minimal RFC 8693 grant, no code of the plugin + actor_token (opaque)',
  'exchange-minimal-reads': "minimal grant + the guarantees' two reads (subject token, actor's Grant)",
};

/** The scenarios that redeem a subject token per request, from a token pool. */
export const EXCHANGES: readonly ScenarioName[] = [
  'exchange',
  'exchange-actor',
  'exchange-actor-jwt',
  'exchange-minimal',
  'exchange-minimal-reads',
];

/** The scenarios of the minimal grant (bench/minimal-grant.ts): its own subject tokens, never a target themselves. */
export const MINIMAL_SCENARIOS: readonly ScenarioName[] = ['exchange-minimal', 'exchange-minimal-reads'];

export function isScenario(name: string): name is ScenarioName {
  return (SCENARIOS as readonly string[]).includes(name);
}
