/**
 * What the bench says about a run besides the table: notes on the providers'
 * state afterwards, and the problems that make the run fail (exit code 1)
 * because its numbers would mean nothing.
 */
import type { ConfigurationResult } from './measure.js';
import type { Row } from './report.js';

/** Above this share of non-2xx responses or connection errors the numbers mean nothing. */
const ERROR_TOLERANCE = 0.001;

/** Notes on each provider after its run: its memory adapter's size and evictions, the requests cut off. */
export function runNotes(results: readonly ConfigurationResult[]): string[] {
  const lines: string[] = [];
  for (const result of results) {
    const stats = result.endStats.adapter;
    if (stats) {
      const evicted = stats.evictedUnexpired['SubjectToken'] ?? 0;
      lines.push(
        `memory adapter of the provider after the run: ${stats.size} entries, evictedUnexpired ${JSON.stringify(stats.evictedUnexpired)}`,
      );
      if (evicted > 0)
        lines.push(`WARNING: the provider's memory adapter evicted ${evicted} unexpired subject tokens during the run`);
    }
    const webhooks = result.endStats.webhooks;
    if (result.webhooksReceived !== undefined) {
      lines.push(
        `${result.configuration.name}: ${result.webhooksReceived} webhooks answered by the receiver; ` +
          `outbox afterwards ${JSON.stringify(webhooks ?? { pending: 0, dead: 0, dropped: 0 })}`,
      );
    }
    if (result.abortedLogged) {
      lines.push(
        `${result.configuration.name}: ${result.abortedLogged} Management API requests cut off at the end of a window were logged by the provider as "Error: aborted" (not shown)`,
      );
    }
  }
  return lines;
}

/** A dry token pool, failed untimed requests, or failed timed requests above the tolerance. */
export function problemsOf(results: readonly ConfigurationResult[], rows: readonly Row[]): string[] {
  const problems: string[] = [];
  for (const result of results) {
    const { name } = result.configuration;
    if (result.poolExhausted) problems.push(`${name}: the subject-token pool ran dry ${result.poolExhausted} times`);
    const webhooks = result.endStats.webhooks;
    if (webhooks && (webhooks.pending || webhooks.dead || webhooks.dropped)) {
      problems.push(`${name}: webhooks not delivered by the end of the run: ${JSON.stringify(webhooks)}`);
    }
    if (result.untimed.failed > result.untimed.requests * ERROR_TOLERANCE) {
      problems.push(
        `${name}: ${result.untimed.failed} of ${result.untimed.requests} untimed requests (warm-up, token creation) failed`,
      );
    }
  }
  for (const row of rows) {
    if (row.non2xx + row.errors <= Math.max(0, row.requests * ERROR_TOLERANCE)) continue;
    const statuses: Record<string, number> = {};
    for (const run of results.find((r) => r.configuration.name === row.adapter)!.totals[row.scenario]!.runs) {
      for (const [status, count] of Object.entries(run.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
    }
    problems.push(
      `${row.adapter} ${row.scenario}: ${row.non2xx} non-2xx and ${row.errors} connection errors ` +
        `in ${row.requests} requests (statuses ${JSON.stringify(statuses)})`,
    );
  }
  return problems;
}
