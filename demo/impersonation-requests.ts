/**
 * `POST /api/request-impersonation`: a support engineer asks to act as a
 * customer; the backend checks who they are and asks the Management API for
 * a subject token bound to them and to the application they signed in with.
 *
 * A customer who must approve (bob) gets no token at first: the Management
 * API answers 202 with an approval request, which the backend passes on. The
 * console keeps the request's id and asks `GET /api/impersonation-approval`
 * from time to time; the backend reads the request (only the engineer's own)
 * and, once the customer approved, asks for the subject token again, now
 * covered by the grant the approval made. While a request of the engineer's
 * waits, asking again answers with that request (the Management API keeps one
 * per engineer and customer), and with what it asked: its ticket, not the new
 * ask's, is the one the customer, the trail and the console see.
 */
import type Router from '@koa/router';
import type { Actor } from './actor.js';
import type { BackendDependencies } from './backend-dependencies.js';
import { HttpError, jsonOf, readJson } from './http.js';
import { logText } from './log-text.js';
import { ILLEGIBLE_TEXT, isLegibleText } from '../lib/storable-text.js';
import { API_RESOURCE } from './seed.js';

type Access = 'read' | 'edit';

interface ImpersonationRequest {
  userId: string;
  reason: string;
  ticketId: string;
  /** `edit` asks for an impersonation that may change the customer's data (profile:write). */
  access: Access;
}

/** What the backend answers the console: a subject token, a request waiting for the customer, or a refusal. */
interface Answer {
  status: number;
  body: Record<string, unknown>;
}

const MAX_FIELD = { userId: 256, reason: 500, ticketId: 100, access: 4 } as const;
const APPROVAL_REQUEST_ID = /^apr_[A-Za-z0-9_-]{22}$/;
/** What the customer is asked to allow, per access: the demo API, to read, or to read and change. */
const SCOPES: Record<Access, string[]> = { read: ['profile:read'], edit: ['profile:read', 'profile:write'] };

export function impersonationRequestRoutes(router: Router, deps: BackendDependencies): void {
  router.post('/api/request-impersonation', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await deps.supportActor(ctx);
    const request = parseImpersonationRequest(await readJson(ctx));
    if (request.userId === actor.sub) throw new HttpError(400, 'invalid_request', 'you cannot impersonate yourself');
    const { status, body } = await createSubjectToken(deps, creationBody(request, actor, SCOPES[request.access]));
    deps.log(
      `[backend] ${actor.sub} requested impersonation of ${logText(request.userId)} (ticket ${logText(request.ticketId)}): ${status}`,
    );
    ctx.status = status;
    ctx.body = body;
  });

  // Where a request waiting for the customer stands; once approved, the subject token it allows.
  router.get('/api/impersonation-approval', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await deps.supportActor(ctx);
    const id = ctx.query['requestId'];
    if (typeof id !== 'string' || !APPROVAL_REQUEST_ID.test(id))
      throw new HttpError(400, 'invalid_request', 'requestId is not an approval request id');
    const found = await deps.management('GET', `${deps.endpoints.approvalRequests}/${id}`);
    const view = found.body;
    // Only the engineer's own request, from the application they signed in with; any other is unknown here.
    if (found.status !== 200 || view?.['actor'] !== actor.sub || view['clientId'] !== actor.clientId)
      throw new HttpError(404, 'not_found', 'you have no approval request with this id');
    const customer = customerOf(deps, view['subject']);
    switch (view['status']) {
      case 'pending':
        ctx.body = { status: 'pending', customer, expiresAt: view['expiresAt'] };
        return;
      case 'denied':
        ctx.body = {
          status: 'denied',
          customer,
          ...(typeof view['denialReason'] === 'string' ? { reason: view['denialReason'] } : {}),
        };
        return;
      case 'expired':
        ctx.body = { status: 'expired', customer };
        return;
      case 'approved': {
        const answer = await createSubjectToken(deps, resumedBody(view, actor));
        deps.log(
          `[backend] ${actor.sub} resumed impersonation of ${logText(customer.id)} (request ${id}): ${answer.status}`,
        );
        ctx.status = answer.status;
        ctx.body = answer.status === 200 ? { status: 'approved', customer, ...answer.body } : answer.body;
        return;
      }
      default:
        throw new HttpError(
          502,
          'bad_gateway',
          'the Management API showed an approval request this backend cannot read',
        );
    }
  });
}

/**
 * Bound to the engineer and the application they signed in with: a subject
 * token that leaks can be redeemed only there, and only with their own token.
 * The resource and scopes are what the customer is asked to allow.
 */
function creationBody(request: ImpersonationRequest, actor: Actor, scope: readonly string[]): Record<string, unknown> {
  return {
    userId: request.userId,
    context: {
      ticketId: request.ticketId,
      reason: request.reason,
      supportEngineerId: actor.sub,
      access: request.access,
    },
    actorId: actor.sub,
    clientId: actor.clientId,
    resource: API_RESOURCE,
    scope,
  };
}

