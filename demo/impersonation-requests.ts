/**
 * `POST /api/request-impersonation`: a support engineer asks to act as a
 * customer; the backend checks who they are and asks the Management API for
 * a subject token bound to them and to the application they signed in with.
 */
import type Router from '@koa/router';
import type { Actor } from './actor.js';
import type { BackendDependencies } from './backend-dependencies.js';
import { HttpError, jsonOf, readJson } from './http.js';
import { logText } from './log-text.js';

interface ImpersonationRequest {
  userId: string;
  reason: string;
  ticketId: string;
  /** `edit` asks for an impersonation that may change the customer's data (profile:write). */
  access: 'read' | 'edit';
}

const MAX_FIELD = { userId: 256, reason: 500, ticketId: 100, access: 4 } as const;

export function impersonationRequestRoutes(router: Router, deps: BackendDependencies): void {
  router.post('/api/request-impersonation', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const actor = await deps.supportActor(ctx);
    const request = parseImpersonationRequest(await readJson(ctx));
    if (request.userId === actor.sub) throw new HttpError(400, 'invalid_request', 'you cannot impersonate yourself');
    const { status, body } = await createSubjectToken(deps, request, actor);
    deps.log(
      `[backend] ${actor.sub} requested impersonation of ${logText(request.userId)} (ticket ${logText(request.ticketId)}): ${status}`,
    );
    ctx.status = status;
    ctx.body = body;
  });
}

async function createSubjectToken(
  deps: BackendDependencies,
  request: ImpersonationRequest,
  actor: Actor,
): Promise<{ status: number; body: unknown }> {
  // Bound to the engineer and the application they signed in with: a subject
  // token that leaks can be redeemed only there, and only with their own token.
  const body = JSON.stringify({
    userId: request.userId,
    context: {
      ticketId: request.ticketId,
      reason: request.reason,
      supportEngineerId: actor.sub,
      access: request.access,
    },
    actorId: actor.sub,
    clientId: actor.clientId,
  });
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
    // Only the error fields: a malformed success could still carry a subject token.
    deps.log(
      `[backend] Management API answered ${response.status} ${String(answer?.['error'] ?? '')} ${String(answer?.['error_description'] ?? '')}`,
    );
    if (response.ok || response.status === 401) {
      throw new HttpError(502, 'bad_gateway', `the Management API answered ${response.status}`);
    }
    // Its refusal (403, 404, 400, 503, ...) is passed on as it is.
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
    if (value.length > MAX_FIELD[name])
      throw new HttpError(400, 'invalid_request', `${name} is longer than ${MAX_FIELD[name]} characters`);
    return value.trim();
  };
  const access = fields['access'] ?? 'read';
  if (access !== 'read' && access !== 'edit')
    throw new HttpError(400, 'invalid_request', 'access must be read or edit');
  return { userId: read('userId'), reason: read('reason'), ticketId: read('ticketId'), access };
}
