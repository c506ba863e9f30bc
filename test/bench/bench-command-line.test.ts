import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseSettings, scenariosRun } from '../../bench/command-line.js';
import type { Row } from '../../bench/report.js';
import { parseScaleOutSettings } from '../../bench/scale-out-command-line.js';
import { roundOf } from '../../bench/schedule.js';
import type { ScenarioName } from '../../bench/scenarios.js';
import { targetLines } from '../../bench/targets.js';

const execFileAsync = promisify(execFile);
const TELEMETRY_ROWS = ['memory · telemetry off', 'memory · telemetry no-op', 'memory · telemetry sdk'];

/** The configurations a command line picks, as `store · deployment` names. */
function picked(...argv: string[]): string[] {
  return parseSettings(argv, {}).configurations.map((configuration) => configuration.name);
}

/** A provider's rows in a run: its baseline at 1,000 requests/s, its exchange and the minimal grant at the rates given. */
function exchangeRows(name: string, exchange: number, minimal?: number): Row[] {
  const rates: Array<[ScenarioName, number]> = [
    ['baseline', 1000],
    ['exchange-actor', exchange],
    ...(minimal === undefined ? [] : [['exchange-minimal', minimal] as [ScenarioName, number]]),
  ];
  return rates.map(([scenario, rps]) => ({ adapter: name, scenario, rps, p50: 1, p99: 1 }) as Row);
}