/**
 * The request again, as it was asked, after the customer approved it: for
 * the scopes the customer allowed (they may have narrowed what was asked), so
 * that the grant their approval made covers it.
 */
function resumedBody(view: Record<string, unknown>, actor: Actor): Record<string, unknown> {
  const grant = view['grant'] as { scope?: unknown } | undefined;
  const asked = askedOf(view);
  const allowed = Array.isArray(grant?.scope) ? grant.scope.filter((name) => typeof name === 'string') : undefined;
  return creationBody(asked, actor, allowed ?? SCOPES[asked.access]);
}

/** What an approval request asked, from the context creationBody() gave it. */
function askedOf(view: Record<string, unknown>): ImpersonationRequest {
  const context = view['context'] as Record<string, unknown> | undefined;
  const fields = [view['subject'], context?.['ticketId'], context?.['reason']];
  const access = context?.['access'];
  if (!fields.every((field) => typeof field === 'string') || (access !== 'read' && access !== 'edit'))
    throw new HttpError(502, 'bad_gateway', 'the approval request does not say what was asked');
  const [userId, ticketId, reason] = fields as [string, string, string];
  return { userId, ticketId, reason, access };
}

function customerOf(deps: BackendDependencies, subject: unknown): { id: string; name: string } {
  const id = String(subject);
  return { id, name: deps.users.get(id)?.name ?? id };
}

async function createSubjectToken(deps: BackendDependencies, creation: Record<string, unknown>): Promise<Answer> {
  const body = JSON.stringify(creation);
  for (let attempt = 0; ; attempt += 1) {
    const token = await deps.m2m.get();
    const response = await deps.call(deps.endpoints.management, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    });
    const answer = await jsonOf(response);
    if (response.status === 401 && attempt === 0) {
      // Revoked, or the identity service restarted: fetch a fresh M2M token once.
      deps.m2m.invalidate();
      continue;
    }
    if (response.ok && typeof answer?.['subjectToken'] === 'string' && typeof answer['expiresIn'] === 'number') {
      return { status: 200, body: { subjectToken: answer['subjectToken'], expiresIn: answer['expiresIn'] } };
    }
    const pending = answer?.['approvalRequest'] as Record<string, unknown> | undefined;
    if (
      response.status === 202 &&
      typeof pending?.['id'] === 'string' &&
      APPROVAL_REQUEST_ID.test(pending['id']) &&
      typeof pending['expiresAt'] === 'string'
    ) {
      // The customer must approve: the console waits for their answer, to the request as it was
      // asked (an earlier ask of the engineer's, when one still waits), and says so.
      return {
        status: 202,
        body: {
          approvalRequest: {
            id: pending['id'],
            expiresAt: pending['expiresAt'],
            customer: customerOf(deps, pending['subject']),
            asked: askedOf(pending),
          },
        },
      };
    }
    // Only the error fields: a malformed success could still carry a subject token.
    deps.log(
      `[backend] Management API answered ${response.status} ${String(answer?.['error'] ?? '')} ${String(answer?.['error_description'] ?? '')}`,
    );
    if (response.ok || response.status === 401) {
      throw new HttpError(502, 'bad_gateway', `the Management API answered ${response.status}`);
    }
    // Its refusal (403, 404, 400, 429, 503, ...) is passed on as it is.
    return {
      status: response.status,
      body: {
        error: typeof answer?.['error'] === 'string' ? answer['error'] : 'management_api_error',
        error_description:
          typeof answer?.['error_description'] === 'string'
            ? answer['error_description']
            : `the Management API answered ${response.status}`,
      },
    };
  }
}

function parseImpersonationRequest(body: unknown): ImpersonationRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(
      400,
      'invalid_request',
      'the body must be a JSON object with userId, reason and ticketId (and access: read or edit)',
    );
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => !(name in MAX_FIELD));
  if (unknown.length) throw new HttpError(400, 'invalid_request', `unknown field: ${unknown.join(', ')}`);
  const read = (name: 'userId' | 'reason' | 'ticketId'): string => {
    const value = fields[name];
    if (typeof value !== 'string' || !value.trim())
      throw new HttpError(400, 'invalid_request', `${name} is required (a non-empty string)`);
    if (name !== 'userId' && !isLegibleText(value))
      throw new HttpError(400, 'invalid_request', `${name} ${ILLEGIBLE_TEXT}`);
    if (value.length > MAX_FIELD[name])
      throw new HttpError(400, 'invalid_request', `${name} is longer than ${MAX_FIELD[name]} characters`);
    return value.trim();
  };
  const access = fields['access'] ?? 'read';
  if (access !== 'read' && access !== 'edit')
    throw new HttpError(400, 'invalid_request', 'access must be read or edit');
  return { userId: read('userId'), reason: read('reason'), ticketId: read('ticketId'), access };
}
