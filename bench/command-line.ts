/**
 * The command line of `npm run bench` (bench/run.ts): its flags and their
 * defaults, and the providers they pick.
 */
import { TELEMETRY_SETUPS, type TelemetrySetup } from './telemetry.js';
import { checkFlags, flagValue, positiveInteger, windowSeconds } from './flags.js';
import type { AdapterKind } from './protocol.js';
import { MINIMAL_SCENARIOS, SCENARIOS, isScenario, type ScenarioName } from './scenarios.js';
import { serviceUrls, type ServiceUrls } from './stores.js';

/**
 * One provider to measure: its store, and whether it is set up as a
 * deployment runs it (bench/server.ts, BENCH_DEPLOYMENT): a custom-claims hook
 * reading the creation context, an audit listener writing a JSON line per
 * event. Its scenarios are those a deployment serves most.
 */
export interface Configuration {
  adapter: AdapterKind;
  deployment: boolean;
  /**
   * A webhook subscription to every webhook event, delivered to a receiver in
   * a process of its own (bench/webhook-receiver.ts) that answers 204 at once.
   */
  webhooks: boolean;
  /**
   * With `webhooks`: the outbox is delivered by a second provider process on
   * the same store that serves no request; the one measured has
   * `deliverOutbox: false`. Only on a store processes share (Redis, PostgreSQL).
   */
  deliveredElsewhere?: boolean;
  /**
   * The customer's approval required for every subject token, with a standing
   * grant in force that covers them (bench/standing-grant.ts): creation and
   * exchange run the grant's checks.
   */
  standingGrant?: boolean;
  /** The OpenTelemetry setup (bench/telemetry.ts); undefined is the option left out, as `no-op`. */
  telemetry?: TelemetrySetup;
  /** The scenarios it runs, when not all (before --only). */
  scenarios?: readonly ScenarioName[];
  /**
   * Configurations of one cohort, listed next to each other, run side by
   * side, their rounds alternating (bench/measure.ts, measureCohort).
   */
  cohort?: string;
  /**
   * A plain provider that runs its twins' windows beside them, in their
   * cohort: what their webhook target compares them with, when the plain
   * provider runs other windows too. It has no targets of its own.
   */
  twinsPeer?: boolean;
  /** How rows, targets and logs name it. */
  name: string;
}

export interface Settings extends ServiceUrls {
  smoke: boolean;
  rounds: number;
  duration: number;
  warmup: number;
  connections: number;
  configurations: Configuration[];
  only: ScenarioName[] | undefined;
  profile: boolean;
  cpuProf: boolean;
  /** Subject tokens for the heap measurement; 0 skips it. */
  memoryCount: number;
  verifierCount: number;
}

/**
 * As a deployment runs it: creation, the support console's exchange and its bound, the minimal grant on the
 * same store (bench/minimal-grant.ts),
 * and a service's delegation of a user's JWT.
 */
const DEPLOYMENT_SCENARIOS: readonly ScenarioName[] = [
  'baseline',
  'create',
  'exchange-actor',
  'exchange-minimal',
  'exchange-minimal-reads',
  'delegation',
];
/** Under a standing grant: what the grant's checks touch (a delegation reads no customer's grant). */
const GRANT_SCENARIOS: readonly ScenarioName[] = ['baseline', 'create', 'exchange-actor'];
/** With a webhook subscription: the exchange a support console makes, against the same provider's baseline. */
const WEBHOOK_SCENARIOS: readonly ScenarioName[] = ['baseline', 'exchange-actor'];
/** The stores whose plain providers get a twin with a webhook subscription (the audit log's store is memory's). */
const WEBHOOK_STORES: readonly AdapterKind[] = ['memory', 'redis', 'postgres'];
/** The stores whose webhook twin has a second twin, delivered by another process: those processes can share. */
const SHARED_STORES: readonly AdapterKind[] = ['redis', 'postgres'];

/** The twin with a webhook subscription whose outbox another provider process on the store delivers. */
function deliveredElsewhere(adapter: AdapterKind, scenarios = WEBHOOK_SCENARIOS): Configuration {
  return {
    adapter,
    deployment: false,
    webhooks: true,
    deliveredElsewhere: true,
    name: `${adapter} · webhooks delivered elsewhere`,
    scenarios,
  };
}

/**
 * The scenarios `config` runs: its own, or all but the minimal grant (the bound of the providers set up
 * as a deployment), narrowed by --only.
 */
export function scenariosRun(config: Configuration, only: readonly ScenarioName[] | undefined): ScenarioName[] {
  const own = config.scenarios ?? SCENARIOS.filter((name) => !MINIMAL_SCENARIOS.includes(name));
  return SCENARIOS.filter((name) => (!only || only.includes(name)) && own.includes(name));
}

