import type { LookupFunction } from 'node:net';
import type { Provider } from 'oidc-provider';
import type { LeasedEntry, Settlement } from '../outbox/contract.js';
import type { DeliveryHttp, HttpAnswer, OtherDelivery } from '../webhooks/worker.js';
import { SET_TYPE, POLL_METHOD } from './names.js';
import { signSet } from './set.js';
import { guardedLookup, pushUrlProblem } from './push-target.js';
import { SSF_SUBSCRIPTION_PREFIX, type Transmitter } from './transmit.js';

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
 * How the outbox's delivery hands an SSF entry (a SET's claims, signed here
 * with the provider's key as it goes out) to its stream:
 * pushed (RFC 8935: POST `application/secevent+jwt`, 202 expected; a 400 with
 * an `err` is the receiver refusing that SET for good) or moved into the
 * stream's poll queue (RFC 8936), where it waits for the receiver's poll and
 * acknowledgement. A paused stream holds its SETs in the outbox; a deleted or
 * disabled one dead-letters them. A push URL is checked again at every
 * delivery, against the allow-list in force and on the addresses its host
 * resolves to then: one that may no longer be reached dead-letters the SET
 * (`push_target_refused`); a host name that resolves to an internal address
 * gets no answer, and the SET is retried. The SETs of a deleted stream (one
 * appended as it was deleted) are forgotten, never dead-lettered.
 */
export function ssfDelivery({ streams, options, outbox }: Transmitter): OtherDelivery {
  const lookup = guardedLookup(options.allowedPushHosts);
  return {
    owns: (subscription) => subscription.startsWith(SSF_SUBSCRIPTION_PREFIX),
    async deliver(entry: LeasedEntry, http: DeliveryHttp, provider: Provider): Promise<Settlement | HttpAnswer> {
      const stream = await streams.find(entry.subscription.slice(SSF_SUBSCRIPTION_PREFIX.length));
      if (!stream) {
        await outbox.forget(entry.subscription);
        // The entry is gone: this settlement finds no lease, and nothing is kept.
        return { outcome: 'dead', reason: 'stream_deleted' };
      }
      if (stream.status === 'disabled') return { outcome: 'dead', reason: 'stream_disabled' };
      if (stream.status === 'paused') return { outcome: 'retry', at: Date.now() + options.pollIntervalMs };
      const signed = () => signSet(provider, JSON.parse(entry.body) as Record<string, unknown>);
      if (stream.delivery.method === POLL_METHOD) {
        const queued = await streams.enqueue(
          stream.id,
          entry.id,
          await signed(),
          options.retentionSeconds,
          options.maxQueued,
        );
        // Deleted since it was read: its queue was emptied before this SET joined it.
        if (queued && !(await streams.find(stream.id))) await streams.acknowledge(stream.id, [entry.id]);
        // A full queue waits for the receiver to acknowledge, as a receiver that is down would.
        return queued ? { outcome: 'delivered' } : { status: 503 };
      }
      if (pushUrlProblem(new URL(stream.delivery.endpointUrl), options.allowedPushHosts)) {
        return { outcome: 'dead', reason: 'push_target_refused' };
      }
      return push(
        { ...http, lookup },
        stream.delivery.endpointUrl,
        stream.delivery.authorizationHeader,
        await signed(),
      );
    },
  };
}

async function push(
  http: DeliveryHttp & { lookup: LookupFunction },
  url: string,
  authorization: string | undefined,
  jwt: string,
): Promise<Settlement | HttpAnswer> {
  const headers = {
    'content-type': `application/${SET_TYPE}`,
    accept: 'application/json',
    ...(authorization === undefined ? {} : { authorization }),
  };
  // At most ERROR_BODY_BYTES of an answer's body are read (a refusal's `err` is kept): a receiver cannot make the worker buffer more.
  const answer = await http.post(url, headers, jwt, { ...http, readBytes: ERROR_BODY_BYTES });
  if (answer.status === 400) return { outcome: 'dead', reason: setErrorOf(answer.text) };
  return answer;
}

/** The most of an answer's body read: an `err` code fits many times over. */
const ERROR_BODY_BYTES = 4096;

/** The receiver's `err`, when it is one RFC 8935 defines; its free-text `description` is never kept. */
function setErrorOf(text: string): string {
  try {
    const err = (JSON.parse(text) as { err?: unknown }).err;
    return typeof err === 'string' && SET_ERROR_CODES.has(err) ? `set_error:${err}` : 'set_error';
  } catch {
    return 'set_error';
  }
}
