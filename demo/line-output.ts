/**
 * The demo's console lines, written as a deployment's logger writes them (an
 * asynchronous destination): the lines of one turn of the event loop are
 * gathered and written together once it turns, not one write per line on the
 * request's path. On Linux, process.stdout writes synchronously to a terminal,
 * a file and a pipe alike; with console.log, each impersonation's line cost
 * the exchange a write of its own and console's formatting
 * (docs/benchmarks.md, "The demo's own path").
 */

/** What the lines are written to: process.stdout, or a stream of a test. */
export interface LineSink {
  write(text: string): unknown;
}

export interface LineOutput {
  /** Queues one line; it is written once the event loop turns, or at once when the queue is large. */
  line(text: string): void;
  /** Writes what is queued now (before the process exits). */
  flush(): void;
}

/** Above this many characters queued, the queue is written at once: a burst holds no unbounded text. */
const MAX_QUEUED = 64 * 1024;

export function lineOutput(sink: LineSink, maxQueued = MAX_QUEUED): LineOutput {
  let queued = '';
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (!queued) return;
    const text = queued;
    queued = '';
    sink.write(text);
  };
  return {
    line(text) {
      queued += `${text}\n`;
      if (queued.length >= maxQueued) flush();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
