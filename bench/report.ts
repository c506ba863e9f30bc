/**
 * The table `npm run bench` prints: one row per provider and scenario, its
 * windows summed, with ratios to the baseline of the same provider.
 */
import { percentile } from './load.js';
import type { ConfigurationResult } from './measure.js';
import { LABELS, SCENARIOS, type ScenarioName } from './scenarios.js';

export interface Row {
  /** The configuration's name. */
  adapter: string;
  scenario: ScenarioName;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** Each window's rate over that of the baseline windows on either side of it. */
  pairedRatios: number[];
  /** Provider CPU (all threads) per 2xx response, in ms. */
  cpuPerRequest: number;
  /** The main thread's part of it (NaN without /proc). */
  mainCpuPerRequest: number;
  /** V8's helper threads' part of it (NaN without /proc). */
  v8CpuPerRequest: number;
  serverCpuShare: number;
  generatorCpuShare: number;
  otherCpuShare: number;
}

/** Runs are summed: requests/s is all 2xx over all windows, p50/p99 are over every 2xx latency of every window. */
export function summarize(result: ConfigurationResult): Row[] {
  const rows: Row[] = [];
  for (const scenario of SCENARIOS) {
    const totals = result.totals[scenario];
    if (!totals) continue;
    const sum = (field: 'seconds' | 'ok' | 'non2xx' | 'errors' | 'generatorCpu'): number =>
      totals.runs.reduce((total, run) => total + run[field], 0);
    const seconds = sum('seconds');
    const latencies = Float64Array.from(totals.runs.flatMap((run) => run.latencies)).sort();
    const ok = sum('ok');
    rows.push({
      adapter: result.configuration.name,
      scenario,
      rps: ok / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      requests: ok + sum('non2xx'),
      non2xx: sum('non2xx'),
      errors: sum('errors'),
      pairedRatios: totals.pairedRatios,
      cpuPerRequest: (totals.serverCpu * 1000) / ok,
      mainCpuPerRequest: (totals.mainCpu * 1000) / ok,
      v8CpuPerRequest: (totals.v8Cpu * 1000) / ok,
      serverCpuShare: totals.serverCpu / seconds,
      otherCpuShare: totals.otherCpu / seconds,
      generatorCpuShare: sum('generatorCpu') / seconds,
    });
  }
  return rows;
}

const HEADER = [
  'adapter',
  'scenario',
  'req/s',
  'p50 ms',
  'p99 ms',
  'req/s ÷ baseline',
  '÷ neighbouring baselines: median (min–max)',
  'p99 ÷ baseline',
  'provider CPU ms/req (main thread / V8 helpers)',
  'CPU/req ÷ baseline',
  'requests',
  'non-2xx',
  'CPU: provider / autocannon / rest',
];

/** The rows as a Markdown table. */
export function table(rows: readonly Row[]): string[] {
  const lines = [HEADER, HEADER.map((_cell, index) => (index < 2 ? '---' : '---:'))];
  for (const row of rows) {
    const baseline = rows.find((candidate) => candidate.adapter === row.adapter && candidate.scenario === 'baseline');
    lines.push(cells(row, baseline));
  }
  return lines.map((line) => `| ${line.join(' | ')} |`);
}

function cells(row: Row, baseline: Row | undefined): string[] {
  const ratio = (value: (of: Row) => number): string => (baseline ? (value(row) / value(baseline)).toFixed(2) : 'n/a');
  const milliseconds = [row.mainCpuPerRequest, row.v8CpuPerRequest].map((ms) =>
    Number.isNaN(ms) ? '?' : ms.toFixed(2),
  );
  return [
    row.adapter,
    LABELS[row.scenario],
    row.rps.toFixed(0),
    row.p50.toFixed(1),
    row.p99.toFixed(1),
    ratio((of) => of.rps),
    row.scenario === 'baseline' ? '' : spread(row.pairedRatios),
    ratio((of) => of.p99),
    `${row.cpuPerRequest.toFixed(2)} (${milliseconds.join(' / ')})`,
    ratio((of) => of.cpuPerRequest),
    String(row.requests),
    String(row.non2xx + row.errors),
    [row.serverCpuShare, row.generatorCpuShare, row.otherCpuShare]
      .map((share) => (Number.isNaN(share) ? '?' : `${Math.round(share * 100)}%`))
      .join(' / '),
  ];
}

/** Median and range of the ratios of single windows: how much the pooled ratio beside it can be trusted. */
function spread(ratios: readonly number[]): string {
  if (ratios.length === 0) return 'n/a';
  const sorted = [...ratios].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(middle)]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return `${median.toFixed(2)} (${sorted[0]!.toFixed(2)}–${sorted.at(-1)!.toFixed(2)})`;
}
