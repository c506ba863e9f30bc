/**
 * The OpenAPI description of the SSF transmitter (docs/ssf.openapi.json)
 * against the running service, as test/management/management-api.openapi.test.ts does
 * for the Management API: every answer of every endpoint is driven over HTTP
 * and must be one the description documents; every documented answer is
 * driven; every route served is documented.
 */
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { expect } from 'chai';
import { REDIS_URL, redisTestAdapter } from '../support/adapter.js';
import { m2mToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { CLIENTS, MANAGEMENT_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';
import { userAccessToken } from '../support/http.js';
import {
  POLL,
  PUSH,
  RECEIVERS,
  receiverToken,
  SESSION_REVOKED,
  SSF_RECEIVER_CLIENTS,
  startSsfProvider,
} from '../support/ssf.js';
import { ADAPTERS } from '../support/adapters.js';
import { scaled } from '../support/time.js';

type Json = Record<string, unknown>;
type Method = 'get' | 'post' | 'patch' | 'put' | 'delete';
interface ResponseObject {
  headers?: Record<string, { required?: boolean; schema: Json } | { $ref: string }>;
  content?: Record<string, { schema: unknown }>;
}

const document = JSON.parse(readFileSync(new URL('../../../docs/ssf.openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Partial<Record<Method, { requestBody?: unknown; responses: Record<string, unknown> }>>>;
};
const BASE_ID = 'urn:oidc-provider-impersonation:ssf';
const ajv = new Ajv2020({ strict: false, allErrors: true });
(formats as unknown as (ajv: Ajv2020) => void)(ajv);
ajv.addSchema({ ...document, $id: BASE_ID });

const pointer = (...parts: string[]) =>
  `${BASE_ID}#/${parts.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

function resolve<T>(value: T | { $ref: string }): { object: T; at: string[] } {
  if (value && typeof value === 'object' && '$ref' in value) {
    const at = value.$ref.replace(/^#\//, '').split('/');
    let object: unknown = document;
    for (const part of at) object = (object as Json)[part];
    return { object: object as T, at };
  }
  return { object: value as T, at: [] };
}

function assertValid(ref: string, value: unknown, what: string): void {
  const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
  if (!validate(value)) throw new Error(`${what}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
}

const exercised = new Set<string>();

async function call(
  tp: TestProvider,
  method: Method,
  template: string,
  path: string,
  options: { token?: string; body?: unknown; conforming?: boolean } = {},
): Promise<{ status: number; body: Json }> {
  const operation = document.paths[template]?.[method];
  if (!operation) throw new Error(`the description has no ${method.toUpperCase()} ${template}`);
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.conforming) {
    assertValid(
      pointer('paths', template, method, 'requestBody', 'content', 'application/json', 'schema'),
      options.body,
      'the request body',
    );
  }
  const response = await fetch(`${tp.base}${path}`, {
    method: method.toUpperCase(),
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  const text = await response.text();
  const what = `${method.toUpperCase()} ${path} → ${response.status}`;
  const documented = operation.responses[String(response.status)];
  if (!documented) throw new Error(`${what}: not documented (${text})`);
  const { object: answer, at } = resolve<ResponseObject>(documented as ResponseObject);
  const base = at.length ? at : ['paths', template, method, 'responses', String(response.status)];
  for (const [name, header] of Object.entries(answer.headers ?? {})) {
    const { object } = resolve<{ required?: boolean; schema: Json }>(header);
    const value = response.headers.get(name);
    if (value === null) {
      if (object.required) throw new Error(`${what}: the required header ${name} is missing`);
      continue;
    }
    if (!ajv.validate(object.schema, value)) throw new Error(`${what}: header ${name}: ${JSON.stringify(value)}`);
  }
  let parsed: Json = {};
  if (answer.content) {
    const [mediaType] = Object.keys(answer.content);
    expect((response.headers.get('content-type') ?? '').split(';')[0], `${what}: content type`).to.equal(mediaType);
    parsed = JSON.parse(text) as Json;
    assertValid(pointer(...base, 'content', mediaType!, 'schema'), parsed, what);
  } else {
    expect(text, `${what}: no body documented`).to.equal('');
  }
  exercised.add(`${method.toUpperCase()} ${template} ${response.status}`);
  return { status: response.status, body: parsed };
}

describe('SSF transmitter: the OpenAPI description matches the running service', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let token: string;
  let other: string;
  let wrongScope: string;
  let streamId: string;

  before(async () => {
    tp = await startSsfProvider(ADAPTERS[0]!, { maxStreamsPerReceiver: 2 });
    token = await receiverToken(tp);
    other = await receiverToken(tp, RECEIVERS.second);
    wrongScope = await m2mToken(tp, CLIENTS.backend, MANAGEMENT_SCOPE);
  });
  after(() => tp?.close());

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(document as never);
    expect(result.errors ?? [], JSON.stringify(result.errors)).to.deep.equal([]);
    expect(validator.version).to.equal('3.1');
  });

  it('GET /.well-known/ssf-configuration', async () => {
    expect((await call(tp, 'get', '/.well-known/ssf-configuration', '/.well-known/ssf-configuration')).status).to.equal(
      200,
    );
  });

  it('/ssf/streams: 201, 200, 204 and every refusal', async () => {
    const created = await call(tp, 'post', '/ssf/streams', '/ssf/streams', {
      token,
      body: {
        delivery: { method: PUSH, endpoint_url: 'https://receiver.example/caep' },
        events_requested: [SESSION_REVOKED],
      },
      conforming: true,
    });
    expect(created.status).to.equal(201);
    streamId = created.body['stream_id'] as string;
    expect(
      (await call(tp, 'post', '/ssf/streams', '/ssf/streams', { token, body: {}, conforming: true })).status,
    ).to.equal(201);
    expect((await call(tp, 'post', '/ssf/streams', '/ssf/streams', { token, body: {} })).status).to.equal(409);
    expect(
      (await call(tp, 'post', '/ssf/streams', '/ssf/streams', { token, body: { delivery: 'push' } })).status,
    ).to.equal(400);
    expect((await call(tp, 'post', '/ssf/streams', '/ssf/streams', { body: {} })).status).to.equal(401);
    expect((await call(tp, 'post', '/ssf/streams', '/ssf/streams', { token: wrongScope, body: {} })).status).to.equal(
      403,
    );

    expect((await call(tp, 'get', '/ssf/streams', '/ssf/streams', { token })).status).to.equal(200);
    expect((await call(tp, 'get', '/ssf/streams', `/ssf/streams?stream_id=${streamId}`, { token })).status).to.equal(
      200,
    );
    expect(
      (await call(tp, 'get', '/ssf/streams', `/ssf/streams?stream_id=${streamId}`, { token: other })).status,
    ).to.equal(404);
    expect((await call(tp, 'get', '/ssf/streams', '/ssf/streams?stream_id=a%20b', { token })).status).to.equal(400);
    expect((await call(tp, 'get', '/ssf/streams', '/ssf/streams')).status).to.equal(401);
    expect((await call(tp, 'get', '/ssf/streams', '/ssf/streams', { token: wrongScope })).status).to.equal(403);

    for (const method of ['patch', 'put'] as const) {
      const body = { stream_id: streamId, description: 'gateway' };
      expect(
        (await call(tp, method, '/ssf/streams', '/ssf/streams', { token, body, conforming: true })).status,
      ).to.equal(200);
      expect((await call(tp, method, '/ssf/streams', '/ssf/streams', { token: other, body })).status).to.equal(404);
      expect(
        (await call(tp, method, '/ssf/streams', '/ssf/streams', { token, body: { description: 'x' } })).status,
      ).to.equal(400);
      expect((await call(tp, method, '/ssf/streams', '/ssf/streams', { body })).status).to.equal(401);
      expect((await call(tp, method, '/ssf/streams', '/ssf/streams', { token: wrongScope, body })).status).to.equal(
        403,
      );
    }

    const remove = (query: string, as?: string) =>
      call(tp, 'delete', '/ssf/streams', `/ssf/streams${query}`, as === undefined ? {} : { token: as });
    expect((await remove(`?stream_id=${streamId}`, other)).status).to.equal(404);
    expect((await remove('', token)).status).to.equal(400);
    expect((await remove(`?stream_id=${streamId}`)).status).to.equal(401);
    expect((await remove(`?stream_id=${streamId}`, wrongScope)).status).to.equal(403);
    expect((await remove(`?stream_id=${streamId}`, token)).status).to.equal(204);
  });

  it('/ssf/status, /ssf/verify and /ssf/poll: their answers and every refusal', async () => {
    const created = await call(tp, 'post', '/ssf/streams', '/ssf/streams', {
      token,
      body: { delivery: { method: POLL } },
    });
    const id = created.body['stream_id'] as string;
    const status = (query: string, as?: string) =>
      call(tp, 'get', '/ssf/status', `/ssf/status${query}`, as === undefined ? {} : { token: as });
    expect((await status(`?stream_id=${id}`, token)).status).to.equal(200);
    expect((await status(`?stream_id=${id}`, other)).status).to.equal(404);
    expect((await status('', token)).status).to.equal(400);
    expect((await status(`?stream_id=${id}`)).status).to.equal(401);
    expect((await status(`?stream_id=${id}`, wrongScope)).status).to.equal(403);
    const change = { stream_id: id, status: 'enabled', reason: 'ready' };
    expect(
      (await call(tp, 'post', '/ssf/status', '/ssf/status', { token, body: change, conforming: true })).status,
    ).to.equal(200);
    expect((await call(tp, 'post', '/ssf/status', '/ssf/status', { token: other, body: change })).status).to.equal(404);
    expect(
      (await call(tp, 'post', '/ssf/status', '/ssf/status', { token, body: { ...change, status: 'on' } })).status,
    ).to.equal(400);
    expect((await call(tp, 'post', '/ssf/status', '/ssf/status', { body: change })).status).to.equal(401);
    expect((await call(tp, 'post', '/ssf/status', '/ssf/status', { token: wrongScope, body: change })).status).to.equal(
      403,
    );

    const subject = { stream_id: id, subject: { format: 'email', email: 'bob@example.com' } };
    for (const [template, status] of [
      ['/ssf/subjects/add', 200],
      ['/ssf/subjects/remove', 204],
    ] as const) {
      expect((await call(tp, 'post', template, template, { token, body: subject, conforming: true })).status).to.equal(
        status,
      );
      expect(
        (await call(tp, 'post', template, template, { token, body: { ...subject, subject: { format: 'nope' } } }))
          .status,
      ).to.equal(400);
      expect((await call(tp, 'post', template, template, { token: other, body: subject })).status).to.equal(404);
      expect((await call(tp, 'post', template, template, { body: subject })).status).to.equal(401);
      expect((await call(tp, 'post', template, template, { token: wrongScope, body: subject })).status).to.equal(403);
    }

    const verify = { stream_id: id, state: 'x1' };
    expect(
      (await call(tp, 'post', '/ssf/verify', '/ssf/verify', { token, body: verify, conforming: true })).status,
    ).to.equal(204);
    expect((await call(tp, 'post', '/ssf/verify', '/ssf/verify', { token, body: verify })).status).to.equal(429);
    expect((await call(tp, 'post', '/ssf/verify', '/ssf/verify', { token: other, body: verify })).status).to.equal(404);
    expect(
      (await call(tp, 'post', '/ssf/verify', '/ssf/verify', { token, body: { stream_id: id, state: 7 } })).status,
    ).to.equal(400);
    expect((await call(tp, 'post', '/ssf/verify', '/ssf/verify', { body: verify })).status).to.equal(401);
    expect((await call(tp, 'post', '/ssf/verify', '/ssf/verify', { token: wrongScope, body: verify })).status).to.equal(
      403,
    );

    const started = await impersonate(tp, {
      actorToken: await userAccessToken(tp, 'alice'),
      subject: { userId: 'bob' },
    });
    await revokeSession(tp, await adminToken(tp), started.session);
    const poll = `/ssf/poll/${id}`;
    const polled = await call(tp, 'post', '/ssf/poll/{streamId}', poll, {
      token,
      body: { maxEvents: 10, returnImmediately: false },
      conforming: true,
    });
    expect(polled.status).to.equal(200);
    expect(Object.keys(polled.body['sets'] as object)).to.have.length.above(0);
    expect((await call(tp, 'post', '/ssf/poll/{streamId}', poll, { token: other, body: {} })).status).to.equal(404);
    expect((await call(tp, 'post', '/ssf/poll/{streamId}', poll, { token, body: { ack: 'all' } })).status).to.equal(
      400,
    );
    expect((await call(tp, 'post', '/ssf/poll/{streamId}', poll, { body: {} })).status).to.equal(401);
    expect((await call(tp, 'post', '/ssf/poll/{streamId}', poll, { token: wrongScope, body: {} })).status).to.equal(
      403,
    );
  });

  describe('when the store cannot answer', () => {
    const redis = new TcpRelay(REDIS_URL, 6379);
    let down: TestProvider;
    let downToken: string;
    let downStream: string;

    before(async () => {
      await redis.start();
      down = await startProvider({
        adapter: redisTestAdapter({ url: redis.url }),
        plugin: { ssf: { pollInterval: 50 } },
        configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
      });
      downToken = await receiverToken(down);
      downStream = (await call(down, 'post', '/ssf/streams', '/ssf/streams', { token: downToken, body: {} })).body[
        'stream_id'
      ] as string;
      await redis.stop();
    });
    after(() => down?.close());

    it('answers 503 temporarily_unavailable at every endpoint', async () => {
      const answers = await Promise.all([
        await call(down, 'post', '/ssf/streams', '/ssf/streams', { token: downToken, body: {} }),
        await call(down, 'get', '/ssf/streams', '/ssf/streams', { token: downToken }),
        await call(down, 'patch', '/ssf/streams', '/ssf/streams', {
          token: downToken,
          body: { stream_id: downStream },
        }),
        await call(down, 'put', '/ssf/streams', '/ssf/streams', { token: downToken, body: { stream_id: downStream } }),
        await call(down, 'delete', '/ssf/streams', `/ssf/streams?stream_id=${downStream}`, { token: downToken }),
        await call(down, 'get', '/ssf/status', `/ssf/status?stream_id=${downStream}`, { token: downToken }),
        await call(down, 'post', '/ssf/status', '/ssf/status', {
          token: downToken,
          body: { stream_id: downStream, status: 'paused' },
        }),
        await call(down, 'post', '/ssf/verify', '/ssf/verify', { token: downToken, body: { stream_id: downStream } }),
        ...(['/ssf/subjects/add', '/ssf/subjects/remove'] as const).map((template) =>
          call(down, 'post', template, template, {
            token: downToken,
            body: { stream_id: downStream, subject: { format: 'opaque', id: 'x' } },
          }),
        ),
        await call(down, 'post', '/ssf/poll/{streamId}', `/ssf/poll/${downStream}`, { token: downToken, body: {} }),
      ]);
      expect(answers.map((answer) => answer.status)).to.deep.equal(Array(answers.length).fill(503));
    });
  });

  describe('coverage', () => {
    it('exercised every answer the description documents', () => {
      const documented = Object.entries(document.paths).flatMap(([template, operations]) =>
        Object.entries(operations).flatMap(([method, operation]) =>
          Object.keys(operation.responses).map((status) => `${method.toUpperCase()} ${template} ${status}`),
        ),
      );
      expect(documented.filter((entry) => !exercised.has(entry))).to.deep.equal([]);
    });

    it('documents every SSF route the service serves, and nothing else', () => {
      const { middleware } = tp.provider as unknown as {
        middleware: Array<{ router?: { stack: Array<{ path: string; methods: string[] }> } }>;
      };
      const served = middleware
        .flatMap((fn) => fn.router?.stack ?? [])
        .filter((layer) => layer.path.startsWith('/ssf') || layer.path.startsWith('/.well-known'))
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
