/**
 * The OpenAPI description of the Management API against the running service:
 * every endpoint is driven over HTTP through its success and error answers,
 * and each answer (status, headers, content type, body) must be one the
 * description documents, so the description cannot drift from the code.
 *
 * The document itself is checked by @seriousme/openapi-schema-validator (the
 * official OpenAPI 3.1 JSON Schemas); answers by Ajv's JSON Schema 2020-12
 * validator, the dialect OpenAPI 3.1 schemas are written in.
 */
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { expect } from 'chai';
import pg from 'pg';
import { approveRequest, denyRequest, endAccessGrant, giveGrant } from '../../lib/approvals/actions.js';
import type { ApprovalPolicyInput, ApprovalRequirement } from '../../lib/approvals/options.js';
import { newApprovalRequestId, type ApprovalRequest } from '../../lib/approvals/record.js';
import type { ApprovalStore } from '../../lib/approvals/store.js';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { REDIS_URL, redisTestAdapter } from '../support/adapter.js';
import { newCustomer, startApprovalProvider, type ApprovalProvider } from '../support/approvals.js';
import { ACCESS_TOKEN, decodeJwt, exchange, m2mToken, subjectToken, userAccessToken } from '../support/http.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import {
  API,
  CLIENTS,
  CUSTOMER_API,
  CUSTOMER_SCOPE,
  READ_SCOPE,
  REVOKE_SCOPE,
  type TestProvider,
} from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';
import { scaled } from '../support/time.js';

type Json = Record<string, unknown>;
type Method = 'get' | 'post' | 'delete';

/** The customer API on every provider of this file; few grants per customer, so that the cap is reached. */
const APPROVALS = { customerResource: CUSTOMER_API, maxGrantsPerCustomer: 2 };

/** The customer's own sign-in, for the customer API. */
function customerToken(tp: TestProvider, user: string, scope = `openid ${CUSTOMER_SCOPE}`): Promise<string> {
  return userAccessToken(tp, user, { client: CLIENTS.customer, scope, resource: CUSTOMER_API });
}

/** A request waiting for `subject`'s answer, kept as the Management API keeps one. */
async function pendingRequest(store: ApprovalStore, subject: string, expiresIn = 900): Promise<ApprovalRequest> {
  const now = Math.floor(Date.now() / 1000);
  const request: ApprovalRequest = {
    id: newApprovalRequestId(),
    subject,
    actor: 'alice',
    requestedBy: CLIENTS.backend.client_id,
    clientId: CLIENTS.console.client_id,
    context: { ticketId: 'T-7' },
    resource: API,
    scope: ['profile:read', 'profile:write'],
    createdAt: now - 1,
    expiresAt: now + expiresIn,
  };
  await store.saveRequest(request, 20);
  return request;
}

const DESCRIPTION = new URL('../../../docs/management-api.openapi.json', import.meta.url);
const document = JSON.parse(readFileSync(DESCRIPTION, 'utf8')) as {
  paths: Record<string, Partial<Record<Method, Operation>>>;
  components: { responses: Record<string, ResponseObject>; headers: Record<string, HeaderObject> };
};

interface Operation {
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, ResponseObject | { $ref: string }>;
}
interface ResponseObject {
  headers?: Record<string, HeaderObject | { $ref: string }>;
  content?: Record<string, { schema: unknown }>;
}
interface HeaderObject {
  required?: boolean;
  schema: Json;
}

const BASE_ID = 'urn:oidc-provider-impersonation:management-api';

/** The customer must approve a request whose context says so; any other is issued as without approvals. */
function customerMustApprove({ context }: ApprovalPolicyInput): ApprovalRequirement {
  return context['approval'] ? 'grant' : 'none';
}
const ajv = new Ajv2020({ strict: false, allErrors: true });
(formats as unknown as (ajv: Ajv2020) => void)(ajv);
// The whole description is added once, so a schema is compiled by its JSON pointer and its $refs resolve.
ajv.addSchema({ ...document, $id: BASE_ID });

