import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { scaled } from './time.js';

export interface Delivery {
  headers: IncomingMessage['headers'];
  body: string;
  /** The status the receiver answered with (0 while it holds the request). */
  status: number;
}

/**
 * What the receiver does with the next request: answer with a status
 * (and headers), or hold it open without answering until the receiver closes.
 */
export type Answer = { status: number; headers?: Record<string, string> } | 'hold';

/** A webhook receiver on 127.0.0.1; `answer` decides each reply (default 204). Close it with `close()`. */
export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** The deliveries it acknowledged with a 2xx. */
  acknowledged(): Delivery[];
  answer: (delivery: Delivery) => Answer;
  /** Resolves once `count` deliveries were acknowledged (rejects after `ms`). */
  waitFor(count: number, ms?: number): Promise<Delivery[]>;
  /** Resolves once a request arrives that is held. */
  held(): Promise<Delivery>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const held: ServerResponse[] = [];
  const heldWaiters: ((delivery: Delivery) => void)[] = [];
  const receiver: Receiver = {
    url: '',
    deliveries: [],
    acknowledged: () => receiver.deliveries.filter((d) => d.status >= 200 && d.status < 300),
    answer: () => ({ status: 204 }),
    async waitFor(count, ms = 20_000) {
      const deadline = Date.now() + scaled(ms);
      while (receiver.acknowledged().length < count) {
        if (Date.now() > deadline) {
          throw new Error(`receiver: ${receiver.acknowledged().length} of ${count} deliveries within ${ms} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return receiver.acknowledged();
    },
    held: () => new Promise((resolve) => heldWaiters.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        for (const response of held) response.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const delivery: Delivery = { headers: request.headers, body: Buffer.concat(chunks).toString(), status: 0 };
      receiver.deliveries.push(delivery);
      const answer = receiver.answer(delivery);
      if (answer === 'hold') {
        held.push(response);
        for (const waiter of heldWaiters.splice(0)) waiter(delivery);
        return;
      }
      delivery.status = answer.status;
      response.writeHead(answer.status, answer.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

/** A secret in the Standard Webhooks form. */
export function webhookSecret(seed: string): string {
  return `whsec_${createHmac('sha256', 'webhook-test').update(seed).digest('base64')}`;
}

/** The signature as the Standard Webhooks specification defines it, computed independently of lib/. */
export function expectedSignature(secret: string, delivery: Delivery): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signed = `${String(delivery.headers['webhook-id'])}.${String(delivery.headers['webhook-timestamp'])}.${delivery.body}`;
  return `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
}
