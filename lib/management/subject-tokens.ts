import type Router from '@koa/router';
import { approvalForCreation } from '../approvals/creation.js';
import { fieldsOf, isIdentifier, readIdentifier, readResource, readScopeList, readText } from '../approvals/input.js';
import type { ApprovalDependencies } from '../approvals/deps.js';
import { approvalRequestView } from '../approvals/view.js';
import { publish } from '../events/publish.js';
import type { EventBus } from '../events/subscriber.js';
import { EVENTS } from '../event-types.js';
import { alreadyRedeemed, badRequest, notFound, requestTooLarge, tooManyRequests } from '../errors.js';
import { authorize, type Authenticate } from '../http/auth.js';
import { isJsonObject, readJsonObject, refuseUnknown } from '../http/body.js';
import { definedMembers, type JsonObject } from '../json.js';
import type { ResolvedOptions } from '../options.js';
import { ILLEGIBLE_TEXT, isLegibleText } from '../storable-text.js';
import { storeCall } from '../store-call.js';
import { createSubjectToken, type SubjectTokenAsk } from '../subject-tokens/create.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';

const BODY_FIELDS = ['userId', 'context', 'clientId', 'actorId'];
/** Accepted only when the deployment has the customer in the loop (the `approvals` option). */
const APPROVAL_FIELDS = ['scope', 'resource', 'breakGlass'];
/** The context's members the trail, the decision point and the customer read as the ticket and the reason. */
const CONTEXT_TEXT = ['ticketId', 'ticket', 'reason'];
/** Room for `userId` and the bindings on top of the context cap. */
const BODY_OVERHEAD = 4096;

/** `POST {managementPath}` creates a subject token for a trusted backend; `DELETE {managementPath}/{id}` withdraws an unredeemed one. */
export function subjectTokenRoutes(
  router: Router,
  bus: EventBus,
  options: ResolvedOptions,
  store: SubjectTokenStore,
  approvalDeps: ApprovalDependencies,
  authenticate: Authenticate,
): void {
  const creation = {
    bus,
    options,
    store,
    approve: options.approvals && ((ask, ctx) => approvalForCreation(approvalDeps, ask, ctx)),
  } satisfies Parameters<typeof createSubjectToken>[0];

  router.post(options.managementPath, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.managementScope);
    const ask = parseCreation(await readJsonObject(ctx, options.maxContextBytes + BODY_OVERHEAD), options);
    const outcome = await createSubjectToken(creation, caller, ask, ctx, ({ value, record }) => {
      ctx.status = 201;
      ctx.body = { subjectToken: value, expiresIn: options.subjectTokenTTL, id: record.id };
    });
    if (outcome.kind === 'spent') {
      ctx.set('Retry-After', String(outcome.retryAfter));
      throw tooManyRequests(
        `this client has created as many subject tokens this hour as allowed (${outcome.max}); retry in ${outcome.retryAfter} s`,
      );
    }
    if (outcome.kind === 'pending') {
      ctx.status = 202;
      ctx.body = { approvalRequest: approvalRequestView(outcome.request) };
    }
  });

  router.delete(`${options.managementPath}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.revokeScope);
    const id = ctx.params['id']!;
    const outcome = /^stid_[A-Za-z0-9_-]{16}$/.test(id) ? await storeCall(() => store.withdraw(id)) : 'unknown';
    if (outcome === 'unknown') throw notFound('not_found', 'no subject token has this id (or it expired)');
    if (outcome === 'redeemed')
      throw alreadyRedeemed('the subject token was already exchanged; revoke its impersonation session instead');
    ctx.status = 204;
    await publish(bus, { name: EVENTS.subjectTokenWithdrawn, subjectTokenId: id, revokedBy: caller.clientId }, ctx);
  });
}

function parseCreation(body: JsonObject, options: ResolvedOptions): SubjectTokenAsk {
  refuseUnknown('field', body, options.approvals ? [...BODY_FIELDS, ...APPROVAL_FIELDS] : BODY_FIELDS);

  const { userId, context = {} } = body;
  if (!isIdentifier(userId)) throw badRequest('userId must be a non-empty string');
  if (!isJsonObject(context)) throw badRequest('context must be a JSON object');
  if (Buffer.byteLength(JSON.stringify(context)) > options.maxContextBytes)
    throw requestTooLarge(`context exceeds ${options.maxContextBytes} bytes of JSON`);
  for (const name of CONTEXT_TEXT) {
    const text = context[name];
    if (typeof text === 'string' && !isLegibleText(text)) throw badRequest(`context.${name} ${ILLEGIBLE_TEXT}`);
  }
  const clientId = readIdentifier(body['clientId'], 'clientId');
  const actorId = readIdentifier(body['actorId'], 'actorId');
  const scope = readScopeList(body['scope'], 'scope');
  const resource = readResource(body['resource'], 'resource');
  const breakGlass = body['breakGlass'] === undefined ? undefined : readBreakGlass(body['breakGlass']);
  if (breakGlass) assertBreakGlassBound(clientId, actorId);
  return { subject: userId, context, ...definedMembers({ clientId, actor: actorId, scope, resource, breakGlass }) };
}

/** `{ reason }`: why the customer's approval is bypassed, mandatory, recorded and shown to the customer. */
function readBreakGlass(value: unknown): { reason: string } {
  const reason = readText(fieldsOf(value, ['reason'], 'breakGlass')['reason'], 'breakGlass.reason');
  if (reason === undefined) throw badRequest('breakGlass.reason is required');
  return { reason };
}

/** A bypass names who acts and through which client: a token bound to no one could be redeemed by any client. */
function assertBreakGlassBound(clientId: unknown, actorId: unknown): void {
  const missing = [...(actorId === undefined ? ['actorId'] : []), ...(clientId === undefined ? ['clientId'] : [])];
  if (!missing.length) return;
  throw badRequest(
    `breakGlass requires ${missing.join(' and ')}: a bypass names the person who acts (actorId) and the client that redeems the token (clientId)`,
  );
}
