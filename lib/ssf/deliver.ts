import type { OtherDelivery } from '../webhooks/worker.js';
import { SET_TYPE, POLL_METHOD } from './names.js';
import { signWithProviderKey } from '../provider-internals.js';
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

/** Hands an SSF entry, signed here, to its stream: pushed (RFC 8935) or queued for poll (RFC 8936); Invariant 57. */
export function ssfDelivery({ streams, options, outbox }: Transmitter): OtherDelivery {
  const lookup = guardedLookup(options.allowedPushHosts);
  return {
    owns: (subscription) => subscription.startsWith(SSF_SUBSCRIPTION_PREFIX),
    async deliver(entry, http, provider) {
      const stream = await streams.find(entry.subscription.slice(SSF_SUBSCRIPTION_PREFIX.length));
      if (!stream) {
        await outbox.forget(entry.subscription);
        return { outcome: 'dead', reason: 'stream_deleted' };
      }
      if (stream.status === 'disabled') return { outcome: 'dead', reason: 'stream_disabled' };
      if (stream.status === 'paused') return { outcome: 'retry', at: Date.now() + options.pollIntervalMs };
      const signed = () => signWithProviderKey(provider, JSON.parse(entry.body) as Record<string, unknown>, SET_TYPE);
      if (stream.delivery.method === POLL_METHOD) {
        const queued = await streams.enqueue(stream.id, entry.id, await signed(), options);
        // Deleted since it was read: its queue was emptied before this SET joined it.
        if (queued && !(await streams.find(stream.id))) await streams.acknowledge(stream.id, [entry.id]);
        // A full queue waits for the receiver to acknowledge, as a receiver that is down would.
        return queued ? { outcome: 'delivered' } : { status: 503 };
      }
      if (pushUrlProblem(new URL(stream.delivery.endpointUrl), options.allowedPushHosts))
        return { outcome: 'dead', reason: 'push_target_refused' };
      const { endpointUrl, authorizationHeader: authorization } = stream.delivery;
      const headers = {
        'content-type': `application/${SET_TYPE}`,
        accept: 'application/json',
        ...(authorization === undefined ? {} : { authorization }),
      };
      // At most ERROR_BODY_BYTES of an answer's body are read: a receiver cannot make the worker buffer more.
      const guarded = { ...http, lookup, readBytes: ERROR_BODY_BYTES };
      const answer = await http.post(endpointUrl, headers, await signed(), guarded);
      return answer.status === 400 ? { outcome: 'dead', reason: setErrorOf(answer.text) } : answer;
    },
  };
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
