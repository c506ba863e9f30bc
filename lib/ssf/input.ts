import { badRequest } from '../errors.js';
import type { JsonObject } from '../json.js';
import type { PushAllowList } from './options.js';
import { pushHostProblem, pushUrlProblem } from './push-target.js';
import { POLL_METHOD, PUSH_METHOD } from './names.js';
import type { StreamRecord } from './store.js';

/** Receiver-supplied properties of a stream (SSF 1.0 8.1.1), as a create, update or replace sends them. */
export type ReceiverSupplied = Partial<Pick<StreamRecord, 'eventsRequested' | 'delivery' | 'description'>>;

const MAX_EVENTS_REQUESTED = 32;
const MAX_URI = 512;
const MAX_DESCRIPTION = 256;
const MAX_AUTHORIZATION = 2048;
const PRINTABLE = /^[\x20-\x7E]+$/;
const isEventUri = (uri: unknown) => typeof uri === 'string' && uri.length > 0 && uri.length <= MAX_URI;

export function readStreamId(value: unknown): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(value))
    throw badRequest('stream_id must be the id of a stream');
  return value;
}

export function readOptionalText(body: JsonObject, name: string, max: number): string | undefined {
  const value = body[name];
  if (value === undefined || (typeof value === 'string' && value.length <= max)) return value;
  throw badRequest(`${name} must be a string of at most ${max} characters`);
}

/** The receiver-supplied properties of a body, each checked, none half-taken; a push URL's host resolved last. */
export async function readReceiverSupplied(body: JsonObject, allow: PushAllowList): Promise<ReceiverSupplied> {
  const result: ReceiverSupplied = {};
  const events = body['events_requested'];
  if (events !== undefined) {
    if (!Array.isArray(events) || events.length > MAX_EVENTS_REQUESTED || !events.every(isEventUri))
      throw badRequest(`events_requested must be an array of at most ${MAX_EVENTS_REQUESTED} event type URIs`);
    result.eventsRequested = [...new Set(events as string[])];
  }
  const description = readOptionalText(body, 'description', MAX_DESCRIPTION);
  if (description !== undefined) result.description = description;
  const delivery = body['delivery'];
  if (delivery !== undefined) result.delivery = readDelivery(delivery, allow);
  // A host name that resolves to an address the service may not push to is refused.
  if (result.delivery?.method === PUSH_METHOD) {
    const problem = await pushHostProblem(new URL(result.delivery.endpointUrl), allow);
    if (problem) throw badRequest(`delivery.endpoint_url ${problem}`);
  }
  return result;
}

function readDelivery(delivery: unknown, allow: PushAllowList): StreamRecord['delivery'] {
  if (typeof delivery !== 'object' || delivery === null || Array.isArray(delivery))
    throw badRequest('delivery must be an object');
  const { method, endpoint_url: endpoint, authorization_header: authorization } = delivery as Record<string, unknown>;
  // SSF 1.0 8.1.1.1: a delivery without a method is poll.
  if (method === undefined || method === POLL_METHOD) {
    // The poll URL is the transmitter's to give: one sent is ignored, as another transmitter-supplied value would be.
    if (authorization !== undefined) throw badRequest('delivery.authorization_header applies to push delivery only');
    return { method: POLL_METHOD };
  }
  if (method !== PUSH_METHOD) throw badRequest(`delivery.method must be ${PUSH_METHOD} or ${POLL_METHOD}`);
  const url = typeof endpoint === 'string' && endpoint.length <= MAX_URI ? URL.parse(endpoint) : null;
  if (!url || url.username || url.password || url.hash || !/^https?:$/.test(url.protocol))
    throw badRequest('delivery.endpoint_url must be an https URL without credentials or fragment');
  const problem = pushUrlProblem(url, allow);
  if (problem) throw badRequest(`delivery.endpoint_url ${problem}`);
  if (authorization === undefined) return { method: PUSH_METHOD, endpointUrl: url.href };
  if (typeof authorization !== 'string' || authorization.length > MAX_AUTHORIZATION || !PRINTABLE.test(authorization)) {
    throw badRequest(
      `delivery.authorization_header must be printable ASCII of at most ${MAX_AUTHORIZATION} characters`,
    );
  }
  return { method: PUSH_METHOD, endpointUrl: url.href, authorizationHeader: authorization };
}