/**
 * A plain provider and, when asked, its twins with a webhook subscription
 * (delivered by the same process, and by another), run side by side as a
 * cohort (bench/measure.ts, measureCohort), so that a twin is compared with
 * a plain provider measured in the same minutes with the same windows. When
 * the plain provider runs other windows too (a full run), a peer of it that
 * runs only the twins' windows joins their cohort and is what they are
 * compared with: measured one after the other, the twins' three windows came
 * after they idled through the plain provider's other scenarios, while it ran
 * hot from window to window, and they fell further on memory and Redis (0.108
 * and 0.121–0.168) than side by side (0.034 and −0.045 on Redis).
 */
function withTwins(
  plain: Configuration,
  twin: boolean,
  deliveredByAnother: boolean,
  only: readonly ScenarioName[] | undefined,
): Configuration[] {
  const twins = [
    ...(twin ? [configuration(plain.adapter, false, undefined, true)] : []),
    ...(deliveredByAnother ? [deliveredElsewhere(plain.adapter)] : []),
  ];
  if (twins.length === 0) return [plain];
  const cohort = `webhooks on ${plain.adapter}`;
  const alike = twins.every((other) => scenariosRun(other, only).join() === scenariosRun(plain, only).join());
  if (alike) return [plain, ...twins].map((config) => ({ ...config, cohort }));
  const peer: Configuration = {
    ...configuration(plain.adapter, false, WEBHOOK_SCENARIOS),
    name: `${plain.adapter} · beside its twins`,
    twinsPeer: true,
  };
  return [plain, ...[peer, ...twins].map((config) => ({ ...config, cohort }))];
}

function configuration(
  adapter: AdapterKind,
  deployment: boolean,
  scenarios?: readonly ScenarioName[],
  webhooks = false,
): Configuration {
  return {
    adapter,
    deployment,
    webhooks,
    name: deployment ? `${adapter} · deployment` : webhooks ? `${adapter} · webhooks` : adapter,
    ...(scenarios
      ? { scenarios }
      : deployment
        ? { scenarios: DEPLOYMENT_SCENARIOS }
        : webhooks
          ? { scenarios: WEBHOOK_SCENARIOS }
          : {}),
  };
}

/** A provider set up as a deployment, with a standing grant in force: its subject tokens name their actor. */
function standingGrantConfiguration(adapter: AdapterKind, scenarios = GRANT_SCENARIOS): Configuration {
  return {
    adapter,
    deployment: true,
    webhooks: false,
    standingGrant: true,
    name: `${adapter} · deployment · standing grant`,
    scenarios,
  };
}

/**
 * What --smoke runs, in about a minute: seven providers, so that every
 * configuration's and every scenario's code runs once: on memory set up as a
 * deployment with a standing grant in force (the deployment's setup and the
 * grant's checks in one provider), creation, both exchanges with an actor
 * token and a delegation; on Redis and on PostgreSQL, the exchange with an
 * opaque actor token and the minimal grant on that store (on Redis also with
 * the guarantees' reads); with the audit log, the exchange without an actor;
 * with the audit log on the PostgreSQL store's pool, the exchange with an
 * opaque actor token; with a webhook subscription and an SSF stream, the
 * exchange with an opaque actor token, on memory and on Redis delivered by
 * another process.
 */
const SMOKE_CONFIGURATIONS: readonly Configuration[] = [
  standingGrantConfiguration('memory', ['baseline', 'create', 'exchange-actor', 'exchange-actor-jwt', 'delegation']),
  configuration('redis', false, ['baseline', 'exchange-actor', 'exchange-minimal', 'exchange-minimal-reads']),
  configuration('postgres', false, ['baseline', 'exchange-actor', 'exchange-minimal']),
  configuration('memory+pg-audit', false, ['baseline', 'exchange']),
  configuration('postgres+pg-audit', false, ['baseline', 'exchange-actor']),
  configuration('memory', false, WEBHOOK_SCENARIOS, true),
  deliveredElsewhere('redis'),
];

/** The flags that narrow a smoke run down from SMOKE_CONFIGURATIONS to the configurations they pick. */
const NARROWING_SMOKE = [
  '--memory-only',
  '--redis-only',
  '--postgres-only',
  '--audit-only',
  '--deployment-only',
  '--no-deployment',
  '--no-webhooks',
  '--grant-only',
];

/**
 * The exchange with an opaque actor token on memory with telemetry off, the
 * API's no-op providers and a real SDK, each against its baseline: what
 * --telemetry runs alone, and the full run (or --memory-only) after the plain
 * providers. Their targets compare each ratio with `off`'s.
 */
