import type { LeasedEntry, Settlement } from '../outbox/contract.js';
import type { HttpAnswer, OtherDelivery } from '../webhooks/worker.js';
import { SET_TYPE, POLL_METHOD } from './set.js';
import type { ResolvedSsfOptions } from './options.js';
import { SSF_SUBSCRIPTION_PREFIX } from './transmit.js';
import type { StreamStore } from './store.js';

/** The `err` codes of RFC 8935 2.3 (the IANA "Security Event Token Error Codes"); any other is reported as `set_error`. */
const SET_ERROR_CODES = new Set([
  'invalid_request',
  'invalid_key',
  'invalid_issuer',
  'invalid_audience',
  'authentication_failed',
  'access_denied',
]);

/**
 * How the outbox's delivery hands an SSF entry (a signed SET) to its stream:
 * pushed (RFC 8935: POST `application/secevent+jwt`, 202 expected; a 400 with
 * an `err` is the receiver refusing that SET for good) or moved into the
 * stream's poll queue (RFC 8936), where it waits for the receiver's poll and
 * acknowledgement. A paused stream holds its SETs in the outbox; a deleted or
 * disabled one dead-letters them.
 */
export function ssfDelivery(streams: StreamStore, options: ResolvedSsfOptions): OtherDelivery {
  return {
    owns: (subscription) => subscription.startsWith(SSF_SUBSCRIPTION_PREFIX),
    async deliver(entry: LeasedEntry, signal: AbortSignal, timeoutMs: number): Promise<Settlement | HttpAnswer> {
      const stream = await streams.find(entry.subscription.slice(SSF_SUBSCRIPTION_PREFIX.length));
      if (!stream) return { outcome: 'dead', reason: 'stream_deleted' };
      if (stream.status === 'disabled') return { outcome: 'dead', reason: 'stream_disabled' };
      if (stream.status === 'paused') return { outcome: 'retry', at: Date.now() + options.pollIntervalMs };
      if (stream.delivery.method === POLL_METHOD) {
        const queued = await streams.enqueue(
          stream.id,
          entry.id,
          entry.body,
          options.retentionSeconds,
          options.maxQueued,
        );
        // A full queue waits for the receiver to acknowledge, as a receiver that is down would.
        return queued ? { outcome: 'delivered' } : { status: 503 };
      }
      return push(stream.delivery.endpointUrl, stream.delivery.authorizationHeader, entry.body, signal, timeoutMs);
    },
  };
}

async function push(
  url: string,
  authorization: string | undefined,
  jwt: string,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Settlement | HttpAnswer> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': `application/${SET_TYPE}`,
        accept: 'application/json',
        ...(authorization === undefined ? {} : { authorization }),
      },
      body: jwt,
      redirect: 'manual',
      signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), signal]),
    });
    if (response.status === 400) return { outcome: 'dead', reason: await setErrorOf(response) };
    await response.body?.cancel().catch(() => {});
    return { status: response.status, retryAfter: response.headers.get('retry-after') };
  } catch {
    return { status: 0 };
  }
}

/** The most of an error body read: an `err` code fits many times over. */
const ERROR_BODY_BYTES = 4096;

/**
 * The receiver's `err`, when it is one RFC 8935 defines; its free-text
 * `description` is never kept. At most ERROR_BODY_BYTES are read: a
 * receiver cannot make the worker buffer a body of any size.
 */
async function setErrorOf(response: Response): Promise<string> {
  const text = await leadingText(response, ERROR_BODY_BYTES).catch(() => '');
  try {
    const err = (JSON.parse(text) as { err?: unknown }).err;
    return typeof err === 'string' && SET_ERROR_CODES.has(err) ? `set_error:${err}` : 'set_error';
  } catch {
    return 'set_error';
  }
}

/** The first `limit` bytes of a response's body, as text; the rest is never read. */
async function leadingText(response: Response, limit: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}
