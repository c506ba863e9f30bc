import type Router from '@koa/router';
import type { Provider } from 'oidc-provider';
import { approvalForCreation } from '../approvals/creation.js';
import { secondsUntilRenewed, subjectTokenQuota } from '../capacity.js';
import type { ApprovalDependencies } from '../approvals/deps.js';
import { fieldsOf, readResource, readScopeList, readText } from '../approvals/input.js';
import type { ApprovalStore } from '../approvals/store.js';
import { approvalRequestView } from '../approvals/view.js';
import { publish, publishRecorded } from '../events/publish.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import {
  accessDenied,
  alreadyRedeemed,
  badRequest,
  managementUnavailable,
  notFound,
  requestTooLarge,
  tooManyRequests,
} from '../errors.js';
import { TOKEN_EXCHANGE_GRANT } from '../exchange/grant.js';
import { authorize, type Authenticate } from '../http/auth.js';
import { isIdentifier, isJsonObject, readJsonObject } from '../http/body.js';
import { definedMembers } from '../json.js';
import { refusalReason } from '../config/decisions.js';
import type { JsonObject } from '../json.js';
import type { ResolvedOptions } from '../options.js';
import { providerConfiguration } from '../provider-internals.js';
import { ILLEGIBLE_TEXT, isLegibleText, storableText } from '../storable-text.js';
import { storeCall } from '../store-call.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';

const BODY_FIELDS = ['userId', 'context', 'clientId', 'actorId'];
/** Accepted only when the deployment has the customer in the loop (the `approvals` option). */
const APPROVAL_FIELDS = ['scope', 'resource', 'breakGlass'];
const BREAK_GLASS_REFUSED = "this client may not bypass the customer's approval";
/** The context's members the trail, the decision point and the customer read as the ticket and the reason. */
const CONTEXT_TEXT = ['ticketId', 'ticket', 'reason'];
const CLIENT_SUBJECT = 'userId names a client: only users are impersonated';
/** Room for `userId` and the bindings on top of the context cap. */
const BODY_OVERHEAD = 4096;

interface CreationRequest {
  userId: string;
  context: JsonObject;
  clientId?: string;
  actorId?: string;
  /** The ceiling asked of the customer. */
  scope?: string[];
  resource?: string;
  breakGlass?: { reason: string };
}

