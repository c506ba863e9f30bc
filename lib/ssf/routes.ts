import { randomBytes } from 'node:crypto';
import type Router from '@koa/router';
import type Koa from 'koa';
import { badRequest, notFound, streamBehind, tooManyRequests, tooManyStreams } from '../errors.js';
import { definedMembers, type JsonObject } from '../json.js';
import { authorize, type Authenticate } from '../http/auth.js';
import { readJsonObject } from '../http/body.js';
import { emitOn } from '../report-error.js';
import { waitsFor } from '../outbox/contract.js';
import { storeCall } from '../store-call.js';
import { ssfConfigurationLocation, streamApiBase, transmitterMetadata } from './discovery.js';
import { readOptionalText, readPollRequest, readReceiverSupplied, readStreamId, readSubjectChange } from './input.js';
import type { PollRequest, ReceiverSupplied } from './input.js';
import { EVENTS_SUPPORTED, POLL_METHOD, PUSH_METHOD } from './names.js';
import type { SetPage, StreamRecord, StreamStatus } from './store.js';
import { deleteStream, streamSubscription, transmitVerification, type Transmitter } from './transmit.js';

/** Emitted on the provider when a poll receiver reports a SET it could not process: `{ stream, jti, err }`. */
export const SSF_SET_ERROR = 'impersonation.ssf.set_error';

const MAX_BODY = 16 * 1024;
const MAX_POLL_BODY = 256 * 1024;
const STATUSES = new Set<StreamStatus>(['enabled', 'paused', 'disabled']);
const MAX_REASON = 256;
const MAX_STATE = 1024;
/** How often a long poll looks at its queue again. */
const LONG_POLL_STEP_MS = 100;
/** How long a poll whose queue is empty waits for SETs still in the outbox before it says 503 rather than "nothing". */
const SETS_ON_THEIR_WAY_MS = 1000;

/** The Transmitter-supplied properties a request may repeat, as long as they hold the values the stream has. */
const TRANSMITTER_SUPPLIED = [
  'iss',
  'aud',
  'events_supported',
  'events_delivered',
  'min_verification_interval',
  'inactivity_timeout',
] as const;

/** What every handler is given: the transmitter, and how a request's bearer token is read. */
type Ssf = Transmitter & { authenticate: Authenticate };

/** The paths the SSF routes answer, for the Management API's error rendering. */
export function ssfPaths(transmitter: Transmitter): string[] {
  return [ssfConfigurationLocation(transmitter.provider.issuer), transmitter.options.path];
}

/** The SSF 1.0 transmitter; a receiver sees only its own streams (any other id is a 404). */
export function ssfRoutes(router: Router, transmitter: Transmitter, authenticate: Authenticate): void {
  const ssf: Ssf = { ...transmitter, authenticate };
  const base = transmitter.options.path;
  const on = (handler: (ssf: Ssf, ctx: Koa.Context) => Promise<void>) => (ctx: Koa.Context) => handler(ssf, ctx);
  router.get(ssfConfigurationLocation(transmitter.provider.issuer), (ctx) => {
    ctx.body = transmitterMetadata(transmitter);
  });
  router.post(`${base}/streams`, on(createStream));
  router.get(`${base}/streams`, on(readStreams));
  router.patch(`${base}/streams`, on(changeStream(false)));
  router.put(`${base}/streams`, on(changeStream(true)));
  router.delete(`${base}/streams`, on(removeStream));
  router.get(`${base}/status`, on(readStatus));
  router.post(`${base}/status`, on(changeStatus));
  router.post(`${base}/verify`, on(verify));
  // SSF 1.0 8.1.3: every session is a subject of every stream, so a removed subject still gets its events (docs/ssf.md).
  router.post(`${base}/subjects/add`, on(changeSubjects(true)));
  router.post(`${base}/subjects/remove`, on(changeSubjects(false)));
  router.post(`${base}/poll/:streamId`, (ctx) => poll(ssf, ctx, ctx.params['streamId']));
}

/** The receiver, by a token with one of the scopes that manage (or, `reading`, read), tried in turn only when one was missing. */
async function callerOf({ options, authenticate }: Ssf, ctx: Koa.Context, reading = false): Promise<string> {
  return (await authorize(ctx, authenticate, ...(reading ? options.readScopes : options.manageScopes))).clientId;
}

const streamGone = () => notFound('not_found', 'no stream with this stream_id');

async function ownStream({ streams }: Transmitter, receiver: string, id: unknown): Promise<StreamRecord> {
  const streamId = readStreamId(id);
  const stream = await storeCall(() => streams.find(streamId));
  if (!stream || stream.receiver !== receiver) throw streamGone();
  return stream;
}