export type PollRequest = ReturnType<typeof readPollRequest>;

const MAX_EVENTS_PER_POLL = 100;
const MAX_ACKS = 1000;
const JTI = /^[\x21-\x7E]{1,128}$/;
const SET_ERRS_FORM = 'setErrs must be an object of jti to { err, description }';

/** An RFC 8936 2.4 poll request. */
export function readPollRequest(body: JsonObject) {
  const { maxEvents = MAX_EVENTS_PER_POLL, returnImmediately = false, ack = [], setErrs = {} } = body;
  if (!Number.isSafeInteger(maxEvents) || (maxEvents as number) < 0)
    throw badRequest('maxEvents must be a non-negative integer');
  if (typeof returnImmediately !== 'boolean') throw badRequest('returnImmediately must be true or false');
  if (!Array.isArray(ack) || ack.length > MAX_ACKS || ack.some((jti) => typeof jti !== 'string' || !JTI.test(jti)))
    throw badRequest(`ack must be an array of at most ${MAX_ACKS} jti values`);
  if (typeof setErrs !== 'object' || setErrs === null || Array.isArray(setErrs)) throw badRequest(SET_ERRS_FORM);
  const errs = Object.entries(setErrs);
  if (errs.length > MAX_ACKS) throw badRequest(`setErrs must name at most ${MAX_ACKS} jti values`);
  const reported = errs.map(([jti, value]) => {
    const err = (value as { err?: unknown } | null)?.err;
    if (!JTI.test(jti) || typeof err !== 'string' || !/^[A-Za-z0-9_]{1,64}$/.test(err)) throw badRequest(SET_ERRS_FORM);
    return { jti, err };
  });
  return {
    maxEvents: Math.min(maxEvents as number, MAX_EVENTS_PER_POLL),
    returnImmediately,
    ack: ack as string[],
    setErrs: reported,
  };
}

/** RFC 9493 3.2 and SSF 1.0 3: the subject identifier formats, and the members each must have. */
const SUBJECT_FORMATS: Readonly<Record<string, readonly string[]>> = {
  account: ['uri'],
  email: ['email'],
  iss_sub: ['iss', 'sub'],
  opaque: ['id'],
  phone_number: ['phone_number'],
  did: ['url'],
  uri: ['uri'],
  jwt_id: ['iss', 'jti'],
  saml_assertion_id: ['issuer', 'assertion_id'],
  ip_addresses: ['ip_addresses'],
};
const MAX_SUBJECT_MEMBER = 512;
const MAX_ALIASES = 10;

/** The body of an add or remove subject request (SSF 1.0 8.1.3.2, 8.1.3.3). */
export function readSubjectChange(body: JsonObject, adding: boolean): void {
  if (!isSubject(body['subject'], 0))
    throw badRequest('subject must be a subject identifier of a format RFC 9493 or SSF 1.0 defines');
  const verified = body['verified'];
  if (verified !== undefined && (!adding || typeof verified !== 'boolean'))
    throw badRequest(adding ? 'verified must be true or false' : 'verified applies to adding a subject only');
}

function isSubject(value: unknown, depth: number): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { format, ...members } = value as Record<string, unknown>;
  // SSF 1.0 3.2: aliases, and a complex subject's members, are simple subjects (at depth 1 neither form is one).
  if ((format === 'aliases' || format === 'complex') && depth === 0) {
    const inner = format === 'aliases' ? members['identifiers'] : Object.values(members);
    return isShortList(inner, (subject) => isSubject(subject, depth + 1));
  }
  if (typeof format !== 'string' || !Object.hasOwn(SUBJECT_FORMATS, format)) return false;
  return SUBJECT_FORMATS[format]!.every((name) =>
    name === 'ip_addresses' ? isShortList(members[name], isShortText) : isShortText(members[name]),
  );
}

function isShortList(value: unknown, each: (item: unknown) => boolean): boolean {
  return Array.isArray(value) && value.length > 0 && value.length <= MAX_ALIASES && value.every(each);
}

function isShortText(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_SUBJECT_MEMBER;
}