function telemetryConfigurations(): Configuration[] {
  return TELEMETRY_SETUPS.map((telemetry) => ({
    adapter: 'memory',
    deployment: false,
    webhooks: false,
    telemetry,
    name: `memory · telemetry ${telemetry}`,
    scenarios: ['baseline', 'exchange-actor'],
    cohort: 'telemetry',
  }));
}

export const BENCH_USAGE =
  'npm run bench -- [--smoke] [--rounds N] [--duration S] [--connections C] [--only scenario,…] ' +
  '[--memory-only | --redis-only | --postgres-only | --audit-only] [--deployment-only | --no-deployment | --grant-only] ' +
  '[--no-webhooks] [--telemetry] [--skip-memory] [--profile] [--cpu-prof] [--help] (docs/benchmarks.md, "Running it")';

/** Every flag parseSettings reads; those in `valued` take the word after them. */
const FLAGS = {
  valued: ['--rounds', '--duration', '--connections', '--only'],
  plain: ['--help', '--smoke', '--telemetry', '--skip-memory', '--profile', '--cpu-prof', ...NARROWING_SMOKE],
};

export function parseSettings(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Settings {
  checkFlags(argv, FLAGS, BENCH_USAGE);
  const smoke = argv.includes('--smoke');
  return {
    smoke,
    rounds: positiveInteger(argv, '--rounds', smoke ? 1 : 6),
    duration: windowSeconds(argv, smoke ? 1 : 3),
    // The smoke run skips the warm-up: it keeps the script working, its numbers mean little.
    warmup: smoke ? 0 : 2,
    connections: positiveInteger(argv, '--connections', 16),
    configurations: configurationsOf(argv),
    only: scenariosOf(flagValue(argv, '--only')),
    profile: argv.includes('--profile'),
    cpuProf: argv.includes('--cpu-prof'),
    memoryCount: argv.includes('--skip-memory') ? 0 : smoke ? 5_000 : 100_000,
    verifierCount: smoke ? 2_000 : 20_000,
    ...serviceUrls(env),
  };
}

/** --only's comma-separated scenarios; an unknown name is an error. */
function scenariosOf(list: string | undefined): ScenarioName[] | undefined {
  return list?.split(',').map((name) => {
    if (!isScenario(name)) throw new TypeError(`--only: unknown scenario ${name} (${SCENARIOS.join(', ')})`);
    return name;
  });
}

/**
 * --memory-only, --redis-only, --postgres-only, --audit-only pick the store; --deployment-only
 * and --no-deployment pick the providers set up as a deployment (those with a standing grant
 * among them) or the plain ones; --grant-only those with a standing grant. Each plain
 * provider on memory, Redis or PostgreSQL is followed by its twin with a webhook subscription,
 * unless --no-webhooks.
 */
function configurationsOf(argv: readonly string[]): Configuration[] {
  if (argv.includes('--telemetry')) return telemetryConfigurations();
  if (argv.includes('--smoke') && !NARROWING_SMOKE.some((flag) => argv.includes(flag))) {
    return [...SMOKE_CONFIGURATIONS, ...telemetryConfigurations()];
  }
  const adapters: AdapterKind[] = argv.includes('--memory-only')
    ? ['memory']
    : argv.includes('--redis-only')
      ? ['redis']
      : argv.includes('--postgres-only')
        ? ['postgres']
        : argv.includes('--audit-only')
          ? ['memory+pg-audit', 'postgres+pg-audit']
          : ['memory', 'redis', 'postgres', 'memory+pg-audit', 'postgres+pg-audit'];
  const kinds = argv.includes('--grant-only')
    ? []
    : argv.includes('--deployment-only')
      ? [true]
      : argv.includes('--no-deployment')
        ? [false]
        : [false, true];
  const webhooks = !argv.includes('--no-webhooks');
  const withStandingGrant = argv.includes('--no-deployment') ? [] : adapters;
  const withTelemetry = adapters.includes('memory') && kinds.includes(false) && !argv.includes('--smoke');
  return [
    ...kinds.flatMap((deployment) =>
      adapters.flatMap((adapter) =>
        withTwins(
          configuration(adapter, deployment),
          !deployment && webhooks && WEBHOOK_STORES.includes(adapter),
          !deployment && webhooks && SHARED_STORES.includes(adapter),
          scenariosOf(flagValue(argv, '--only')),
        ),
      ),
    ),
    ...withStandingGrant.map((adapter) => standingGrantConfiguration(adapter)),
    ...(withTelemetry ? telemetryConfigurations() : []),
  ];
}