/** A managing request's body, checked by `check` first, and the stream of the caller it names. */
async function bodyAndStream(ssf: Ssf, ctx: Koa.Context, check?: (body: JsonObject) => void) {
  const receiver = await callerOf(ssf, ctx);
  const body = await readJsonObject(ctx, MAX_BODY);
  check?.(body);
  return { body, stream: await ownStream(ssf, receiver, body['stream_id']) };
}

/** A stream deleted while this request changed it stays deleted: the request then finds no stream. */
async function saveChange({ streams }: Transmitter, next: StreamRecord): Promise<void> {
  if (!(await storeCall(() => streams.update(next)))) throw streamGone();
}

function view(transmitter: Transmitter, stream: StreamRecord): JsonObject {
  const { provider, options } = transmitter;
  return {
    stream_id: stream.id,
    iss: provider.issuer,
    aud: stream.audience,
    events_supported: [...EVENTS_SUPPORTED],
    events_requested: stream.eventsRequested,
    events_delivered: EVENTS_SUPPORTED.filter((uri) => stream.eventsRequested.includes(uri)),
    // The authorization header the receiver gave is a credential: kept to push with, never shown again.
    delivery:
      stream.delivery.method === PUSH_METHOD
        ? { method: PUSH_METHOD, endpoint_url: stream.delivery.endpointUrl }
        : { method: POLL_METHOD, endpoint_url: `${streamApiBase(transmitter)}/poll/${stream.id}` },
    min_verification_interval: options.minVerificationInterval,
    ...(stream.description === undefined ? {} : { description: stream.description }),
  };
}

/** SSF 1.0 8.1.1.2: transmitter-supplied values a request repeats must be the stream's. */
async function createStream(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  const { streams, options } = ssf;
  const receiver = await callerOf(ssf, ctx);
  const body = await readJsonObject(ctx, MAX_BODY);
  if (body['stream_id'] !== undefined) throw badRequest('stream_id is set by the transmitter');
  const supplied = await readReceiverSupplied(body, options.allowedPushHosts);
  const bounds = { all: options.maxStreams, receiver: options.maxStreamsPerReceiver };
  const counted = await storeCall(() => streams.count(receiver, bounds.all));
  const full = counted.receiver >= bounds.receiver ? 'receiver' : counted.all >= bounds.all ? 'all' : undefined;
  const stream: StreamRecord = {
    id: randomBytes(16).toString('base64url'),
    receiver,
    audience: receiver,
    ...withDefaults(supplied),
    status: 'enabled',
    createdAt: Math.floor(Date.now() / 1000),
  };
  const created = full ?? (await storeCall(() => streams.create(stream, bounds)));
  if (created === 'receiver')
    throw tooManyStreams(`this receiver has ${bounds.receiver} streams already, the most allowed`);
  if (created === 'all') throw tooManyStreams('the transmitter has as many streams as it allows');
  ctx.status = 201;
  ctx.body = view(ssf, stream);
}

async function readStreams(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  const receiver = await callerOf(ssf, ctx, true);
  const id = ctx.query['stream_id'];
  if (id === undefined) {
    const own = await storeCall(() => ssf.streams.list(receiver, ssf.options.maxStreamsPerReceiver));
    ctx.body = own.map((stream) => view(ssf, stream));
  } else ctx.body = view(ssf, await ownStream(ssf, receiver, id));
}

/** PATCH changes what the request names; PUT (`replace`) replaces every receiver-supplied property. */
function changeStream(replace: boolean) {
  return async (ssf: Ssf, ctx: Koa.Context): Promise<void> => {
    const { body, stream } = await bodyAndStream(ssf, ctx);
    const current = view(ssf, stream);
    for (const name of TRANSMITTER_SUPPLIED) {
      if (body[name] !== undefined && JSON.stringify(body[name]) !== JSON.stringify(current[name]))
        throw badRequest(`${name} is set by the transmitter and differs from this stream's`);
    }
    const supplied = await readReceiverSupplied(body, ssf.options.allowedPushHosts);
    const { description: _replaced, ...kept } = stream;
    const next: StreamRecord = replace ? { ...kept, ...withDefaults(supplied) } : { ...stream, ...supplied };
    await saveChange(ssf, next);
    ctx.body = view(ssf, next);
  };
}

async function removeStream(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  const stream = await ownStream(ssf, await callerOf(ssf, ctx), ctx.query['stream_id']);
  await storeCall(() => deleteStream(ssf, stream));
  ctx.status = 204;
}

