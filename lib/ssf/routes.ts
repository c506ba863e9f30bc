import { randomBytes } from 'node:crypto';
import type Router from '@koa/router';
import type Koa from 'koa';
import { badRequest, notFound, streamBehind, tooManyRequests, tooManyStreams } from '../errors.js';
import type { JsonObject } from '../json.js';
import { refuseToken, type Authenticate } from '../http/auth.js';
import { readJsonObject } from '../http/body.js';
import { waitsFor } from '../outbox/contract.js';
import { storeCall } from '../store-call.js';
import { ssfConfigurationLocation, streamApiBase, transmitterMetadata } from './discovery.js';
import {
  checkPushHost,
  readPollRequest,
  readReceiverSupplied,
  readStreamId,
  readSubjectChange,
  TRANSMITTER_SUPPLIED,
  type ReceiverSupplied,
} from './input.js';
import { EVENTS_SUPPORTED, POLL_METHOD, PUSH_METHOD } from './names.js';
import type { StreamRecord, StreamStatus } from './store.js';
import { deleteStream, streamSubscription, transmitVerification, type Transmitter } from './transmit.js';

/** Emitted on the provider when a poll receiver reports a SET it could not process: `{ stream, jti, err }`. */
export const SSF_SET_ERROR = 'impersonation.ssf.set_error';

const MAX_BODY = 16 * 1024;
const STATUSES = new Set<StreamStatus>(['enabled', 'paused', 'disabled']);
const MAX_REASON = 256;
/** How often a long poll looks at its queue again. */
const LONG_POLL_STEP_MS = 100;
/** How long a poll whose queue is empty waits for SETs still in the outbox before it says 503 rather than "nothing". */
const SETS_ON_THEIR_WAY_MS = 1000;

/** The paths the SSF routes answer, for the Management API's error rendering. */
export function ssfPaths(transmitter: Transmitter): string[] {
  return [ssfConfigurationLocation(transmitter.provider.issuer), transmitter.options.path];
}

