/**
 * `npm run bench`: throughput and latency of the plugin against oidc-provider's
 * own client_credentials grant, on one machine, in one run, against one
 * provider per adapter.
 *
 *   node build/bench/run.js [--smoke] [--rounds N] [--duration S] [--connections C]
 *                           [--memory-only | --redis-only | --postgres-only | --audit-only]
 *                           [--deployment-only | --no-deployment | --grant-only] [--no-webhooks]
 *                           [--only SCENARIO[,SCENARIO]] [--skip-memory] [--profile] [--cpu-prof] [--telemetry]
 *
 * The provider runs in a child process (bench/server.ts), autocannon in this
 * one, so that neither runs on the other's event loop: the operating system
 * spreads them (and the provider's thread pool, where jose's WebCrypto signs)
 * over the cores, and the table shows each one's CPU.
 * Each adapter gets `rounds` rounds; a round runs every candidate scenario
 * once for `duration` seconds at 16 connections, each between two baseline
 * windows, in the order B C1 B C2 B C3 B C4 B, the next round in reverse
 * (C4 first), so that a drift of the machine falls on baseline and candidates
 * alike; each candidate window is also compared with the two baseline windows
 * around it. Runs are summed: requests/s is all 2xx over all windows, p50/p99 are
 * over every 2xx latency of every window.
 *
 * Exchanges need a fresh subject token each: they come from a pool filled by
 * the timed creation runs and, outside any window (before the baseline window
 * in front of each exchange window), topped up through the Management API to
 * 1.5x what the fastest run so far could use. Tokens older than 40 s are
 * dropped (subject tokens live 60 s).
 *
 * --profile records the provider's CPU profile (V8's sampler, through the
 * inspector) during every timed window and prints, per adapter and scenario,
 * where the main thread's time went; --cpu-prof starts the provider with
 * node --cpu-prof instead (one profile of the whole process). Both slow the
 * provider down: their numbers are for the profile, not for the table.
 *
 * Exit code: 0 whatever the targets say (a MISS is a finding, not a failure);
 * 1 when something failed: a non-2xx or connection error rate above 0.1%, the
 * pool ran dry, Redis unreachable, the server died.
 *
 * The parts: command-line.ts (flags), stores.ts (one description per store),
 * measure.ts (one provider's run) with schedule.ts (the order of the windows),
 * window.ts (one timed window), requests.ts and token-pool.ts (what the
 * scenarios send), report.ts, targets.ts and findings.ts (what is printed).
 */
import { availableParallelism, cpus } from 'node:os';
import { runMemoryChild, runTelemetryCostChild, runVerifierChild } from './child-measurements.js';
import { BENCH_USAGE, parseSettings, type Configuration, type Settings } from './command-line.js';
import { runCommand } from './command.js';
import { problemsOf, runNotes } from './findings.js';
import { measureCohort, type CohortMember, type ConfigurationResult } from './measure.js';
import { describeMemory, type MemoryResult } from './memory.js';
import { profileDirectory, profileFolder, profileSummaries } from './profiles.js';
import { summarize, table } from './report.js';
import { describeVerifier } from './resource-server.js';
import { onStore } from './stores.js';
import { targetLines } from './targets.js';
import { describeTelemetryCost, type TelemetryCostResult } from './telemetry-cost.js';

const log = (line: string): void => {
  console.log(line);
};

function introduction(settings: Settings): string[] {
  const lines = [
    `oidc-provider-impersonation bench${settings.smoke ? ' (smoke)' : ''}: ${new Date().toISOString()}, ` +
      `node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'})`,
    `  ${settings.rounds} rounds × ${settings.duration} s per scenario at ${settings.connections} connections, ` +
      'every candidate window between two baseline windows (B C1 B C2 … B, then in reverse); ' +
      'provider in a child process, autocannon in this one',
  ];
  if (settings.smoke)
    lines.push('  smoke run: 1-second windows, no warm-up; the numbers only show that the script works');
  if (Number(process.versions.node.split('.')[0]) < 22) {
    lines.push(
      "  note: oidc-provider 9 supports Node.js 22 LTS and later; this runtime's V8 is slow on tokens that carry claims " +
        'from extraTokenClaims, act included (README, "Benchmarks")',
    );
  }
  return lines;
}

/**
 * Each configuration on a provider of its own, on its store, one after the
 * other; a cohort's (configurations next to each other with one `cohort`) side by side.
 */
async function measureAll(settings: Settings, profileDir: string | undefined): Promise<ConfigurationResult[]> {
  const results: ConfigurationResult[] = [];
  const { configurations } = settings;
  for (let start = 0; start < configurations.length;) {
    const { cohort } = configurations[start]!;
    let end = start + 1;
    while (cohort !== undefined && configurations[end]?.cohort === cohort) end += 1;
    results.push(...(await onStores(configurations.slice(start, end), settings, profileDir, [])));
    start = end;
  }
  return results;
}

/** The configurations' stores opened one inside the other, then the cohort measured on them. */
async function onStores(
  configurations: readonly Configuration[],
  settings: Settings,
  profileDir: string | undefined,
  members: CohortMember[],
): Promise<ConfigurationResult[]> {
  const [config, ...rest] = configurations;
  if (!config) return measureCohort(members, settings);
  return onStore(config.adapter, config.name, settings, (store) =>
    onStores(rest, settings, profileDir, [
      ...members,
      { config, store, profileDir: profileDir && profileFolder(profileDir, config) },
    ]),
  );
}

async function main(argv: readonly string[]): Promise<string[]> {
  const started = performance.now();
  // Before the other flags are read: the usage whatever else the line says.
  if (argv.includes('--help')) {
    log(`usage: ${BENCH_USAGE}`);
    return [];
  }
  const settings = parseSettings(argv);
  for (const line of introduction(settings)) log(line);
  const profileDir = profileDirectory(settings);
  const results = await measureAll(settings, profileDir);

  let memory: MemoryResult | undefined;
  if (settings.memoryCount) {
    log(
      `  memory adapter: filling with ${settings.memoryCount.toLocaleString('en')} subject tokens (node --expose-gc child)`,
    );
    memory = await runMemoryChild(settings.memoryCount);
  }
  log(
    `  resource-server helper: ${settings.verifierCount.toLocaleString('en')} verifications per variant (child process)`,
  );
  const verifier = await runVerifierChild(settings.verifierCount);
  let telemetryCost: TelemetryCostResult | undefined;
  if (settings.configurations.some((config) => config.telemetry !== undefined)) {
    log('  telemetry in one process: the exchange wrapper and its steps under each setup (child process)');
    telemetryCost = await runTelemetryCostChild(settings.smoke ? 5_000 : 100_000);
  }

  const rows = results.flatMap(summarize);
  for (const line of ['', ...table(rows), '']) log(line);
  if (memory) for (const line of describeMemory(memory)) log(line);
  for (const line of describeVerifier(verifier)) log(line);
  if (telemetryCost) for (const line of describeTelemetryCost(telemetryCost)) log(line);
  for (const line of runNotes(results)) log(line);
  const problems = problemsOf(results, rows);
  for (const line of ['', ...targetLines(settings.configurations, rows, memory, telemetryCost)]) log(line);
  if (profileDir) for (const line of profileSummaries(profileDir, settings, results)) log(line);

  log('');
  log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return problems;
}

await runCommand('bench', main);