/** `POST {managementPath}` creates a subject token for a trusted backend; `DELETE {managementPath}/{id}` withdraws an unredeemed one. */
export function subjectTokenRoutes(
  router: Router,
  provider: Provider,
  options: ResolvedOptions,
  stores: { subjectTokens: SubjectTokenStore; approvals: ApprovalStore; sessions: SessionStore },
  authenticate: Authenticate,
): void {
  const store = stores.subjectTokens;
  const approvalDeps: ApprovalDependencies = {
    provider,
    options,
    approvals: stores.approvals,
    sessions: stores.sessions,
  };

  router.post(options.managementPath, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.managementScope);
    const request = parseCreation(await readJsonObject(ctx, options.maxContextBytes + BODY_OVERHEAD), options);
    // Only the clients the deployment names may bypass the customer; an attempt by another is recorded.
    if (request.breakGlass && !options.approvals?.breakGlassClients.includes(caller.clientId)) {
      await publish(provider, creationRefused(request, caller, BREAK_GLASS_REFUSED), ctx);
      throw accessDenied(BREAK_GLASS_REFUSED);
    }

    const account = await storeCall(() => providerConfiguration(provider).findAccount(ctx as never, request.userId));
    if (!account) throw notFound('user_not_found', 'no user has this userId');
    if (request.clientId !== undefined) await assertExchangeClient(provider, request.clientId);

    // A client is no user, whatever findAccount answers: a token naming one in `sub` would read as its own.
    const refused = (await storeCall(() => provider.Client.find(request.userId)))
      ? CLIENT_SUBJECT
      : options.canImpersonate &&
        refusalReason(
          await options.canImpersonate({
            subject: request.userId,
            account,
            caller,
            context: request.context,
            ...(request.actorId === undefined ? {} : { actor: request.actorId }),
            ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
            ...(request.breakGlass ? { breakGlass: { reason: request.breakGlass.reason } } : {}),
          }),
          'this user may not be impersonated',
        );
    if (refused) {
      // The policy's words are recorded as given, but always in a storable form.
      await publish(provider, creationRefused(request, caller, storableText(refused)), ctx);
      throw accessDenied(refused);
    }

    // The customer's say, unless the caller may and does bypass it (break-glass).
    let accessGrantId: string | undefined;
    if (options.approvals && !request.breakGlass) {
      const approval = await approvalForCreation(
        approvalDeps,
        {
          subject: request.userId,
          account,
          ...(request.actorId === undefined ? {} : { actor: request.actorId }),
          caller,
          ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
          context: request.context,
          ...(request.resource === undefined ? {} : { resource: request.resource }),
          ...(request.scope === undefined ? {} : { scope: request.scope }),
        },
        ctx,
      );
      if (approval.kind === 'pending') {
        ctx.status = 202;
        ctx.body = { approvalRequest: approvalRequestView(approval.request) };
        return;
      }
      if (approval.kind === 'grant') accessGrantId = approval.grant.id;
    }

    const quota = subjectTokenQuota(caller.clientId, options.maxSubjectTokensPerClient);
    const saved = await storeCall(() =>
      store.create(
        {
          subject: request.userId,
          context: request.context,
          createdBy: caller.clientId,
          ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
          ...(request.actorId === undefined ? {} : { actor: request.actorId }),
          ...(accessGrantId === undefined ? {} : { accessGrantId }),
          ...(request.breakGlass ? { breakGlass: request.breakGlass } : {}),
          ttl: options.subjectTokenTTL,
        },
        quota,
      ),
    );
    if (!saved) {
      const retryAfter = secondsUntilRenewed(quota);
      ctx.set('Retry-After', String(retryAfter));
      throw tooManyRequests(
        `this client has created as many subject tokens this hour as allowed (${quota.max}); retry in ${retryAfter} s`,
      );
    }
    const { value, record } = saved;

    const created: ImpersonationEvent<typeof EVENTS.subjectTokenCreated> = {
      name: EVENTS.subjectTokenCreated,
      subjectTokenId: record.id,
      subject: record.subject,
      createdBy: record.createdBy,
      context: record.context,
      expiresAt: record.exp,
    };
    if (record.clientId !== undefined) created.clientId = record.clientId;
    if (record.actor !== undefined) created.actor = record.actor;
    if (accessGrantId !== undefined) created.accessGrantId = accessGrantId;
    const emergency: ImpersonationEvent<typeof EVENTS.breakGlassUsed> | undefined = request.breakGlass && {
      name: EVENTS.breakGlassUsed,
      subjectTokenId: record.id,
      subject: record.subject,
      createdBy: record.createdBy,
      context: record.context,
      expiresAt: record.exp,
      ...definedMembers({ clientId: record.clientId, actor: record.actor }),
      reason: request.breakGlass.reason,
    };
    // No subject token without its record: one whose record fails is withdrawn; the creation is recorded before the bypass.
    ctx.status = 201;
    ctx.body = { subjectToken: value, expiresIn: options.subjectTokenTTL, id: record.id };
    try {
      await publishRecorded(provider, emergency ? [created, emergency] : [created], ctx);
    } catch (error) {
      await store.withdraw(record.id).catch(() => {});
      throw managementUnavailable('the audit trail cannot be written; no subject token was issued', error);
    }
  });

  router.delete(`${options.managementPath}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.revokeScope);
    const id = ctx.params['id']!;
    const outcome = /^stid_[A-Za-z0-9_-]{16}$/.test(id) ? await storeCall(() => store.withdraw(id)) : 'unknown';
    if (outcome === 'unknown') throw notFound('not_found', 'no subject token has this id (or it expired)');
    if (outcome === 'redeemed') {
      throw alreadyRedeemed('the subject token was already exchanged; revoke its impersonation session instead');
    }
    ctx.status = 204;
    await publish(
      provider,
      { name: EVENTS.subjectTokenWithdrawn, subjectTokenId: id, revokedBy: caller.clientId },
      ctx,
    );
  });
}

/** A creation refused (by the policy, or a break-glass from a client not named), as the trail records it. */
function creationRefused(
  request: CreationRequest,
  caller: { clientId: string },
  reason: string,
): ImpersonationEvent<typeof EVENTS.subjectTokenRefused> {
  return {
    name: EVENTS.subjectTokenRefused,
    subject: request.userId,
    createdBy: caller.clientId,
    context: request.context,
    ...definedMembers({ clientId: request.clientId, actor: request.actorId }),
    error: 'access_denied',
    reason,
  };
}

function parseCreation(body: JsonObject, options: ResolvedOptions): CreationRequest {
  const allowed = options.approvals ? [...BODY_FIELDS, ...APPROVAL_FIELDS] : BODY_FIELDS;
  const unknown = Object.keys(body).filter((field) => !allowed.includes(field));
  if (unknown.length) throw badRequest(`unknown field: ${unknown.join(', ')}`);

  const { userId, context = {}, clientId, actorId } = body;
  if (!isIdentifier(userId)) throw badRequest('userId must be a non-empty string');
  if (!isJsonObject(context)) throw badRequest('context must be a JSON object');
  if (Buffer.byteLength(JSON.stringify(context)) > options.maxContextBytes) {
    throw requestTooLarge(`context exceeds ${options.maxContextBytes} bytes of JSON`);
  }
  for (const name of CONTEXT_TEXT) {
    const text = context[name];
    if (typeof text === 'string' && !isLegibleText(text)) throw badRequest(`context.${name} ${ILLEGIBLE_TEXT}`);
  }
  if (clientId !== undefined && !isIdentifier(clientId)) throw badRequest('clientId must be a non-empty string');
  if (actorId !== undefined && !isIdentifier(actorId)) throw badRequest('actorId must be a non-empty string');
  const scope = readScopeList(body['scope'], 'scope');
  const resource = readResource(body['resource'], 'resource');
  const breakGlass = body['breakGlass'] === undefined ? undefined : readBreakGlass(body['breakGlass']);
  if (breakGlass) assertBreakGlassBound(clientId, actorId);
  return {
    userId,
    context,
    ...(clientId === undefined ? {} : { clientId }),
    ...(actorId === undefined ? {} : { actorId }),
    ...(scope === undefined ? {} : { scope }),
    ...(resource === undefined ? {} : { resource }),
    ...(breakGlass === undefined ? {} : { breakGlass }),
  };
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

async function assertExchangeClient(provider: Provider, clientId: string): Promise<void> {
  const client = await storeCall(() => provider.Client.find(clientId));
  if (!client?.grantTypeAllowed(TOKEN_EXCHANGE_GRANT)) {
    throw badRequest('clientId does not name a client allowed to use token exchange');
  }
}
