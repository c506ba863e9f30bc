/**
 * A worker thread that knocks on servers while another thread starts them:
 * it tries to connect to each URL again and again until the connection is
 * accepted, sends one GET at once, and reports how it was answered. From its
 * own thread the request reaches a server the moment the system accepts the
 * connection, however busy the starting thread is. Only its types may be
 * imported elsewhere: importing it runs it.
 */
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

export interface KnockOrders {
  urls: string[];
  /** How long an accepted request may wait for its whole answer, milliseconds. */
  answerWithinMs: number;
}

export interface KnockAnswer {
  url: string;
  status?: number;
  /** Why no whole answer came. */
  error?: string;
}

/** The worker's messages: `knocking` first, once the server may be started; then every answer. */
export type KnockMessage = { knocking: true } | { answers: KnockAnswer[] };

function knock(url: string, answerWithinMs: number): Promise<KnockAnswer> {
  return new Promise((resolve) => {
    const attempt = (): void => {
      let accepted = false;
      const request = http.get(url, { agent: false }, (response) => {
        response.resume();
        response.on('end', () => resolve({ url, status: response.statusCode! }));
        response.on('error', (error) => resolve({ url, error: error.message }));
      });
      request.on('socket', (socket) =>
        socket.once('connect', () => {
          accepted = true;
          const timer = setTimeout(
            () => request.destroy(new Error(`accepted, then no whole answer within ${answerWithinMs} ms`)),
            answerWithinMs,
          );
          request.once('close', () => clearTimeout(timer));
        }),
      );
      request.on('error', (error: NodeJS.ErrnoException) => {
        if (!accepted && error.code === 'ECONNREFUSED') setTimeout(attempt, 1);
        else resolve({ url, error: error.message });
      });
    };
    attempt();
  });
}

const orders = workerData as KnockOrders;
const post = (message: KnockMessage): void => parentPort!.postMessage(message);
post({ knocking: true });
post({ answers: await Promise.all(orders.urls.map((url) => knock(url, orders.answerWithinMs))) });
