/**
 * The demo's console lines, written as a deployment's logger writes them (a
 * buffered destination): the lines of the last few milliseconds are gathered
 * and written together, not one write per line on the request's path. With
 * console.log, each impersonation's line cost the exchange console's
 * formatting and a write(2) of its own, which also wakes whatever reads the
 * output (docs/benchmarks.md, "The demo's own path").
 */

/** What the lines are written to: process.stdout, or a stream of a test. */
export interface LineSink {
  write(text: string): unknown;
}

export interface LineOutput {
  /** Queues one line; it is written within FLUSH_INTERVAL_MS, or at once when the queue is large. */
  line(text: string): void;
  /** Writes what is queued now (before the process exits). */
  flush(): void;
}

/** Above this many characters queued, the queue is written at once: a burst holds no unbounded text. */
const MAX_QUEUED = 64 * 1024;
/** How long a line waits for others: short enough that a person reading the console sees it at once. */
const FLUSH_INTERVAL_MS = 20;

export function lineOutput(sink: LineSink, maxQueued = MAX_QUEUED): LineOutput {
  let queued = '';
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (!queued) return;
    const text = queued;
    queued = '';
    sink.write(text);
  };
  return {
    line(text) {
      queued += `${text}\n`;
      if (queued.length >= maxQueued) flush();
      // Unreferenced: a line waiting does not keep a process alive that is done (the exit handler writes it).
      else timer ??= setTimeout(flush, FLUSH_INTERVAL_MS).unref();
    },
    flush,
  };
}