function statusOf(stream: StreamRecord): JsonObject {
  return { stream_id: stream.id, status: stream.status, ...definedMembers({ reason: stream.reason }) };
}

async function readStatus(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  ctx.body = statusOf(await ownStream(ssf, await callerOf(ssf, ctx, true), ctx.query['stream_id']));
}

async function changeStatus(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  const { body, stream } = await bodyAndStream(ssf, ctx);
  const status = body['status'];
  if (typeof status !== 'string' || !STATUSES.has(status as StreamStatus))
    throw badRequest('status must be enabled, paused or disabled');
  const reason = readOptionalText(body, 'reason', MAX_REASON);
  const { reason: _previous, ...rest } = stream;
  const next: StreamRecord = { ...rest, status: status as StreamStatus, ...(reason === undefined ? {} : { reason }) };
  await saveChange(ssf, next);
  ctx.body = statusOf(next);
  if (next.status === 'enabled') ssf.wake();
}

async function verify(ssf: Ssf, ctx: Koa.Context): Promise<void> {
  const { streams, options } = ssf;
  const { body, stream } = await bodyAndStream(ssf, ctx);
  const state = readOptionalText(body, 'state', MAX_STATE);
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
    await transmitVerification(ssf, stream, state);
    if (await streams.update({ ...stream, verifiedAt: now })) return;
    // Deleted meanwhile, maybe before the SET was appended: it goes too.
    await deleteStream(ssf, stream);
    throw streamGone();
  }).catch(async (error: unknown) => {
    await release().catch(() => {});
    throw error;
  });
  ctx.status = 204;
}

function changeSubjects(adding: boolean) {
  return async (ssf: Ssf, ctx: Koa.Context): Promise<void> => {
    await bodyAndStream(ssf, ctx, (body) => readSubjectChange(body, adding));
    if (adding) ctx.body = null;
    ctx.status = adding ? 200 : 204;
  };
}

async function poll(ssf: Ssf, ctx: Koa.Context, streamId: string | undefined): Promise<void> {
  const stream = await ownStream(ssf, await callerOf(ssf, ctx, true), streamId);
  if (stream.delivery.method !== POLL_METHOD) throw badRequest('this stream is delivered by push, not poll');
  const request = readPollRequest(await readJsonObject(ctx, MAX_POLL_BODY));
  const done = [...request.ack, ...request.setErrs.map(({ jti }) => jti)];
  if (done.length) await storeCall(() => ssf.streams.acknowledge(stream.id, done));
  for (const { jti, err } of request.setErrs) emitOn(ssf.provider, SSF_SET_ERROR, { stream: stream.id, jti, err });
  const page = request.maxEvents > 0 ? await queuedSets(ssf, ctx, stream, request) : { sets: new Map(), more: false };
  ctx.body = { sets: Object.fromEntries(page.sets), moreAvailable: page.more };
}

/** A poll's page: SETs queued, waited for up to the long poll's timeout, and for those still in the outbox. */
async function queuedSets(ssf: Ssf, ctx: Koa.Context, stream: StreamRecord, request: PollRequest): Promise<SetPage> {
  const arrived = Date.now();
  const until = arrived + (request.returnImmediately ? 0 : ssf.options.longPollTimeoutMs);
  const giveUp = Math.max(until, arrived + SETS_ON_THEIR_WAY_MS);
  for (;;) {
    // Invariant 59: the outbox first, then the queue.
    const behind = await storeCall(() => waitsFor(ssf.outbox, streamSubscription(stream.id)));
    const page = await storeCall(() => ssf.streams.queued(stream.id, request.maxEvents));
    if (page.sets.size) return page;
    if (stream.status !== 'enabled') throw notDelivered(ctx, stream.status);
    const now = Date.now();
    // The poller hung up (not `ctx.req.destroyed`, which a request whose body was read already is).
    if (!behind && (now >= until || ctx.req.socket.destroyed)) return page;
    if (now >= giveUp || ctx.req.socket.destroyed) {
      ctx.set('Retry-After', '1');
      throw streamBehind('SETs of this stream are still on their way to its queue; poll again shortly');
    }
    await new Promise((resolve) => setTimeout(resolve, LONG_POLL_STEP_MS));
  }
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

/** A created or replaced stream: poll when no delivery is named (SSF 1.0 8.1.1.1), every supported event when none is. */
function withDefaults(supplied: ReceiverSupplied) {
  return {
    eventsRequested: supplied.eventsRequested ?? [...EVENTS_SUPPORTED],
    delivery: supplied.delivery ?? { method: POLL_METHOD },
    ...(supplied.description === undefined ? {} : { description: supplied.description }),
  };
}