function pointer(...parts: string[]): string {
  return `${BASE_ID}#/${parts.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

function resolve<T>(value: T | { $ref: string }): { object: T; at: string[] } {
  if (value && typeof value === 'object' && '$ref' in value) {
    const at = value.$ref.replace(/^#\//, '').split('/');
    let object: unknown = document;
    for (const part of at) object = (object as Json)[part];
    return { object: object as T, at };
  }
  return { object: value as T, at: [] };
}

function assertValid(schemaRef: string, value: unknown, what: string): void {
  const validate = ajv.getSchema(schemaRef) ?? ajv.compile({ $ref: schemaRef });
  if (!validate(value)) {
    throw new Error(
      `${what} does not match the description: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`,
    );
  }
}

/** What the tests exercised, as `METHOD path status`. */
const exercised = new Set<string>();

interface Call {
  token?: string;
  body?: unknown;
  /** A raw body, sent as it is. */
  raw?: string;
  contentType?: string;
  /** The request is one the description allows: its body is checked against the request schema too. */
  conforming?: boolean;
}

/** Sends a request to `path` (the template it instantiates named separately) and checks the answer against the description. */
async function call(
  tp: TestProvider,
  method: Method,
  template: string,
  path: string,
  options: Call = {},
): Promise<{ status: number; body: Json }> {
  const operation = document.paths[template]?.[method];
  if (!operation) throw new Error(`the description has no ${method.toUpperCase()} ${template}`);

  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: string | undefined = options.raw;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  if (options.conforming && options.body !== undefined) {
    expect(operation.requestBody, `${method} ${template} takes no body`).to.not.equal(undefined);
    assertValid(
      pointer('paths', template, method, 'requestBody', 'content', 'application/json', 'schema'),
      options.body,
      'the request body',
    );
  }

  const response = await fetch(`${tp.base}${path}`, {
    method: method.toUpperCase(),
    headers,
    body,
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  const text = await response.text();
  const what = `${method.toUpperCase()} ${path} → ${response.status}`;

  const documented = operation.responses[String(response.status)];
  if (!documented)
    throw new Error(
      `${what}: the description documents no ${response.status} for ${method.toUpperCase()} ${template} (${text})`,
    );
  const { object: answer, at } = resolve<ResponseObject>(documented);
  const base = at.length ? at : ['paths', template, method, 'responses', String(response.status)];

  for (const [name, header] of Object.entries(answer.headers ?? {})) {
    const { object } = resolve<HeaderObject>(header);
    const value = response.headers.get(name);
    if (value === null) {
      if (object.required) throw new Error(`${what}: the required header ${name} is missing`);
      continue;
    }
    if (!ajv.validate(object.schema, value))
      throw new Error(`${what}: header ${name}: ${JSON.stringify(value)} ${ajv.errorsText()}`);
  }

  let parsed: Json = {};
  if (answer.content) {
    const [mediaType] = Object.keys(answer.content);
    const contentType = response.headers.get('content-type') ?? '';
    expect(contentType.split(';')[0], `${what}: content type`).to.equal(mediaType);
    parsed = JSON.parse(text) as Json;
    assertValid(pointer(...base, 'content', mediaType!, 'schema'), parsed, what);
  } else {
    expect(text, `${what}: the description documents no body`).to.equal('');
  }
  exercised.add(`${method.toUpperCase()} ${template} ${response.status}`);
  return { status: response.status, body: parsed };
}

describe('Management API: the OpenAPI description matches the running service', function () {
  this.timeout(60_000);
  let schema: string;
  let pool: pg.Pool;
  let ap: ApprovalProvider;
  let tp: TestProvider;
  let creator: string;
  let admin: string;
  let reader: string;
  let sessionId: string;
  let approvals: ApprovalStore;
  let bob: string;
  let carol: string;

  before(async () => {
    schema = await testSchema();
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 3 });
    ap = await startApprovalProvider({
      plugin: {
        auditLog: createPostgresAuditLog({ pool, schema }),
        canImpersonate: ({ subject }) => subject !== 'admin' || { reason: 'administrators cannot be impersonated' },
      },
      approvals: {
        ...APPROVALS,
        require: customerMustApprove,
        breakGlassClients: [CLIENTS.oncall.client_id],
        maxPendingPerCustomer: 1,
      },
    });
    tp = ap.tp;
    approvals = ap.deps.approvals;
    bob = await customerToken(tp, 'bob');
    carol = await customerToken(tp, 'carol');
    creator = await m2mToken(tp);
    admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
    reader = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
    const alice = await userAccessToken(tp, 'alice');
    for (let round = 0; round < 2; round += 1) {
      const exchanged = await exchange(tp, {
        subject_token: await subjectToken(tp, { userId: 'bob', context: { ticketId: `T-${round}` } }),
        resource: API,
        scope: 'profile:read',
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    }
  });
  after(async () => {
    await tp?.close();
    await pool?.end();
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(document as never);
    expect(result.errors ?? [], JSON.stringify(result.errors)).to.deep.equal([]);
    expect(result.valid).to.equal(true);
    expect(validator.version).to.equal('3.1');
  });

  describe('POST /api/subject-tokens', () => {
    const path = '/api/subject-tokens';
    it('201 with a token, and every refusal', async () => {
      const created = await call(tp, 'post', path, path, {
        token: creator,
        conforming: true,
        body: {
          userId: 'bob',
          context: { ticketId: 'T-9', reason: 'invoices' },
          clientId: 'support-console',
          actorId: 'alice',
        },
      });
      expect(created.status).to.equal(201);
      expect(
        (await call(tp, 'post', path, path, { token: creator, raw: '{"userId":"bob"}', contentType: 'text/plain' }))
          .status,
      ).to.equal(400);
      expect(
        (await call(tp, 'post', path, path, { token: creator, body: { userId: 'bob', actorID: 'alice' } })).status,
      ).to.equal(400);
      expect(
        (await call(tp, 'post', path, path, { token: creator, body: { userId: 'bob', context: { t: 'T\u0000' } } }))
          .status,
      ).to.equal(400);
      expect((await call(tp, 'post', path, path, { body: { userId: 'bob' } })).status).to.equal(401);
      expect((await call(tp, 'post', path, path, { token: 'not-a-token', body: { userId: 'bob' } })).status).to.equal(
        401,
      );
      expect((await call(tp, 'post', path, path, { token: admin, body: { userId: 'bob' } })).body['error']).to.equal(
        'insufficient_scope',
      );
      expect(
        (await call(tp, 'post', path, path, { token: creator, conforming: true, body: { userId: 'admin' } })).body[
          'error'
        ],
      ).to.equal('access_denied');
      expect(
        (await call(tp, 'post', path, path, { token: creator, conforming: true, body: { userId: 'nobody' } })).status,
      ).to.equal(404);
      expect(
        (
          await call(tp, 'post', path, path, {
            token: creator,
            body: { userId: 'bob', context: { text: 'x'.repeat(3000) } },
          })
        ).status,
      ).to.equal(413);
    });

    it('202 with an approval request when the customer must approve, 429 past the cap, and break-glass', async () => {
      const customer = newCustomer();
      const asked = {
        userId: customer,
        actorId: 'alice',
        clientId: 'support-console',
        context: { approval: true, ticketId: 'T-3' },
        scope: ['profile:read'],
        resource: API,
      };
      const pending = await call(tp, 'post', path, path, { token: creator, conforming: true, body: asked });
      expect(pending.status).to.equal(202);
      expect((await call(tp, 'post', path, path, { token: creator, body: asked })).status).to.equal(202);
      const overCap = await call(tp, 'post', path, path, {
        token: creator,
        conforming: true,
        body: { ...asked, actorId: 'carol' },
      });
      expect(overCap.body['error']).to.equal('too_many_pending_requests');
      expect(
        (
          await call(tp, 'post', path, path, {
            token: creator,
            body: { userId: customer, context: { approval: true } },
          })
        ).status,
      ).to.equal(400);

      const glass = {
        userId: customer,
        actorId: 'alice',
        clientId: 'support-console',
        breakGlass: { reason: 'payment outage' },
      };
      const oncall = await m2mToken(tp, CLIENTS.oncall);
      expect((await call(tp, 'post', path, path, { token: oncall, conforming: true, body: glass })).status).to.equal(
        201,
      );
      expect(
        (await call(tp, 'post', path, path, { token: creator, conforming: true, body: glass })).body['error'],
      ).to.equal('access_denied');
      // A bypass names the person and the client: the description requires both beside breakGlass.
      const unbound = await call(tp, 'post', path, path, { token: oncall, body: { ...glass, clientId: undefined } });
      expect(unbound.body['error_description']).to.match(/^breakGlass requires clientId: /);
    });
  });

  describe('GET /api/approval-requests/{id}', () => {
    const template = '/api/approval-requests/{id}';
    const path = (id: string) => `/api/approval-requests/${id}`;
    const ask = async (customer: string, actorId: string) => {
      const reply = await call(tp, 'post', '/api/subject-tokens', '/api/subject-tokens', {
        token: creator,
        conforming: true,
        body: {
          userId: customer,
          actorId,
          clientId: 'support-console',
          context: { approval: true },
          scope: ['profile:read', 'profile:write'],
        },
      });
      return (reply.body['approvalRequest'] as { id: string }).id;
    };

    it('200 pending, approved with its grant, denied with its reason; 404 for another client; every refusal', async () => {
      const customer = newCustomer();
      const approved = await ask(customer, 'alice');
      expect((await call(tp, 'get', template, path(approved), { token: creator })).body['status']).to.equal('pending');
      await approveRequest(ap.deps, customer, approved, { duration: 600, scope: ['profile:read'] });
      const read = await call(tp, 'get', template, path(approved), { token: creator });
      expect(read.body).to.deep.include({ status: 'approved' });
      expect(read.body['grant']).to.include.keys('id', 'expiresAt', 'scope');

      const denied = await ask(customer, 'carol');
      await denyRequest(ap.deps, customer, denied, { reason: 'not this one' });
      expect((await call(tp, 'get', template, path(denied), { token: creator })).body).to.include({
        status: 'denied',
        denialReason: 'not this one',
      });

      expect((await call(tp, 'get', template, path(`apr_${'A'.repeat(22)}`), { token: creator })).status).to.equal(404);
      const oncall = await m2mToken(tp, CLIENTS.oncall);
      expect((await call(tp, 'get', template, path(approved), { token: oncall })).status).to.equal(404);
      expect((await call(tp, 'get', template, `${path(approved)}?note=%00`, { token: creator })).status).to.equal(400);
      expect((await call(tp, 'get', template, path(approved))).status).to.equal(401);
      expect((await call(tp, 'get', template, path(approved), { token: admin })).status).to.equal(403);
    });

    it('documents the sessions a grant or break-glass started: accessGrantId, emergency, access_grant_ended', async () => {
      const customer = newCustomer();
      const alice = await userAccessToken(tp, 'alice');
      const grant = await giveGrant(ap.deps, customer, { duration: 600 });
      const oncall = await m2mToken(tp, CLIENTS.oncall);
      const sessions: string[] = [];
      for (const [token, body] of [
        [creator, { userId: customer, actorId: 'alice', clientId: 'support-console', context: { approval: true } }],
        [oncall, { userId: customer, actorId: 'alice', clientId: 'support-console', breakGlass: { reason: 'outage' } }],
      ] as const) {
        const created = await call(tp, 'post', '/api/subject-tokens', '/api/subject-tokens', { token, body });
        const exchanged = await exchange(tp, {
          subject_token: created.body['subjectToken'] as string,
          resource: API,
          actor_token: alice,
          actor_token_type: ACCESS_TOKEN,
        });
        expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
        sessions.push(decodeJwt(exchanged.body['access_token'] as string)['impersonation_session'] as string);
      }
      await endAccessGrant(ap.deps, customer, grant.id);
      const [underGrant, emergency] = await Promise.all(
        sessions.map((id) =>
          call(tp, 'get', '/api/impersonations/{id}', `/api/impersonations/${id}`, { token: reader }),
        ),
      );
      expect(underGrant!.body).to.include({ accessGrantId: grant.id, state: 'ended', endReason: 'access_grant_ended' });
      expect(emergency!.body).to.include({ emergency: true, emergencyReason: 'outage', state: 'active' });
    });
  });

  describe('DELETE /api/subject-tokens/{id}', () => {
    const template = '/api/subject-tokens/{id}';
    it('204, 404, 409 and the authentication refusals', async () => {
      const created = await call(tp, 'post', '/api/subject-tokens', '/api/subject-tokens', {
        token: creator,
        conforming: true,
        body: { userId: 'bob' },
      });
      const id = created.body['id'] as string;
      expect((await call(tp, 'delete', template, `/api/subject-tokens/${id}`, { token: admin })).status).to.equal(204);
      expect((await call(tp, 'delete', template, `/api/subject-tokens/${id}`, { token: admin })).status).to.equal(204);
      expect(
        (await call(tp, 'delete', template, `/api/subject-tokens/stid_${'A'.repeat(16)}`, { token: admin })).status,
      ).to.equal(404);
      expect(
        (await call(tp, 'delete', template, `/api/subject-tokens/${id}?note=%00`, { token: admin })).status,
      ).to.equal(400);
      expect((await call(tp, 'delete', template, `/api/subject-tokens/${id}`)).status).to.equal(401);
      expect((await call(tp, 'delete', template, `/api/subject-tokens/${id}`, { token: creator })).status).to.equal(
        403,
      );

      const redeemed = await call(tp, 'post', '/api/subject-tokens', '/api/subject-tokens', {
        token: creator,
        conforming: true,
        body: { userId: 'bob' },
      });
      expect(
        (await exchange(tp, { subject_token: redeemed.body['subjectToken'] as string, resource: API })).status,
      ).to.equal(200);
      expect(
        (await call(tp, 'delete', template, `/api/subject-tokens/${redeemed.body['id'] as string}`, { token: admin }))
          .status,
      ).to.equal(409);
    });
  });

  describe('GET /api/impersonations', () => {
    const path = '/api/impersonations';
    it('200 pages, and every refusal', async () => {
      const first = await call(tp, 'get', path, `${path}?subject=bob&actor=alice&limit=1`, { token: reader });
      expect(first.status).to.equal(200);
      expect(first.body['nextCursor']).to.be.a('string');
      const next = await call(
        tp,
        'get',
        path,
        `${path}?subject=bob&actor=alice&limit=1&cursor=${first.body['nextCursor'] as string}`,
        { token: reader },
      );
      expect(next.status).to.equal(200);
      sessionId = (first.body['items'] as Array<{ id: string }>)[0]!.id;
      expect((await call(tp, 'get', path, `${path}?limit=0`, { token: reader })).status).to.equal(400);
      expect((await call(tp, 'get', path, `${path}?user=bob`, { token: reader })).status).to.equal(400);
      expect((await call(tp, 'get', path, path)).status).to.equal(401);
      expect((await call(tp, 'get', path, path, { token: creator })).status).to.equal(403);
    });
  });

  describe('GET and DELETE /api/impersonations/{id}', () => {
    const template = '/api/impersonations/{id}';
    it('200 and 204, and every refusal', async () => {
      expect(
        (await call(tp, 'get', template, `/api/impersonations/${sessionId}`, { token: reader })).body['state'],
      ).to.equal('active');
      expect((await call(tp, 'get', template, '/api/impersonations/imp_unknown', { token: reader })).status).to.equal(
        404,
      );
      expect(
        (await call(tp, 'get', template, `/api/impersonations/${sessionId}?note=%00`, { token: reader })).status,
      ).to.equal(400);
      expect((await call(tp, 'get', template, `/api/impersonations/${sessionId}`)).status).to.equal(401);
      expect((await call(tp, 'get', template, `/api/impersonations/${sessionId}`, { token: creator })).status).to.equal(
        403,
      );

      expect(
        (await call(tp, 'delete', template, `/api/impersonations/${sessionId}`, { token: admin, body: { note: 'x' } }))
          .status,
      ).to.equal(400);
      expect((await call(tp, 'delete', template, `/api/impersonations/${sessionId}`)).status).to.equal(401);
      expect(
        (await call(tp, 'delete', template, `/api/impersonations/${sessionId}`, { token: reader })).status,
      ).to.equal(403);
      expect((await call(tp, 'delete', template, '/api/impersonations/imp_unknown', { token: admin })).status).to.equal(
        404,
      );
      expect(
        (
          await call(tp, 'delete', template, `/api/impersonations/${sessionId}`, {
            token: admin,
            conforming: true,
            body: { reason: 'ticket closed' },
          })
        ).status,
      ).to.equal(204);
      const revoked = await call(tp, 'get', template, `/api/impersonations/${sessionId}`, { token: reader });
      expect(revoked.body).to.include({ state: 'revoked', revocationReason: 'ticket closed' });
    });
  });

  describe('GET and POST /api/support-access/grants', () => {
    const path = '/api/support-access/grants';
    it('201 and 200, and every refusal', async () => {
      const given = await call(tp, 'post', path, path, {
        token: bob,
        conforming: true,
        body: { duration: 3600, scope: ['profile:read'], resource: API, actorId: 'alice', note: 'invoice problem' },
      });
      expect(given.status).to.equal(201);
      expect(
        (await call(tp, 'post', path, path, { token: bob, conforming: true, body: { duration: 60 } })).status,
      ).to.equal(201);
      const listed = await call(tp, 'get', path, path, { token: bob });
      expect(listed.body['items']).to.have.length(2);
      expect((await call(tp, 'post', path, path, { token: bob, body: { duration: 60 } })).body['error']).to.equal(
        'too_many_grants',
      );
      expect((await call(tp, 'post', path, path, { token: carol, body: { duration: 0 } })).status).to.equal(400);
      expect(
        (await call(tp, 'post', path, path, { token: carol, body: { duration: 60, scope: 'x' } })).status,
      ).to.equal(400);
      expect(
        (await call(tp, 'post', path, path, { token: carol, body: { duration: 60, actor: 'x' } })).status,
      ).to.equal(400);
      expect(
        (await call(tp, 'post', path, path, { token: carol, body: { duration: 60, note: 'x'.repeat(9000) } })).status,
      ).to.equal(413);
      expect((await call(tp, 'get', path, `${path}?limit=1`, { token: carol })).status).to.equal(400);
      expect((await call(tp, 'get', path, path)).status).to.equal(401);
      expect((await call(tp, 'post', path, path, { body: { duration: 60 } })).status).to.equal(401);
      expect((await call(tp, 'get', path, path, { token: creator })).status).to.equal(401);
      const narrow = await customerToken(tp, 'carol', 'openid');
      expect((await call(tp, 'get', path, path, { token: narrow })).status).to.equal(403);
      expect((await call(tp, 'post', path, path, { token: narrow, body: { duration: 60 } })).status).to.equal(403);
    });
  });

  describe('DELETE /api/support-access/grants/{id}', () => {
    const template = '/api/support-access/grants/{id}';
    it('204, also when ended already; and every refusal', async () => {
      const given = await call(tp, 'post', '/api/support-access/grants', '/api/support-access/grants', {
        token: carol,
        conforming: true,
        body: { duration: 60 },
      });
      const path = `/api/support-access/grants/${given.body['id'] as string}`;
      expect((await call(tp, 'delete', template, path, { token: bob })).status).to.equal(404);
      expect((await call(tp, 'delete', template, `${path}?x=1`, { token: carol })).status).to.equal(400);
      expect((await call(tp, 'delete', template, path)).status).to.equal(401);
      expect(
        (await call(tp, 'delete', template, path, { token: await customerToken(tp, 'carol', 'openid') })).status,
      ).to.equal(403);
      expect((await call(tp, 'delete', template, path, { token: carol })).status).to.equal(204);
      expect((await call(tp, 'delete', template, path, { token: carol })).status).to.equal(204);
      expect(
        (await call(tp, 'delete', template, '/api/support-access/grants/agr_x', { token: carol })).status,
      ).to.equal(404);
    });
  });

  describe('GET /api/support-access/requests', () => {
    const path = '/api/support-access/requests';
    it('200, and every refusal', async () => {
      const request = await pendingRequest(approvals, 'carol');
      const listed = await call(tp, 'get', path, path, { token: carol });
      expect((listed.body['items'] as Json[]).map((item) => item['id'])).to.include(request.id);
      expect((await call(tp, 'get', path, `${path}?status=pending`, { token: carol })).status).to.equal(400);
      expect((await call(tp, 'get', path, path)).status).to.equal(401);
      expect(
        (await call(tp, 'get', path, path, { token: await customerToken(tp, 'carol', 'openid') })).status,
      ).to.equal(403);
    });
  });

  describe('GET /api/support-access/sessions and DELETE /api/support-access/sessions/{id}', () => {
    const path = '/api/support-access/sessions';
    const template = '/api/support-access/sessions/{id}';
    it('200 pages and 204, and every refusal', async () => {
      const listed = await call(tp, 'get', path, `${path}?limit=1`, { token: bob });
      expect(listed.status).to.equal(200);
      const id = (listed.body['items'] as Json[])[0]!['id'] as string;
      expect((await call(tp, 'get', path, `${path}?limit=0`, { token: bob })).status).to.equal(400);
      expect((await call(tp, 'get', path, `${path}?subject=bob`, { token: carol })).status).to.equal(400);
      expect((await call(tp, 'get', path, path)).status).to.equal(401);
      const narrow = await customerToken(tp, 'bob', 'openid');
      expect((await call(tp, 'get', path, path, { token: narrow })).status).to.equal(403);

      const at = `${path}/${id}`;
      expect((await call(tp, 'delete', template, at, { token: carol })).status).to.equal(404);
      expect((await call(tp, 'delete', template, `${path}/imp_unknown`, { token: bob })).status).to.equal(404);
      expect((await call(tp, 'delete', template, `${at}?x=1`, { token: bob })).status).to.equal(400);
      expect((await call(tp, 'delete', template, at)).status).to.equal(401);
      expect((await call(tp, 'delete', template, at, { token: narrow })).status).to.equal(403);
      // The session the administrator stopped above: 204, and the revocation feed stays as that test reads it.
      const stoppedAlready = `${path}/${sessionId}`;
      expect((await call(tp, 'delete', template, stoppedAlready, { token: bob })).status).to.equal(204);
    });
  });

  describe('POST /api/support-access/requests/{id}/approve and /deny', () => {
    const approve = '/api/support-access/requests/{id}/approve';
    const deny = '/api/support-access/requests/{id}/deny';
    const at = (id: string, action: string) => `/api/support-access/requests/${id}/${action}`;
    it('200 for each answer, and every refusal', async () => {
      const first = await pendingRequest(approvals, 'carol');
      const approved = await call(tp, 'post', approve, at(first.id, 'approve'), {
        token: carol,
        conforming: true,
        body: { duration: 600, scope: ['profile:read'] },
      });
      expect(approved.status).to.equal(200);
      expect((approved.body['request'] as Json)['grant']).to.be.an('object');
      expect(
        (await call(tp, 'post', approve, at(first.id, 'approve'), { token: carol, body: { duration: 60 } })).body[
          'error'
        ],
      ).to.equal('already_answered');
      expect((await call(tp, 'post', deny, at(first.id, 'deny'), { token: carol })).status).to.equal(409);

      const second = await pendingRequest(approvals, 'carol');
      expect(
        (await call(tp, 'post', approve, at(second.id, 'approve'), { token: bob, body: { duration: 60 } })).status,
      ).to.equal(404);
      expect((await call(tp, 'post', deny, at(second.id, 'deny'), { token: bob })).status).to.equal(404);
      expect(
        (
          await call(tp, 'post', approve, at(second.id, 'approve'), {
            token: carol,
            body: { duration: 60, scope: ['admin'] },
          })
        ).status,
      ).to.equal(400);
      expect(
        (await call(tp, 'post', deny, at(second.id, 'deny'), { token: carol, body: { reason: '' } })).status,
      ).to.equal(400);
      for (const [template, action] of [
        [approve, 'approve'],
        [deny, 'deny'],
      ] as const) {
        expect(
          (
            await call(tp, 'post', template, at(second.id, action), {
              token: carol,
              body: { reason: 'x'.repeat(9000) },
            })
          ).status,
        ).to.equal(413);
        expect((await call(tp, 'post', template, at(second.id, action), { body: { duration: 60 } })).status).to.equal(
          401,
        );
        expect(
          (
            await call(tp, 'post', template, at(second.id, action), {
              token: await customerToken(tp, 'carol', 'openid'),
            })
          ).status,
        ).to.equal(403);
      }
      // Carol holds her most grants in force: approving would make one more.
      await call(tp, 'post', '/api/support-access/grants', '/api/support-access/grants', {
        token: carol,
        conforming: true,
        body: { duration: 60 },
      });
      expect(
        (await call(tp, 'post', approve, at(second.id, 'approve'), { token: carol, body: { duration: 60 } })).status,
      ).to.equal(429);
      const denied = await call(tp, 'post', deny, at(second.id, 'deny'), {
        token: carol,
        conforming: true,
        body: { reason: 'not now' },
      });
      expect(denied.body['request']).to.include({ status: 'denied', denialReason: 'not now' });
      const bare = await pendingRequest(approvals, 'carol');
      expect((await call(tp, 'post', deny, at(bare.id, 'deny'), { token: carol })).status).to.equal(200);

      const late = await pendingRequest(approvals, 'carol', -1);
      expect(
        (await call(tp, 'post', approve, at(late.id, 'approve'), { token: carol, body: { duration: 60 } })).body[
          'error'
        ],
      ).to.equal('request_expired');
    });
  });

  describe('GET /api/impersonations/revocations', () => {
    const path = '/api/impersonations/revocations';
    it('200 without credentials, pages by limit; 400 for an unknown parameter or a bad limit', async () => {
      const feed = await call(tp, 'get', path, path);
      expect(feed.body['revoked']).to.deep.include.members([
        { id: sessionId, expiresAt: (feed.body['revoked'] as Array<{ expiresAt: number }>)[0]!.expiresAt },
      ]);
      expect((await call(tp, 'get', path, `${path}?since=1`)).status).to.equal(400);
      expect((await call(tp, 'get', path, `${path}?cursor=%%%`)).status).to.equal(400);
      expect((await call(tp, 'get', path, `${path}?limit=1`)).body['revoked']).to.have.length(1);
      expect((await call(tp, 'get', path, `${path}?limit=1001`)).status).to.equal(400);
    });
  });

  describe('GET /api/impersonations/events', () => {
    const path = '/api/impersonations/events';
    it('200 rows of the audit trail, and every refusal', async () => {
      const page = await call(tp, 'get', path, `${path}?subject=bob&limit=5`, { token: reader });
      expect(page.body['items']).to.have.length(5);
      const approvals = await call(
        tp,
        'get',
        path,
        `${path}?event=impersonation.approval.requested&event=impersonation.access_grant.ended&event=impersonation.break_glass.used`,
        { token: reader },
      );
      expect((approvals.body['items'] as Array<{ event: string }>).map((item) => item.event)).to.include.members([
        'impersonation.approval.requested',
        'impersonation.access_grant.ended',
        'impersonation.break_glass.used',
      ]);
      expect((await call(tp, 'get', path, `${path}?since=yesterday`, { token: reader })).status).to.equal(400);
      expect((await call(tp, 'get', path, `${path}?subject=bob%00x`, { token: reader })).status).to.equal(400);
      expect((await call(tp, 'get', path, path)).status).to.equal(401);
      expect((await call(tp, 'get', path, path, { token: creator })).status).to.equal(403);
    });
  });

  describe('when the store and the audit log cannot answer', () => {
    const redis = new TcpRelay(REDIS_URL, 6379);
    const postgres = new TcpRelay(DATABASE_URL, 5432);
    let down: TestProvider;
    let downPool: pg.Pool;
    let downCreator: string;
    let downAdmin: string;
    let downSession: string;
    let downRequest: string;
    let downCustomer: string;

    before(async () => {
      await redis.start();
      await postgres.start();
      downPool = new pg.Pool({ connectionString: postgres.url, max: 2, connectionTimeoutMillis: 2000 });
      downPool.on('error', () => {});
      down = (
        await startApprovalProvider({
          adapter: redisTestAdapter({ url: redis.url }),
          plugin: { auditLog: createPostgresAuditLog({ pool: downPool, schema }) },
          approvals: { ...APPROVALS, require: customerMustApprove },
        })
      ).tp;
      downCustomer = await customerToken(down, 'bob');
      downCreator = await m2mToken(down);
      downAdmin = await m2mToken(down, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
      expect((await exchange(down, { subject_token: await subjectToken(down), resource: API })).status).to.equal(200);
      const listed = await call(down, 'get', '/api/impersonations', '/api/impersonations', { token: downAdmin });
      downSession = (listed.body['items'] as Array<{ id: string }>)[0]!.id;
      const asked = await call(down, 'post', '/api/subject-tokens', '/api/subject-tokens', {
        token: downCreator,
        body: { userId: newCustomer(), actorId: 'alice', clientId: 'support-console', context: { approval: true } },
      });
      downRequest = (asked.body['approvalRequest'] as { id: string }).id;
      await redis.stop();
      await postgres.stop();
    });
    after(async () => {
      await down?.close();
      await downPool?.end().catch(() => {});
    });

    it('answers 503 temporarily_unavailable at every endpoint', async () => {
      const answers = [
        await call(down, 'post', '/api/subject-tokens', '/api/subject-tokens', {
          token: downCreator,
          body: { userId: 'bob' },
        }),
        await call(down, 'delete', '/api/subject-tokens/{id}', `/api/subject-tokens/stid_${'A'.repeat(16)}`, {
          token: downAdmin,
        }),
        await call(down, 'get', '/api/impersonations', '/api/impersonations', { token: downAdmin }),
        await call(down, 'get', '/api/impersonations/{id}', `/api/impersonations/${downSession}`, { token: downAdmin }),
        await call(down, 'delete', '/api/impersonations/{id}', `/api/impersonations/${downSession}`, {
          token: downAdmin,
        }),
        await call(down, 'get', '/api/impersonations/revocations', '/api/impersonations/revocations'),
        await call(down, 'get', '/api/impersonations/events', '/api/impersonations/events', { token: downAdmin }),
        await call(down, 'get', '/api/approval-requests/{id}', `/api/approval-requests/${downRequest}`, {
          token: downCreator,
        }),
        ...(await customerCalls()),
      ];
      expect(answers.map((answer) => answer.status)).to.deep.equal(Array(answers.length).fill(503));
    });

    /** Each endpoint of the customer API, with the customer's token from before the outage (a JWT: verified without the store). */
    async function customerCalls() {
      const grants = '/api/support-access/grants';
      const request = `apr_${'A'.repeat(22)}`;
      const options = { token: downCustomer, body: { duration: 60 } };
      return [
        await call(down, 'get', grants, grants, { token: downCustomer }),
        await call(down, 'post', grants, grants, options),
        await call(down, 'delete', `${grants}/{id}`, `${grants}/agr_${'A'.repeat(22)}`, { token: downCustomer }),
        await call(down, 'get', '/api/support-access/requests', '/api/support-access/requests', {
          token: downCustomer,
        }),
        await call(down, 'get', '/api/support-access/sessions', '/api/support-access/sessions', {
          token: downCustomer,
        }),
        await call(down, 'delete', '/api/support-access/sessions/{id}', `/api/support-access/sessions/${downSession}`, {
          token: downCustomer,
        }),
        await call(
          down,
          'post',
          '/api/support-access/requests/{id}/approve',
          `/api/support-access/requests/${request}/approve`,
          options,
        ),
        await call(
          down,
          'post',
          '/api/support-access/requests/{id}/deny',
          `/api/support-access/requests/${request}/deny`,
          {
            token: downCustomer,
          },
        ),
      ];
    }
  });

  // Last: mocha runs a describe's own tests before its nested describes.
  describe('coverage', () => {
    it('exercised every answer the description documents', () => {
      const documented: string[] = [];
      for (const [template, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          for (const status of Object.keys(operation.responses))
            documented.push(`${method.toUpperCase()} ${template} ${status}`);
        }
      }
      expect(documented.filter((entry) => !exercised.has(entry))).to.deep.equal([]);
    });

    it('documents every route the service serves, and nothing else', () => {
      // @koa/router hangs itself on the middleware it returns; the provider is the Koa app it is mounted on.
      const { middleware } = tp.provider as unknown as { middleware: Array<{ router?: { stack: RouteLayer[] } }> };
      const served = middleware
        .flatMap((fn) => fn.router?.stack ?? [])
        .flatMap((layer) =>
          layer.methods
            .filter((method) => method !== 'HEAD')
            .map((method) => `${method} ${layer.path.replace(/:(\w+)/g, '{$1}')}`),
        );
      const documented = Object.entries(document.paths).flatMap(([template, operations]) =>
        Object.keys(operations).map((method) => `${method.toUpperCase()} ${template}`),
      );
      expect(served.sort()).to.deep.equal(documented.sort());
    });
  });
});

interface RouteLayer {
  path: string;
  methods: string[];
}
