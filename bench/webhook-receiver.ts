/**
 * The webhook receiver of the configurations with a subscription, in a
 * process of its own (started by bench/measure.ts with fork()): it answers
 * every POST with 204 at once, on 127.0.0.1 and a free port, and counts them.
 * It reports its URL over IPC, answers `count` with the deliveries so far, and
 * exits on `close` or when its parent goes away.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

type ReceiverRequest = { type: 'count' } | { type: 'close' };
type ReceiverMessage = { type: 'ready'; url: string } | { type: 'count'; deliveries: number };

export interface WebhookReceiver {
  url: string;
  pid: number;
  /** Deliveries answered so far. */
  deliveries(): Promise<number>;
  close(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;

/** Starts the receiver process; rejects should it not report its URL in time. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const child = fork(fileURLToPath(import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const next = (type: ReceiverMessage['type']): Promise<ReceiverMessage> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the webhook receiver did not answer ${type}`)),
        READY_TIMEOUT_MS,
      );
      const onMessage = (message: ReceiverMessage): void => {
        if (message.type !== type) return;
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve(message);
      };
      child.on('message', onMessage);
    });
  const exited = once(child, 'exit');
  let ready: ReceiverMessage;
  try {
    ready = await next('ready');
  } catch (error) {
    child.kill();
    throw error;
  }
  return {
    url: (ready as Extract<ReceiverMessage, { type: 'ready' }>).url,
    pid: child.pid!,
    async deliveries() {
      const reply = next('count');
      child.send({ type: 'count' } satisfies ReceiverRequest);
      return ((await reply) as Extract<ReceiverMessage, { type: 'count' }>).deliveries;
    },
    async close() {
      if (child.exitCode !== null) return;
      child.send({ type: 'close' } satisfies ReceiverRequest);
      await exited;
    },
  };
}

function serve(): void {
  let deliveries = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      deliveries += 1;
      response.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.send?.({ type: 'ready', url: `http://127.0.0.1:${port}/hooks` } satisfies ReceiverMessage);
  });
  process.on('message', (message: ReceiverRequest) => {
    if (message.type === 'count') process.send?.({ type: 'count', deliveries } satisfies ReceiverMessage);
    else process.exit(0);
  });
  process.on('disconnect', () => process.exit(0));
}

if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) serve();