/** The SSF 1.0 transmitter; a receiver sees only its own streams (any other id is a 404). */
export function ssfRoutes(router: Router, transmitter: Transmitter, authenticate: Authenticate): void {
  const { provider, streams, options } = transmitter;
  const base = options.path;
  const api = () => streamApiBase(transmitter);

  /** The receiver, by a token with one of `scopes`, tried in turn only when one was missing. */
  async function callerWith(ctx: Koa.Context, scopes: readonly string[]): Promise<string> {
    let refusal: { error?: unknown; description?: unknown } = {};
    for (const scope of scopes) {
      const result = await storeCall(() => authenticate(ctx, { scope }));
      if ('clientId' in result && typeof result.clientId === 'string') return result.clientId;
      refusal = result as typeof refusal;
      if (refusal.error !== 'insufficient_scope') break;
    }
    throw refuseToken(ctx, refusal, scopes.join(' '));
  }
  const receiverOf = (ctx: Koa.Context) => callerWith(ctx, options.manageScopes);
  const readerOf = (ctx: Koa.Context) => callerWith(ctx, options.readScopes);

  async function ownStream(receiver: string, id: string): Promise<StreamRecord> {
    const stream = await storeCall(() => streams.find(id));
    if (!stream || stream.receiver !== receiver) throw notFound('not_found', 'no stream with this stream_id');
    return stream;
  }

  function view(stream: StreamRecord): JsonObject {
    return {
      stream_id: stream.id,
      iss: provider.issuer,
      aud: stream.audience,
      events_supported: [...EVENTS_SUPPORTED],
      events_requested: stream.eventsRequested,
      events_delivered: delivered(stream.eventsRequested),
      // The authorization header the receiver gave is a credential: kept to push with, never shown again.
      delivery:
        stream.delivery.method === PUSH_METHOD
          ? { method: PUSH_METHOD, endpoint_url: stream.delivery.endpointUrl }
          : { method: POLL_METHOD, endpoint_url: `${api()}/poll/${stream.id}` },
      min_verification_interval: options.minVerificationInterval,
      ...(stream.description === undefined ? {} : { description: stream.description }),
    };
  }

  /** SSF 1.0 8.1.1.2: transmitter-supplied values a request repeats must be the stream's. */
  function assertTransmitterSupplied(body: JsonObject, stream: StreamRecord | undefined): void {
    const current = stream ? view(stream) : undefined;
    for (const name of TRANSMITTER_SUPPLIED) {
      if (body[name] === undefined || current === undefined) continue;
      if (JSON.stringify(body[name]) !== JSON.stringify(current[name])) {
        throw badRequest(`${name} is set by the transmitter and differs from this stream's`);
      }
    }
  }

  router.get(ssfConfigurationLocation(provider.issuer), (ctx) => {
    ctx.body = transmitterMetadata(transmitter);
  });

  const receiverFull = () =>
    tooManyStreams(`this receiver has ${options.maxStreamsPerReceiver} streams already, the most allowed`);
  const transmitterFull = () => tooManyStreams('the transmitter has as many streams as it allows');

  router.post(`${base}/streams`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    if (body['stream_id'] !== undefined) throw badRequest('stream_id is set by the transmitter');
    const supplied = readReceiverSupplied(body, options.allowedPushHosts);
    await checkPushHost(supplied, options.allowedPushHosts);
    const counted = await storeCall(() => streams.count(receiver, options.maxStreams));
    if (counted.receiver >= options.maxStreamsPerReceiver) throw receiverFull();
    if (counted.all >= options.maxStreams) throw transmitterFull();
    const stream: StreamRecord = {
      id: randomBytes(16).toString('base64url'),
      receiver,
      audience: receiver,
      ...withDefaults(supplied),
      status: 'enabled',
      createdAt: Math.floor(Date.now() / 1000),
    };
    const created = await storeCall(() =>
      streams.create(stream, { all: options.maxStreams, receiver: options.maxStreamsPerReceiver }),
    );
    if (created === 'receiver') throw receiverFull();
    if (created === 'all') throw transmitterFull();
    ctx.status = 201;
    ctx.body = view(stream);
  });

  router.get(`${base}/streams`, async (ctx) => {
    const receiver = await readerOf(ctx);
    const id = ctx.query['stream_id'];
    if (id === undefined) {
      const own = await storeCall(() => streams.list(receiver, options.maxStreamsPerReceiver));
      ctx.body = own.map(view);
      return;
    }
    ctx.body = view(await ownStream(receiver, readStreamId(id)));
  });

  const streamGone = () => notFound('not_found', 'no stream with this stream_id');
  /** A stream deleted while this request changed it stays deleted: the request then finds no stream. */
  async function saveChange(next: StreamRecord): Promise<void> {
    if (!(await storeCall(() => streams.update(next)))) throw streamGone();
  }

  const change = (replace: boolean) => async (ctx: Koa.Context) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    const stream = await ownStream(receiver, readStreamId(body['stream_id']));
    assertTransmitterSupplied(body, stream);
    const supplied = readReceiverSupplied(body, options.allowedPushHosts);
    await checkPushHost(supplied, options.allowedPushHosts);
    const next: StreamRecord = replace
      ? { ...withoutReceiverSupplied(stream), ...withDefaults(supplied) }
      : { ...stream, ...supplied };
    await saveChange(next);
    ctx.body = view(next);
  };
  router.patch(`${base}/streams`, change(false));
  router.put(`${base}/streams`, change(true));

  router.delete(`${base}/streams`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const stream = await ownStream(receiver, readStreamId(ctx.query['stream_id']));
    await storeCall(() => deleteStream(transmitter, stream));
    ctx.status = 204;
  });

  const statusOf = (stream: StreamRecord): JsonObject => ({
    stream_id: stream.id,
    status: stream.status,
    ...(stream.reason === undefined ? {} : { reason: stream.reason }),
  });

  router.get(`${base}/status`, async (ctx) => {
    const receiver = await readerOf(ctx);
    ctx.body = statusOf(await ownStream(receiver, readStreamId(ctx.query['stream_id'])));
  });

  router.post(`${base}/status`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    const stream = await ownStream(receiver, readStreamId(body['stream_id']));
    const { status, reason } = body;
    if (typeof status !== 'string' || !STATUSES.has(status as StreamStatus)) {
      throw badRequest('status must be enabled, paused or disabled');
    }
    if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_REASON)) {
      throw badRequest(`reason must be a string of at most ${MAX_REASON} characters`);
    }
    const { reason: _previous, ...rest } = stream;
    const next: StreamRecord = { ...rest, status: status as StreamStatus, ...(reason === undefined ? {} : { reason }) };
    await saveChange(next);
    ctx.body = statusOf(next);
    if (next.status === 'enabled') transmitter.wake();
  });

  router.post(`${base}/verify`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    const stream = await ownStream(receiver, readStreamId(body['stream_id']));
    const state = body['state'];
    if (state !== undefined && (typeof state !== 'string' || state.length > 1024)) {
      throw badRequest('state must be a string of at most 1024 characters');
    }
    const now = Math.floor(Date.now() / 1000);
    const interval = options.minVerificationInterval;
    const left = stream.verifiedAt === undefined ? 0 : interval - (now - stream.verifiedAt);
    // Concurrent asks all read the same verifiedAt: the claim lets one of them through.
    const release =
      left > 0 ? undefined : await storeCall(() => streams.claimVerification(stream.id, Date.now() + interval * 1000));
    if (!release) {
      ctx.set('Retry-After', String(left > 0 ? left : interval));
      throw tooManyRequests(`a verification may be asked for once every ${interval} seconds`);
    }
    // A failure leaves no rate record that would refuse the retry with 429.
    await storeCall(async () => {
      await transmitVerification(transmitter, stream, state as string | undefined);
      if (await streams.update({ ...stream, verifiedAt: now })) return;
      // Deleted meanwhile, maybe before the SET was appended: it goes too.
      await deleteStream(transmitter, stream);
      throw streamGone();
    }).catch(async (error: unknown) => {
      await release().catch(() => {});
      throw error;
    });
    ctx.status = 204;
  });

  /** SSF 1.0 8.1.3: every session is a subject of every stream, so a removed subject still gets its events (docs/ssf.md). */
  router.post(`${base}/subjects/add`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    readSubjectChange(body, true);
    await ownStream(receiver, readStreamId(body['stream_id']));
    ctx.body = null;
    ctx.status = 200;
  });
  router.post(`${base}/subjects/remove`, async (ctx) => {
    const receiver = await receiverOf(ctx);
    const body = await readJsonObject(ctx, MAX_BODY);
    readSubjectChange(body, false);
    await ownStream(receiver, readStreamId(body['stream_id']));
    ctx.status = 204;
  });

  router.post(`${base}/poll/:streamId`, async (ctx) => {
    const receiver = await readerOf(ctx);
    const stream = await ownStream(receiver, readStreamId(ctx.params['streamId']));
    if (stream.delivery.method !== POLL_METHOD) throw badRequest('this stream is delivered by push, not poll');
    const request = readPollRequest(await readJsonObject(ctx, 256 * 1024));
    const done = [...request.ack, ...request.setErrs.map(({ jti }) => jti)];
    if (done.length) await storeCall(() => streams.acknowledge(stream.id, done));
    for (const { jti, err } of request.setErrs) {
      (provider as unknown as NodeJS.EventEmitter).emit(SSF_SET_ERROR, Object.freeze({ stream: stream.id, jti, err }));
    }
    let page = { sets: new Map<string, string>(), more: false };
    if (request.maxEvents > 0) {
      const arrived = Date.now();
      const until = arrived + (request.returnImmediately ? 0 : options.longPollTimeoutMs);
      const giveUp = Math.max(until, arrived + SETS_ON_THEIR_WAY_MS);
      for (;;) {
        // Invariant 59: the outbox first, then the queue.
        const behind = await storeCall(() => waitsFor(transmitter.outbox, streamSubscription(stream.id)));
        page = await storeCall(() => streams.queued(stream.id, request.maxEvents));
        if (page.sets.size) break;
        if (stream.status !== 'enabled') throw notDelivered(ctx, stream.status);
        const now = Date.now();
        if (!behind && (now >= until || clientGone(ctx))) break;
        if (now >= giveUp || clientGone(ctx)) {
          ctx.set('Retry-After', '1');
          throw streamBehind('SETs of this stream are still on their way to its queue; poll again shortly');
        }
        await new Promise((resolve) => setTimeout(resolve, LONG_POLL_STEP_MS));
      }
    }
    ctx.body = { sets: Object.fromEntries(page.sets), moreAvailable: page.more };
  });
}

