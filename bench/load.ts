/**
 * One autocannon run, recorded the way the bench needs it: every response's
 * latency and status (so that runs can be summed exactly, percentiles
 * included), connection errors and timeouts, and the load generator's own CPU.
 */
import autocannon from 'autocannon';

export type RequestSpec = autocannon.Request;

export interface FireOptions {
  base: string;
  connections: number;
  /** Seconds; the run stops after it. */
  duration?: number;
  /** Total requests; the run stops after it (takes precedence over duration). */
  amount?: number;
  requests: RequestSpec[];
}

export interface RunRecord {
  /** Wall-clock seconds from start to done. */
  seconds: number;
  /** Latencies (ms) of the 2xx responses. */
  latencies: number[];
  ok: number;
  /** Responses by status code. */
  statuses: Record<string, number>;
  non2xx: number;
  /** Connection errors (timeouts included) and timeouts, as autocannon counts them. */
  errors: number;
  timeouts: number;
  /** CPU the load generator (this process) used during the run, in seconds. */
  generatorCpu: number;
}

export function fire(options: FireOptions): Promise<RunRecord> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let ok = 0;
  let non2xx = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.base,
        connections: options.connections,
        pipelining: 1,
        timeout: 10,
        ...(options.amount === undefined ? { duration: options.duration ?? 1 } : { amount: options.amount }),
        requests: options.requests,
      },
      (error: unknown, result: autocannon.Result) => {
        if (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
          return;
        }
        const used = process.cpuUsage(cpu);
        resolve({
          seconds: (performance.now() - started) / 1000,
          latencies,
          ok,
          statuses,
          non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          generatorCpu: (used.user + used.system) / 1e6,
        });
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
      if (statusCode >= 200 && statusCode < 300) {
        ok += 1;
        latencies.push(responseTime);
      } else {
        non2xx += 1;
      }
    });
  });
}

/** The p-th percentile (0..100) of ascending-sorted values, nearest rank. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}