describe('bench command line', () => {
  it('--smoke alone runs the seven smoke configurations and the telemetry cohort, as CI runs it, the standing grant on memory only', () => {
    expect(picked('--smoke')).to.deep.equal([
      'memory · deployment · standing grant',
      'redis',
      'postgres',
      'memory+pg-audit',
      'postgres+pg-audit',
      'memory · webhooks',
      'redis · webhooks delivered elsewhere',
      ...TELEMETRY_ROWS,
    ]);
  });

  it('refuses a flag it does not read, naming it with the usage, before anything runs; a valued flag takes its word', () => {
    expect(() => parseSettings(['--rounds', '3', '--redis'], {})).to.throw(
      TypeError,
      /^unknown flag --redis; usage: npm run bench -- \[--smoke\]/,
    );
    expect(() => parseSettings(['--rounds=3'], {})).to.throw(TypeError, /^unknown flag --rounds=3;/);
    const settings = parseSettings(['--only', 'baseline,exchange-actor', '--rounds', '2', '--redis-only'], {});
    expect(settings).to.include({ rounds: 2 });
    expect(() => parseSettings(['--help'], {})).not.to.throw();
    expect(() => parseScaleOutSettings(['--store', 'redis'], {})).to.throw(
      TypeError,
      /^unknown flag --store; usage: node build\/bench\/scale-out\.js/,
    );
  });

  it('--help prints the usage and measures nothing', async () => {
    const run = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
    // A refused --rounds would fail at once, were --help not read first: no run is ever started.
    const { stdout } = await execFileAsync(process.execPath, [run, '--help', '--rounds', '0'], { timeout: 20_000 });
    expect(stdout.trim()).to.match(/^usage: npm run bench -- .*"Running it"\)$/);
  });

  it("a cohort member's round stands alone: its own baselines at both ends, the candidates reversed on odd rounds", () => {
    const names = (round: number) =>
      roundOf(['baseline', 'create', 'exchange-actor'], round).map((slot) => slot.scenario);
    expect(names(0)).to.deep.equal(['baseline', 'create', 'baseline', 'exchange-actor', 'baseline']);
    expect(names(1)).to.deep.equal(['baseline', 'exchange-actor', 'baseline', 'create', 'baseline']);
    expect(roundOf(['baseline', 'exchange-actor'], 3).every((slot) => slot.round === 3)).to.equal(true);
  });

  it('configurations compared with one another run as a cohort when they run the same windows: a plain store with its webhook twins, the telemetry setups', () => {
    const cohorts = (...argv: string[]) =>
      parseSettings(argv, {}).configurations.map(({ name, cohort }) => [name, cohort ?? null]);
    expect(cohorts('--postgres-only', '--no-deployment', '--only', 'baseline,exchange-actor')).to.deep.equal([
      ['postgres', 'webhooks on postgres'],
      ['postgres · webhooks', 'webhooks on postgres'],
      ['postgres · webhooks delivered elsewhere', 'webhooks on postgres'],
    ]);
    expect(cohorts('--postgres-only', '--no-deployment', '--no-webhooks')).to.deep.equal([['postgres', null]]);
    // Without --only the plain provider runs every scenario, the twins two: a peer that runs their windows joins them.
    expect(cohorts('--postgres-only', '--no-deployment')).to.deep.equal([
      ['postgres', null],
      ['postgres · beside its twins', 'webhooks on postgres'],
      ['postgres · webhooks', 'webhooks on postgres'],
      ['postgres · webhooks delivered elsewhere', 'webhooks on postgres'],
    ]);
    expect(cohorts('--telemetry')).to.deep.equal(TELEMETRY_ROWS.map((name) => [name, 'telemetry']));
    for (const [name, cohort] of cohorts('--deployment-only')) expect(cohort, name!).to.equal(null);
  });

  it('a full run measures each store plain (with its webhook twin), as a deployment, with a standing grant, and the exchange under each telemetry setup', () => {
    const stores = ['memory', 'redis', 'postgres', 'memory+pg-audit', 'postgres+pg-audit'];
    expect(picked()).to.deep.equal([
      'memory',
      'memory · beside its twins',
      'memory · webhooks',
      'redis',
      'redis · beside its twins',
      'redis · webhooks',
      'redis · webhooks delivered elsewhere',
      'postgres',
      'postgres · beside its twins',
      'postgres · webhooks',
      'postgres · webhooks delivered elsewhere',
      'memory+pg-audit',
      'postgres+pg-audit',
      ...stores.map((store) => `${store} · deployment`),
      ...stores.map((store) => `${store} · deployment · standing grant`),
      ...TELEMETRY_ROWS,
    ]);
  });

  it('the telemetry setups run the exchange with an actor token, alone with --telemetry, with memory in --memory-only', () => {
    expect(picked('--telemetry')).to.deep.equal(TELEMETRY_ROWS);
    expect(picked('--memory-only').slice(-3)).to.deep.equal(TELEMETRY_ROWS);
    expect(picked('--redis-only')).to.not.include.members(TELEMETRY_ROWS.slice(0, 1));
    expect(picked('--deployment-only')).to.not.include.members(TELEMETRY_ROWS.slice(0, 1));
    for (const configuration of parseSettings(['--telemetry'], {}).configurations) {
      expect(configuration).to.deep.include({ adapter: 'memory', scenarios: ['baseline', 'exchange-actor'] });
    }
  });

  it("prints a target for the real SDK and for the API's no-op: the exchange's ratio at most 0.03 below telemetry off", () => {
    const { configurations } = parseSettings(['--telemetry'], {});
    const lines = targetLines(
      configurations,
      [
        ...exchangeRows(TELEMETRY_ROWS[0]!, 900),
        ...exchangeRows(TELEMETRY_ROWS[1]!, 895),
        ...exchangeRows(TELEMETRY_ROWS[2]!, 860),
      ],
      undefined,
    ).filter((line) => line.includes('against memory · telemetry off'));
    expect(lines).to.deep.equal([
      'PASS  memory · telemetry no-op: token exchange + actor_token (opaque) ÷ client_credentials falls by ≤ 0.03 against memory · telemetry off: 0.005 (0.900× without, 0.895× with)',
      'MISS  memory · telemetry sdk: token exchange + actor_token (opaque) ÷ client_credentials falls by ≤ 0.03 against memory · telemetry off: 0.040 (0.900× without, 0.860× with)',
    ]);
  });

  it("compares a webhook twin with the plain provider's peer in its cohort, which has no targets of its own", () => {
    const { configurations } = parseSettings(['--memory-only', '--no-deployment'], {});
    const lines = targetLines(
      configurations,
      [
        ...exchangeRows('memory', 700),
        ...exchangeRows('memory · beside its twins', 800),
        ...exchangeRows('memory · webhooks', 790),
      ],
      undefined,
    );
    expect(lines.filter((line) => line.includes('falls by'))).to.deep.equal([
      'PASS  memory · webhooks: token exchange + actor_token (opaque) ÷ client_credentials falls by ≤ 0.02 against memory · beside its twins: 0.010 (0.800× without, 0.790× with)',
    ]);
    expect(lines.filter((line) => /^\S+ {2}memory · beside its twins:/.test(line))).to.deep.equal([]);
    expect(lines.some((line) => /^\S+ {2}memory: /.test(line))).to.equal(true);
  });

  it("holds each store's exchange to the minimal grant on that store: 0.9 on memory, 0.85 on Redis and PostgreSQL; names its ratio to the grant with the reads", () => {
    const { configurations } = parseSettings(['--deployment-only', '--no-webhooks'], {});
    const rows = [
      ...exchangeRows('memory · deployment', 750, 820),
      ...exchangeRows('redis · deployment', 600, 700),
      { adapter: 'redis · deployment', scenario: 'exchange-minimal-reads', rps: 625, p50: 1, p99: 1 } as Row,
      ...exchangeRows('postgres · deployment', 480, 580),
    ];
    const lines = targetLines(configurations, rows, undefined);
    expect(lines.filter((line) => line.includes("the minimal grant's"))).to.deep.equal([
      "PASS  memory · deployment: token exchange + actor_token (opaque) req/s ≥ 0.9 × the minimal grant's: 0.91× (0.75× and 0.82× client_credentials)",
      "PASS  redis · deployment: token exchange + actor_token (opaque) req/s ≥ 0.85 × the minimal grant's: 0.86× (0.60× and 0.70× client_credentials; 0.96× the minimal grant with the reads)",
      "MISS  postgres · deployment: token exchange + actor_token (opaque) req/s ≥ 0.85 × the minimal grant's: 0.83× (0.48× and 0.58× client_credentials)",
    ]);
  });

  it('runs the minimal grant beside the exchange on the providers set up as a deployment, and on Redis and PostgreSQL in a smoke run', () => {
    const { configurations } = parseSettings(['--memory-only'], {});
    const runs = (name: string) =>
      scenariosRun(
        configurations.find((config) => config.name === name)!,
        undefined,
      );
    expect(runs('memory')).to.not.include('exchange-minimal');
    expect(runs('memory · deployment')).to.deep.equal([
      'baseline',
      'create',
      'exchange-actor',
      'delegation',
      'exchange-minimal',
      'exchange-minimal-reads',
    ]);
    expect(runs('memory · deployment · standing grant')).to.not.include('exchange-minimal');
    expect(runs('memory')).to.not.include('exchange-minimal-reads');
    const smoke = parseSettings(['--smoke'], {}).configurations;
    for (const name of ['redis', 'postgres'])
      expect(
        scenariosRun(
          smoke.find((config) => config.name === name)!,
          undefined,
        ),
      ).to.include('exchange-minimal');
    expect(
      scenariosRun(
        smoke.find((config) => config.name === 'redis')!,
        undefined,
      ),
    ).to.include('exchange-minimal-reads');
  });

  it('a standing grant runs the deployment scenarios, its subject tokens under the grant', () => {
    const [grant] = parseSettings(['--grant-only', '--memory-only'], {}).configurations;
    expect(grant).to.deep.equal({
      adapter: 'memory',
      deployment: true,
      webhooks: false,
      standingGrant: true,
      name: 'memory · deployment · standing grant',
      scenarios: ['baseline', 'create', 'exchange-actor'],
    });
  });

  it('--deployment-only runs the deployment rows and the standing-grant rows; --grant-only the latter alone', () => {
    expect(picked('--deployment-only', '--memory-only')).to.deep.equal([
      'memory · deployment',
      'memory · deployment · standing grant',
    ]);
    expect(picked('--grant-only', '--redis-only')).to.deep.equal(['redis · deployment · standing grant']);
    expect(picked('--smoke', '--grant-only')).to.deep.equal([
      'memory · deployment · standing grant',
      'redis · deployment · standing grant',
      'postgres · deployment · standing grant',
      'memory+pg-audit · deployment · standing grant',
      'postgres+pg-audit · deployment · standing grant',
    ]);
  });

  for (const [flag, store] of [
    ['--memory-only', 'memory'],
    ['--redis-only', 'redis'],
    ['--postgres-only', 'postgres'],
  ] as const) {
    it(`--smoke ${flag} runs ${store} alone: plain, its webhook twins, as a deployment, with a standing grant`, () => {
      expect(picked('--smoke', flag)).to.deep.equal([
        store,
        `${store} · beside its twins`,
        `${store} · webhooks`,
        ...(store === 'memory' ? [] : [`${store} · webhooks delivered elsewhere`]),
        `${store} · deployment`,
        `${store} · deployment · standing grant`,
      ]);
    });
  }

  it('--smoke --audit-only runs the audit log alone, with no webhook twin', () => {
    expect(picked('--smoke', '--audit-only')).to.deep.equal([
      'memory+pg-audit',
      'postgres+pg-audit',
      'memory+pg-audit · deployment',
      'postgres+pg-audit · deployment',
      'memory+pg-audit · deployment · standing grant',
      'postgres+pg-audit · deployment · standing grant',
    ]);
  });

  it('--smoke --no-deployment runs no provider set up as a deployment', () => {
    expect(picked('--smoke', '--no-deployment')).to.deep.equal([
      'memory',
      'memory · beside its twins',
      'memory · webhooks',
      'redis',
      'redis · beside its twins',
      'redis · webhooks',
      'redis · webhooks delivered elsewhere',
      'postgres',
      'postgres · beside its twins',
      'postgres · webhooks',
      'postgres · webhooks delivered elsewhere',
      'memory+pg-audit',
      'postgres+pg-audit',
    ]);
  });

  it('--no-webhooks leaves the providers with a webhook subscription out', () => {
    expect(picked('--no-deployment', '--no-webhooks')).to.deep.equal([
      'memory',
      'redis',
      'postgres',
      'memory+pg-audit',
      'postgres+pg-audit',
      ...TELEMETRY_ROWS,
    ]);
    const webhooks = parseSettings(['--memory-only'], {}).configurations.find((c) => c.webhooks);
    expect(webhooks).to.deep.include({
      adapter: 'memory',
      deployment: false,
      scenarios: ['baseline', 'exchange-actor'],
    });
    expect(parseSettings(['--redis-only'], {}).configurations.find((c) => c.deliveredElsewhere)).to.deep.include({
      adapter: 'redis',
      webhooks: true,
      scenarios: ['baseline', 'exchange-actor'],
    });
  });

  it('flags are read when parseSettings is called: the smoke run keeps its short windows', () => {
    const settings = parseSettings(['--smoke', '--postgres-only'], {});
    expect(settings).to.include({ smoke: true, rounds: 1, duration: 1, warmup: 0 });
  });
});

describe('scale-out command line', () => {
  it('defaults to 5-second windows, 16 connections and the three shared stores', () => {
    expect(parseScaleOutSettings([], {})).to.deep.equal({
      duration: 5,
      connections: 16,
      stores: ['redis', 'postgres', 'memory+pg-audit'],
      help: false,
      redisUrl: 'redis://127.0.0.1:6379',
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/test',
    });
  });

  it('reads its flags and the service URLs it is given', () => {
    const settings = parseScaleOutSettings(['--duration', '1', '--connections', '4', '--stores', 'redis'], {
      REDIS_URL: 'redis://redis.internal:6380',
    });
    expect(settings).to.include({ duration: 1, connections: 4, redisUrl: 'redis://redis.internal:6380' });
    expect(settings.stores).to.deep.equal(['redis']);
  });

  it('refuses an unknown store and a window that is not a whole number of seconds', () => {
    expect(() => parseScaleOutSettings(['--stores', 'redis,mysql'], {})).to.throw(TypeError, /unknown store mysql/);
    expect(() => parseScaleOutSettings(['--duration', '0.5'], {})).to.throw(TypeError, /--duration/);
  });
});