/** The poller hung up (not `ctx.req.destroyed`, which a request whose body was read already is). */
function clientGone(ctx: Koa.Context): boolean {
  return ctx.req.socket.destroyed;
}

/** The 503 of a poll that found nothing on a stream that is not enabled: its SETs are held, or none is sent. */
function notDelivered(ctx: Koa.Context, status: StreamStatus): Error {
  ctx.set('Retry-After', '1');
  return streamBehind(
    status === 'paused'
      ? 'this stream is paused: its SETs are held until it is enabled'
      : 'this stream is disabled: no SET is sent to it',
  );
}

function delivered(requested: readonly string[]): string[] {
  return EVENTS_SUPPORTED.filter((uri) => requested.includes(uri));
}

/** A created or replaced stream: poll when no delivery is named (SSF 1.0 8.1.1.1), every supported event when none is. */
function withDefaults(supplied: ReceiverSupplied): Pick<StreamRecord, 'eventsRequested' | 'delivery' | 'description'> {
  return {
    eventsRequested: supplied.eventsRequested ?? [...EVENTS_SUPPORTED],
    delivery: supplied.delivery ?? { method: POLL_METHOD },
    ...(supplied.description === undefined ? {} : { description: supplied.description }),
  };
}

function withoutReceiverSupplied(
  stream: StreamRecord,
): Omit<StreamRecord, 'eventsRequested' | 'delivery' | 'description'> {
  const { eventsRequested: _events, delivery: _delivery, description: _description, ...rest } = stream;
  return rest;
}
