/**
 * The canary: every token value and secret that the flows present or issue is
 * collected, then searched for in every impersonation event, every error
 * oidc-provider reports to a deployment's listeners, every log line of the
 * demo and every response. A value may appear only in the response that
 * issues it (the subject token at creation, the access token at the exchange,
 * an actor token at its own sign-in).
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import type Koa from 'koa';
import { publicTokenId } from '../../lib/access-token.js';
import { canonicalContent, rowOf } from '../../lib/audit/chain.js';
import {
  EVENTS,
  SSF_DROPPED,
  SSF_SET_ERROR,
  JWT_TOKEN_TYPE,
  WEBHOOK_DEAD_LETTERED,
  WEBHOOK_DROPPED,
  WEBHOOK_EVENTS,
  WEBHOOK_GONE,
} from '../../lib/index.js';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { LOOPBACK_RECEIVERS, PUSH, RECEIVERS, receiverToken, SSF_RECEIVER_CLIENTS, STREAMS } from '../support/ssf.js';
import { startDemo, type Demo } from '../../demo/demo.js';
import { createImpersonationVerifier } from '../../lib/resource-server/index.js';
import type { MemoryAuditLog } from '../../lib/index.js';
import { DpopKey } from '../support/dpop.js';
import {
  ACTOR_API,
  API,
  CLIENTS,
  DOWNSTREAM_API,
  MANAGEMENT,
  OPAQUE_API,
  TENANT_API,
  TOKEN_EXCHANGE,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  ACCESS_TOKEN,
  decodeJwt,
  exchange,
  introspect,
  logout,
  managementRequest,
  m2mToken,
  tokenRequest,
  userAccessToken,
  userSignIn,
  type ClientCredentials,
  type Reply,
} from '../support/http.js';
import * as demoHttp from '../demo/helpers.js';
import { mountComposedNow, mounted } from '../support/mount.js';
import { startReceiver, webhookSecret, type Receiver } from '../support/webhook-receiver.js';
import { approveRequest, denyRequest, endAccessGrant, giveGrant, listGrants } from '../../lib/approvals/actions.js';
import { newCustomer, requestIdOf, REQUESTS, startApprovalProvider } from '../support/approvals.js';
import { apiRequest } from '../support/http.js';
import { startDecisionPoint } from '../support/decision-point.js';
import { inMemoryTelemetry, type InMemoryTelemetry } from '../support/telemetry.js';
import { agentAtIdp, agentAtRedeemer, exchangeForIdJag } from '../support/id-jag.js';

interface Seen {
  label: string;
  text: string;
  /** Values this response hands out, and so may contain. */
  issues: string[];
}

/** Labels of the sinks that are webhook deliveries: they may name no access token even by its id. */
const WEBHOOK_SINK = 'webhook ';

class Canary {
  readonly secrets = new Set<string>();
  /** The non-secret ids of the access tokens seen, which events may carry and webhook payloads may not. */
  readonly accessTokenIds = new Set<string>();
  readonly sinks: Array<{ label: string; text: string }> = [];
  readonly responses: Seen[] = [];
  /** OpenTelemetry SDKs in memory: every span they hold is searched, its name, attributes, events and status. */
  readonly telemetry: InMemoryTelemetry[] = [];
  readonly #spansRead = new Map<InMemoryTelemetry, number>();

  /** A real OpenTelemetry SDK for a provider's `telemetry` option, whose spans are searched. */
  traced(): InMemoryTelemetry['options'] {
    const telemetry = inMemoryTelemetry();
    this.telemetry.push(telemetry);
    return telemetry.options;
  }

  secret(...values: Array<string | undefined>): void {
    for (const value of values) if (value) this.secrets.add(value);
  }

  /** An access token: its value is a secret, and its id (a JWT's jti, an opaque token's sha256 name) no webhook's. */
  accessToken(...values: Array<string | undefined>): void {
    for (const value of values) {
      if (!value) continue;
      this.secrets.add(value);
      this.accessTokenIds.add(
        value.split('.').length === 3 ? String(decodeJwt(value)['jti']) : publicTokenId('opaque', value),
      );
    }
  }

  sink(label: string, value: unknown): void {
    this.sinks.push({ label, text: typeof value === 'string' ? value : JSON.stringify(value) });
  }

  response(label: string, reply: Reply, issues: Array<string | undefined> = []): Reply {
    const issued = issues.filter((value): value is string => typeof value === 'string');
    this.secret(...issued);
    this.responses.push({
      label,
      text: `${JSON.stringify(reply.body)} ${reply.headers.get('www-authenticate') ?? ''}`,
      issues: issued,
    });
    return reply;
  }

  /** Collects every metric the SDKs hold now, its name, description and each point's attributes, as sinks. */
  async readMetrics(): Promise<void> {
    for (const telemetry of this.telemetry) {
      for (const { descriptor, dataPoints } of await telemetry.metrics()) {
        this.sink(`metric ${descriptor.name}`, { descriptor, points: dataPoints.map(({ attributes }) => attributes) });
      }
    }
  }

  /** Every place a secret appears where it should not. */
  leaks(): string[] {
    for (const telemetry of this.telemetry) {
      const spans = telemetry.spans();
      for (const span of spans.slice(this.#spansRead.get(telemetry) ?? 0)) {
        const { name, attributes, events, status, links } = span;
        this.sink(`span ${name}`, { name, attributes, events, status, links });
      }
      this.#spansRead.set(telemetry, spans.length);
    }
    const found: string[] = [];
    for (const secret of this.secrets) {
      for (const sink of this.sinks)
        if (sink.text.includes(secret)) found.push(`${sink.label} contains ${secret.slice(0, 12)}…`);
      for (const seen of this.responses) {
        const rest = seen.issues.reduce((text, issued) => text.split(issued).join(''), seen.text);
        if (rest.includes(secret)) found.push(`response ${seen.label} contains ${secret.slice(0, 12)}…`);
      }
    }
    for (const id of this.accessTokenIds) {
      for (const sink of this.sinks) {
        if (sink.label.startsWith(WEBHOOK_SINK) && sink.text.includes(id)) {
          found.push(`${sink.label} names the access token ${id.slice(0, 16)}…`);
        }
      }
    }
    return found;
  }
}

async function http(tp: TestProvider, method: string, path: string, token?: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${tp.base}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

/** An error as a deployment's `grant.error`/`server_error` listener would log it. */
function describeError(error: unknown): string {
  const { message, stack, error_description: description, error_detail: detail } = error as Record<string, unknown>;
  return [message, description, detail, stack].filter(Boolean).join(' | ');
}

describe('canary: no token value or secret leaves its place', function () {
  this.timeout(60_000);
  const canary = new Canary();
  let tp: TestProvider;
  let hooks: Receiver;
  let ssfHooks: Receiver;
  const hookSecret = webhookSecret('canary');
  const pushCredential = 'Bearer canary-push-credential-7d1e';
  let pollEndpoint: string;
  let ssfToken: string;

  before(async () => {
    hooks = await startReceiver();
    ssfHooks = await startReceiver();
    ssfHooks.answer = () => ({ status: 202 });
    canary.secret(hookSecret, hookSecret.slice('whsec_'.length), pushCredential);
    tp = await startProvider({
      configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
      plugin: {
        telemetry: canary.traced(),
        ssf: { pollInterval: 20, pushAllowList: LOOPBACK_RECEIVERS },
        webhooks: {
          subscriptions: [
            {
              id: 'canary',
              url: hooks.url,
              events: [...WEBHOOK_EVENTS],
              secret: hookSecret,
            },
          ],
          pollInterval: 20,
        },
        // The trail as the PostgreSQL log would store it: every appended row's canonical text is searched too.
        auditLog: {
          append: async (name, event) => canary.sink(`audit row ${name}`, canonicalContent(rowOf(name, event))),
        },
        canImpersonate: ({ subject }) => (subject === 'admin' ? { reason: 'administrators are protected' } : true),
        canExchange: ({ subject }) => subject !== 'carol',
        getCustomJwtClaims: ({ context }) => ({ ticket: context.grant.subjectTokenContext['ticketId'] ?? null }),
        delegation: {
          resolveAudience: (audience) => (audience === 'downstream' ? DOWNSTREAM_API : undefined),
          // Small, so that the walk below meets a share's refusal too.
          limits: { perSubjectToken: 2 },
        },
      },
    });
    const emitter = tp.provider as unknown as NodeJS.EventEmitter;
    for (const name of Object.values(EVENTS)) emitter.on(name, (event: unknown) => canary.sink(`event ${name}`, event));
    for (const name of [WEBHOOK_DROPPED, WEBHOOK_DEAD_LETTERED, WEBHOOK_GONE, SSF_DROPPED, SSF_SET_ERROR]) {
      emitter.on(name, (notice: unknown) => canary.sink(`notice ${name}`, notice));
    }
    for (const name of ['grant.error', 'server_error', 'introspection.error', 'userinfo.error']) {
      emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`${name} listener`, describeError(error)));
    }
    // Where the plugin reports what it could not do (a trail or a store that failed), as Koa apps do.
    (tp.provider as Koa).on('error', (error: unknown) => canary.sink('app error', describeError(error)));
    for (const client of [...Object.values(CLIENTS), ...Object.values(RECEIVERS)])
      canary.secret('client_secret' in client ? client.client_secret : undefined);
    // SSF streams that receive every stop of the flow: one pushed to, one polled.
    ssfToken = await receiverToken(tp);
    canary.secret(ssfToken);
    const pushed = await http(tp, 'POST', STREAMS, ssfToken, {
      delivery: { method: PUSH, endpoint_url: ssfHooks.url, authorization_header: pushCredential },
    });
    canary.response('create a push stream', pushed);
    const polled = canary.response('create a poll stream', await http(tp, 'POST', STREAMS, ssfToken, {}));
    pollEndpoint = new URL((polled.body['delivery'] as { endpoint_url: string }).endpoint_url).pathname;
    canary.response('list streams', await http(tp, 'GET', STREAMS, ssfToken));
  });
  after(async () => {
    await tp.close();
    await hooks.close();
    await ssfHooks.close();
  });

  async function create(label: string, body: Record<string, unknown>, m2m?: string): Promise<string> {
    const token = m2m ?? (await m2mToken(tp));
    canary.secret(token);
    const reply = await managementRequest(tp, body, token);
    canary.response(`create ${label}`, reply, [reply.body['subjectToken'] as string | undefined]);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    return reply.body['subjectToken'] as string;
  }

  async function swap(
    label: string,
    params: Record<string, string | undefined>,
    client: (typeof CLIENTS)[keyof typeof CLIENTS] = CLIENTS.console,
    headers: Record<string, string> = {},
  ): Promise<Reply> {
    canary.secret(params['subject_token'], params['actor_token'], headers['dpop']);
    const reply = await exchange(tp, params, client, headers);
    canary.accessToken(reply.body['access_token'] as string | undefined);
    return canary.response(`exchange ${label}`, reply, [reply.body['access_token'] as string | undefined]);
  }

  /** Every webhook delivered since the last call, body and headers, once the outbox is empty. */
  let webhooksCollected = 0;
  async function collectWebhooks(): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
    const deadline = Date.now() + 20_000;
    while (((await tp.impersonation.webhooks().stats()).subscriptions['canary']?.pending ?? 0) > 0) {
      expect(Date.now(), 'the webhooks were delivered').to.be.below(deadline);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const deliveries = hooks.deliveries.slice(webhooksCollected);
    webhooksCollected = hooks.deliveries.length;
    for (const delivery of deliveries) {
      canary.sink(`${WEBHOOK_SINK}body ${delivery.headers['webhook-id']}`, delivery.body);
      canary.sink(`${WEBHOOK_SINK}headers ${delivery.headers['webhook-id']}`, delivery.headers);
    }
    return deliveries.map((delivery) => JSON.parse(delivery.body) as { type: string; data: Record<string, unknown> });
  }

  it('over the whole flow: JWT and opaque resource servers, with and without an actor, success and every refusal', async () => {
    const opaqueActor = await userAccessToken(tp, 'alice');
    const jwtActor = await userAccessToken(tp, 'alice', { scope: 'openid', resource: ACTOR_API });
    const webActor = await userAccessToken(tp, 'alice', { client: CLIENTS.web });
    const noOpenid = await userAccessToken(tp, 'alice', { scope: 'profile:read', resource: API });
    canary.accessToken(opaqueActor, jwtActor, webActor, noOpenid);
    const tampered = `${jwtActor.slice(0, -4)}AAAA`;
    const actors: Array<[string, string | undefined]> = [
      ['no actor', undefined],
      ['opaque actor', opaqueActor],
      ['JWT actor', jwtActor],
    ];

    for (const [format, resource] of [
      ['JWT', API],
      ['opaque', OPAQUE_API],
    ] as const) {
      const scope = resource === API ? 'profile:read' : 'read';
      for (const [who, actor] of actors) {
        const label = `${format} ${who}`;
        const actorParams = actor ? { actor_token: actor, actor_token_type: ACCESS_TOKEN } : {};
        const subject = await create(label, { userId: 'bob', context: { ticketId: 'T-1' } });
        expect((await swap(label, { subject_token: subject, resource, scope, ...actorParams })).status).to.equal(200);
        expect(
          (await swap(`${label} replayed`, { subject_token: subject, resource, scope, ...actorParams })).status,
        ).to.equal(400);
      }

      const fresh = () => create(`${format} for a refusal`, { userId: 'bob' });
      const refusals: Array<[string, Record<string, string | undefined>, (typeof CLIENTS)[keyof typeof CLIENTS]?]> = [
        ['unknown subject token', { subject_token: `ist_${randomBytes(32).toString('base64url')}` }],
        ['an access token as subject token', { subject_token: opaqueActor }],
        [
          'bound to another client',
          { subject_token: await create('client-bound', { userId: 'bob', clientId: CLIENTS.web.client_id }) },
        ],
        ['bound actor missing', { subject_token: await create('actor-bound', { userId: 'bob', actorId: 'alice' }) }],
        [
          'tampered actor token',
          { subject_token: await fresh(), actor_token: tampered, actor_token_type: ACCESS_TOKEN },
        ],
        [
          'actor token of another client',
          { subject_token: await fresh(), actor_token: webActor, actor_token_type: ACCESS_TOKEN },
        ],
        [
          'actor token without openid',
          { subject_token: await fresh(), actor_token: noOpenid, actor_token_type: ACCESS_TOKEN },
        ],
        [
          'subject token as actor token',
          { subject_token: await fresh(), actor_token: await fresh(), actor_token_type: ACCESS_TOKEN },
        ],
        ['policy refusal', { subject_token: await create('carol', { userId: 'carol' }) }],
        ['invalid scope', { subject_token: await fresh(), scope: 'admin' }],
        // A value no store can hold, quoting the request's own subject token: refused without echoing it.
        [
          'unstorable resource',
          await (async () => {
            const subject = await fresh();
            return { subject_token: subject, resource: `${TENANT_API}${subject}\u0000` };
          })(),
        ],
        [
          'wrong subject_token_type',
          { subject_token: await fresh(), subject_token_type: 'urn:ietf:params:oauth:token-type:jwt' },
        ],
      ];
      for (const [name, params, client] of refusals) {
        const reply = await swap(`${format} ${name}`, { resource, ...params }, client);
        expect(reply.status, `${name}: ${JSON.stringify(reply.body)}`).to.be.within(400, 401);
      }
      const unknownResource = await swap(`${format} unknown resource`, {
        subject_token: await fresh(),
        resource: 'https://nowhere.example.com',
      });
      expect(unknownResource.status).to.equal(400);

      const key = await DpopKey.generate();
      const proof = await key.proof(`${tp.base}/token`);
      expect(
        (await swap(`${format} DPoP`, { subject_token: await fresh(), resource }, CLIENTS.console, { dpop: proof }))
          .status,
      ).to.equal(200);
      expect(
        (
          await swap(`${format} DPoP replay`, { subject_token: await fresh(), resource }, CLIENTS.console, {
            dpop: proof,
          })
        ).status,
      ).to.equal(400);

      const posted = await tokenRequest(
        tp,
        {
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: await fresh(),
          subject_token_type: ACCESS_TOKEN,
          resource,
          client_secret: CLIENTS.web.client_secret,
        },
        { client_id: CLIENTS.web.client_id },
      );
      expect(canary.response(`${format} secret in the body`, posted).status).to.equal(401);
    }

    // The Management API's refusals.
    const m2m = await m2mToken(tp);
    const noScope = await m2mToken(tp, CLIENTS.backend, null);
    canary.secret(m2m, noScope);
    const management: Array<[string, unknown, string | undefined]> = [
      ['no token', { userId: 'bob' }, undefined],
      ['tampered token', { userId: 'bob' }, `${m2m.slice(0, -4)}AAAA`],
      ['user token', { userId: 'bob' }, opaqueActor],
      ['token without the scope', { userId: 'bob' }, noScope],
      ['unknown user', { userId: 'nobody' }, m2m],
      ['protected user', { userId: 'admin' }, m2m],
      ['unknown field', { userId: 'bob', token: m2m }, m2m],
      ['bad binding', { userId: 'bob', clientId: CLIENTS.notAllowed.client_id }, m2m],
      ['unstorable context', { userId: 'bob', context: { note: `${m2m}\u0000` } }, m2m],
    ];
    for (const [name, body, token] of management) {
      canary.secret(token);
      const reply = canary.response(`management ${name}`, await managementRequest(tp, body, token));
      expect(reply.status, name).to.be.within(400, 404);
    }

    // Sessions: list, read, stop (JWT and opaque), the feed, withdrawal, and the actor's logout.
    const admin = await m2mToken(tp, CLIENTS.admin, 'impersonations:read impersonations:revoke');
    canary.secret(admin);
    const signedIn = await userSignIn(tp, 'alice');
    canary.accessToken(signedIn.accessToken);
    const started = [];
    for (const resource of [API, OPAQUE_API]) {
      const reply = await swap(`session on ${resource}`, {
        subject_token: await create('session', { userId: 'bob' }),
        resource,
        actor_token: signedIn.accessToken,
        actor_token_type: ACCESS_TOKEN,
      });
      started.push(reply.body['access_token'] as string);
    }
    const listed = canary.response(
      'list sessions',
      await http(tp, 'GET', '/api/impersonations?subject=bob&limit=100', admin),
    );
    const ids = (listed.body['items'] as Array<{ id: string }>).map((item) => item.id);
    const unstorable = canary.response(
      'list sessions with an unstorable filter',
      await http(tp, 'GET', `/api/impersonations?subject=${encodeURIComponent(admin)}%00`, admin),
    );
    expect(unstorable.status).to.equal(400);
    expect(ids.length).to.be.above(2);
    canary.response('read a session', await http(tp, 'GET', `/api/impersonations/${ids[0]!}`, admin));
    canary.response(
      'stop a session',
      await http(tp, 'DELETE', `/api/impersonations/${ids[1]!}`, admin, { reason: 'ticket closed' }),
    );
    const created = await managementRequest(tp, { userId: 'bob' }, m2m);
    canary.response('create to withdraw', created, [created.body['subjectToken'] as string]);
    canary.response('withdraw', await http(tp, 'DELETE', `/api/subject-tokens/${created.body['id'] as string}`, admin));
    canary.response(
      'withdrawn exchange',
      await exchange(tp, { subject_token: created.body['subjectToken'] as string, resource: API }),
    );
    await logout(tp, signedIn.cookies);
    await new Promise((resolve) => setTimeout(resolve, 300));
    canary.response('revocation feed', await http(tp, 'GET', '/api/impersonations/revocations'));
    const firstPage = canary.response(
      'revocation feed page',
      await http(tp, 'GET', '/api/impersonations/revocations?limit=1'),
    );
    canary.response(
      'revocation feed next page',
      await http(tp, 'GET', `/api/impersonations/revocations?limit=1&cursor=${firstPage.body['nextCursor'] as string}`),
    );
    canary.response('revocation feed bad limit', await http(tp, 'GET', '/api/impersonations/revocations?limit=0'));
    for (const token of started) canary.secret(token);
    const names = new Set(canary.sinks.map((sink) => sink.label));
    for (const name of [
      EVENTS.sessionRevoked,
      EVENTS.sessionEnded,
      EVENTS.subjectTokenWithdrawn,
      EVENTS.revocationsServed,
    ]) {
      expect(names, name).to.include(`event ${name}`);
    }
    for (const name of [
      EVENTS.subjectTokenCreated,
      EVENTS.exchangeSucceeded,
      EVENTS.exchangeRefused,
      EVENTS.sessionRevoked,
    ]) {
      expect(names, `the trail records ${name}`).to.include(`audit row ${name}`);
    }

    // Every webhook the flow caused (impersonations at JWT and opaque resources), body and headers.
    const types = new Set((await collectWebhooks()).map((delivery) => delivery.type));
    expect([...types]).to.include.members([EVENTS.exchangeSucceeded, EVENTS.sessionRevoked]);
    const deadline = Date.now() + 20_000;

    // Every SET of the SSF streams: pushed (body, claims, headers) and polled.
    while (Object.values((await tp.impersonation.ssf().stats()).subscriptions).some((stream) => stream.pending > 0)) {
      expect(Date.now(), 'the SETs were delivered').to.be.below(deadline);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(ssfHooks.deliveries.length, 'SETs were pushed').to.be.above(0);
    for (const [at, delivery] of ssfHooks.deliveries.entries()) {
      canary.sink(`pushed SET ${at}`, delivery.body);
      canary.sink(`pushed SET claims ${at}`, decodeJwt(delivery.body));
      // The receiver's credential goes to the receiver, as its Authorization header, and nowhere else.
      const { authorization: _credential, ...headers } = delivery.headers;
      canary.sink(`pushed SET headers ${at}`, headers);
    }
    const poll = canary.response('poll', await http(tp, 'POST', pollEndpoint, ssfToken, { returnImmediately: true }));
    const polledSets = Object.values(poll.body['sets'] as Record<string, string>);
    expect(polledSets.length, 'SETs were polled').to.be.above(0);
    for (const [at, set] of polledSets.entries()) canary.sink(`polled SET claims ${at}`, decodeJwt(set));
    // The CAEP fields of each stop: reason_admin is the stop's reason or a fixed text, never a token.
    const stops = polledSets.map((set) => (decodeJwt(set)['events'] as Record<string, Record<string, unknown>>) ?? {});
    expect(stops.some((events) => Object.values(events).some((event) => 'reason_admin' in event))).to.equal(true);
    // Subjects added and removed, with a token value as the subject: the answers repeat nothing.
    const pollStream = pollEndpoint.slice(pollEndpoint.lastIndexOf('/') + 1);
    for (const [label, path] of [
      ['add a subject', '/ssf/subjects/add'],
      ['remove a subject', '/ssf/subjects/remove'],
      ['a malformed subject', '/ssf/subjects/add'],
    ] as const) {
      const subject =
        label === 'a malformed subject' ? { format: 'opaque', token: ssfToken } : { format: 'opaque', id: 'x' };
      canary.response(label, await http(tp, 'POST', path, ssfToken, { stream_id: pollStream, subject }));
    }
    // The resource-server helper as a push receiver: what it answers a push carrying secrets repeats none.
    const pushVerifier = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: 'https://api.example.com',
      ssf: {
        delivery: 'push',
        endpointUrl: 'https://api.example.com/caep',
        // Unreachable: only its answers to pushes are looked at here, and no stream is made.
        configurationEndpoint: 'http://127.0.0.1:9/ssf/streams',
        verificationEndpoint: 'http://127.0.0.1:9/ssf/verify',
        accessToken: ssfToken,
        audience: RECEIVERS.first.client_id,
        authorization: pushCredential,
      },
    });
    pushVerifier.ready().catch(() => {});
    try {
      for (const [label, push] of [
        ['push refused: credential', { body: ssfToken, authorization: `${pushCredential}x` }],
        ['push refused: not a SET', { body: ssfToken, authorization: pushCredential }],
      ] as const) {
        canary.sink(label, await pushVerifier.receivePush(push));
      }
    } finally {
      pushVerifier.close();
    }
    // A push endpoint refused (an internal address), with a credential: the refusal repeats neither.
    const refused = canary.response(
      'an internal push endpoint refused',
      await http(tp, 'POST', STREAMS, ssfToken, {
        delivery: {
          method: PUSH,
          endpoint_url: 'https://169.254.169.254/latest',
          authorization_header: pushCredential,
        },
      }),
    );
    expect(refused.status).to.equal(400);
    // A poll that cannot say "nothing": the stream paused, its queue acknowledged.
    const streamId = pollEndpoint.slice(pollEndpoint.lastIndexOf('/') + 1);
    await http(tp, 'POST', pollEndpoint, ssfToken, { ack: Object.keys(poll.body['sets'] as object), maxEvents: 0 });
    await http(tp, 'POST', '/ssf/status', ssfToken, { stream_id: streamId, status: 'paused' });
    const held = canary.response(
      'poll of a paused stream',
      await http(tp, 'POST', pollEndpoint, ssfToken, { returnImmediately: true }),
    );
    expect(held.status).to.equal(503);
    await http(tp, 'POST', '/ssf/status', ssfToken, { stream_id: streamId, status: 'enabled' });
    canary.sink('SSF dead letters', await tp.impersonation.ssf().deadLetters());
    await canary.readMetrics();
    expect(canary.sinks.map((sink) => sink.label)).to.include.members([
      'metric impersonation.outbox.backlog',
      'metric impersonation.outbox.oldest_age',
      'metric impersonation.token_exchange.requests',
    ]);

    expect(canary.sinks.length, 'events were collected').to.be.above(40);
    expect(canary.leaks()).to.deep.equal([]);
  });

  it('over delegation: JWT and opaque subjects, impersonations as the subject, the chain, refusals, stops and webhooks', async () => {
    const jwtSubject = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read profile:write' });
    const opaqueSubject = await userAccessToken(tp, 'bob', { resource: OPAQUE_API, scope: 'openid read write' });
    const actor = await userAccessToken(tp, 'alice');
    const unknown = randomBytes(32).toString('base64url');
    canary.accessToken(jwtSubject, opaqueSubject, actor);
    canary.secret(unknown);
    const delegated = async (label: string, params: Record<string, string | undefined>, status: number) => {
      const reply = await swap(`delegation ${label}`, { resource: DOWNSTREAM_API, ...params }, CLIENTS.orders);
      expect(reply.status, `${label}: ${JSON.stringify(reply.body)}`).to.equal(status);
      return reply.body['access_token'] as string;
    };

    let chained = await delegated('JWT subject', { subject_token: jwtSubject, scope: 'profile:read' }, 200);
    await delegated('opaque subject', { subject_token: opaqueSubject, resource: OPAQUE_API, scope: 'read' }, 200);
    await delegated('as JWT', { subject_token: jwtSubject, requested_token_type: JWT_TOKEN_TYPE }, 200);
    await delegated('by audience', { subject_token: jwtSubject, resource: undefined, audience: 'downstream' }, 200);
    await delegated('wider scope', { subject_token: jwtSubject, scope: 'orders:read' }, 400);
    await delegated('unknown subject', { subject_token: unknown }, 400);
    await delegated('unknown jwt subject', { subject_token: `${jwtSubject.slice(0, -4)}AAAA` }, 400);
    await delegated(
      'bad actor',
      { subject_token: jwtSubject, actor_token: unknown, actor_token_type: ACCESS_TOKEN },
      400,
    );
    // The same delegation again is one more token of its session; another target, a second session; a third, past the share.
    await delegated('second target', { subject_token: jwtSubject, resource: API, scope: 'profile:read' }, 200);
    await delegated('past the share', { subject_token: jwtSubject, resource: API, scope: 'profile:write' }, 429);
    const elsewhere = await userAccessToken(tp, 'bob', { resource: ACTOR_API, scope: 'openid' });
    canary.accessToken(elsewhere);
    await delegated('subject for a resource the client does not run', { subject_token: elsewhere }, 400);
    // The chain up to its limit (3 actors), then one actor too many.
    for (const depth of [2, 3])
      chained = await delegated(`depth ${depth}`, { subject_token: chained, resource: API }, 200);
    await delegated('depth 4', { subject_token: chained, resource: API }, 400);

    // An impersonation's token (JWT, then opaque) delegated, delegated again, refused as an actor
    // token, then the impersonation stopped: its delegations end with it.
    const admin = await m2mToken(tp, CLIENTS.admin, 'impersonations:read impersonations:revoke');
    canary.secret(admin);
    for (const resource of [API, OPAQUE_API]) {
      const impersonation = await swap(`impersonation at ${resource} to delegate`, {
        subject_token: await create('to delegate', { userId: 'bob' }),
        resource,
        actor_token: actor,
        actor_token_type: ACCESS_TOKEN,
      });
      const impersonationToken = impersonation.body['access_token'] as string;
      const session =
        resource === API
          ? (decodeJwt(impersonationToken)['impersonation_session'] as string)
          : ((await introspect(tp, impersonationToken))['impersonation_session'] as string);
      const first = await delegated(
        `impersonation subject at ${resource}`,
        { subject_token: impersonationToken, resource },
        200,
      );
      await delegated(`delegation of an impersonation at ${resource}`, { subject_token: first, resource }, 200);
      await delegated(
        `impersonation at ${resource} as actor token`,
        { subject_token: jwtSubject, actor_token: impersonationToken, actor_token_type: ACCESS_TOKEN },
        400,
      );
      canary.response(
        `stop a delegated impersonation at ${resource}`,
        await http(tp, 'DELETE', `/api/impersonations/${session}`, admin),
      );
      await delegated(
        `stopped impersonation subject at ${resource}`,
        { subject_token: impersonationToken, resource },
        400,
      );
      await delegated(
        `delegation of a stopped impersonation at ${resource} as actor token`,
        { subject_token: jwtSubject, actor_token: first, actor_token_type: ACCESS_TOKEN },
        400,
      );
    }
    // A delegation of bob's own token stopped through the Management API.
    const own = await delegated('to stop', { subject_token: opaqueSubject, resource: OPAQUE_API, scope: 'read' }, 200);
    const ownSession = (await introspect(tp, own))['impersonation_session'] as string;
    canary.response('stop a delegation', await http(tp, 'DELETE', `/api/impersonations/${ownSession}`, admin));
    // An opaque actor token sent as a JWT; a subject token revoked at the revocation endpoint, which ends
    // the delegation exchanged from it.
    await delegated(
      'opaque actor token sent as a JWT',
      { subject_token: jwtSubject, actor_token: actor, actor_token_type: JWT_TOKEN_TYPE },
      400,
    );
    const toRevoke = await userAccessToken(tp, 'carol', { resource: OPAQUE_API, scope: 'openid read' });
    canary.accessToken(toRevoke);
    const fromRevoked = await delegated(
      'from a subject token to revoke',
      { subject_token: toRevoke, resource: OPAQUE_API, scope: 'read' },
      200,
    );
    const revoked = await fetch(`${tp.base}/token/revocation`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: toRevoke, client_id: CLIENTS.console.client_id }),
    });
    expect(revoked.status).to.equal(200);
    for (let tries = 0; (await introspect(tp, fromRevoked))['active'] !== false; tries += 1) {
      expect(tries, 'the delegation from a revoked subject token ends').to.be.below(50);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // The webhooks of all this: the impersonations' starts and stops, never a delegation, nor an access token's id.
    const delivered = await collectWebhooks();
    const delegations = canary.sinks
      .filter((sink) => sink.label === `event ${EVENTS.delegationSucceeded}`)
      .map((sink) => (JSON.parse(sink.text) as { sessionId: string }).sessionId);
    expect(delegations.length, 'delegations were made').to.be.above(5);
    expect(delivered.map((delivery) => delivery.type)).to.include(EVENTS.sessionRevoked);
    for (const delivery of delivered) {
      expect(delegations, JSON.stringify(delivery)).not.to.include(delivery.data['sessionId']);
    }

    const names = new Set(canary.sinks.map((sink) => sink.label));
    for (const name of [EVENTS.delegationSucceeded, EVENTS.delegationRefused, EVENTS.sessionEnded]) {
      expect(names, name).to.include(`event ${name}`);
    }
    for (const name of [EVENTS.delegationSucceeded, EVENTS.delegationRefused]) {
      expect(names, `the trail records ${name}`).to.include(`audit row ${name}`);
    }
    expect(canary.leaks()).to.deep.equal([]);
  });

  it('over the refusals of a provider mounted before install(), and the step-up details of one mounted after', async () => {
    const early = await mounted(mountComposedNow, 'mount, then install', { actorAuthentication: { maxAge: 1 } });
    const late = await mounted(mountComposedNow, 'install, then mount', { actorAuthentication: { maxAge: 1 } });
    try {
      for (const [label, host] of [
        ['mounted early', early.tp],
        ['mounted late', late.tp],
      ] as const) {
        const emitter = host.provider as unknown as NodeJS.EventEmitter;
        for (const name of ['grant.error', 'server_error']) {
          emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`${label} ${name}`, describeError(error)));
        }
      }
      const m2m = await tokenRequest(
        early.tp,
        { grant_type: 'client_credentials', scope: 'subject-tokens:create', resource: MANAGEMENT },
        CLIENTS.backend,
      );
      expect(canary.response('m2m through an early mount', m2m).status).to.equal(500);
      const subject = `ist_${randomBytes(32).toString('base64url')}`;
      canary.secret(subject);
      expect(
        canary.response(
          'exchange through an early mount',
          await exchange(early.tp, { subject_token: subject, resource: API }),
        ).status,
      ).to.equal(500);

      const actor = await userAccessToken(late.tp, 'alice');
      canary.secret(actor);
      await new Promise((resolve) => setTimeout(resolve, 2100));
      const m2mLate = await m2mToken(late.tp);
      canary.secret(m2mLate);
      const created = await managementRequest(late.tp, { userId: 'bob' }, m2mLate);
      const lateSubject = created.body['subjectToken'] as string;
      canary.secret(lateSubject);
      const stale = await exchange(late.tp, {
        subject_token: lateSubject,
        resource: API,
        actor_token: actor,
        actor_token_type: ACCESS_TOKEN,
      });
      expect(canary.response('stale actor through a mount', stale).body).to.include({ max_age: 1 });
      expect(canary.sinks.map((sink) => sink.label)).to.include.members([
        'mounted early server_error',
        'mounted late grant.error',
      ]);
      expect(canary.leaks()).to.deep.equal([]);
    } finally {
      await early.tp.close();
      await late.tp.close();
    }
  });

  it("over the customer's approval: requests, grants, their refusals, break-glass, and a grant that ends a session", async () => {
    const ap = await startApprovalProvider({
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id], maxPendingPerCustomer: 1 },
      plugin: {
        telemetry: canary.traced(),
        auditLog: {
          append: async (name, event) =>
            canary.sink(`approval audit row ${name}`, canonicalContent(rowOf(name, event))),
        },
      },
    });
    try {
      const emitter = ap.tp.provider as unknown as NodeJS.EventEmitter;
      for (const name of Object.values(EVENTS))
        emitter.on(name, (event: unknown) => canary.sink(`approval event ${name}`, event));
      for (const name of ['grant.error', 'server_error']) {
        emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`approval ${name}`, describeError(error)));
      }
      (ap.tp.provider as Koa).on('error', (error: unknown) => canary.sink('approval app error', describeError(error)));
      const backend = await m2mToken(ap.tp);
      const oncall = await m2mToken(ap.tp, CLIENTS.oncall);
      const alice = await userAccessToken(ap.tp, 'alice');
      canary.secret(backend, oncall, alice);
      const ask = async (label: string, body: Record<string, unknown>, token = backend) => {
        const reply = await managementRequest(ap.tp, body, token);
        return canary.response(`approval ${label}`, reply, [reply.body['subjectToken'] as string | undefined]);
      };
      const customer = newCustomer();
      // The person, the client and the ticket the customer approves, and a bypass names.
      const bound = { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id };
      const asked = { ...bound, context: { ticketId: 'T-1' } };

      // A request, asked twice, then the cap; the refusals of the creation.
      const pending = await ask('pending', asked);
      const id = requestIdOf(pending);
      expect((await ask('pending again', asked)).status).to.equal(202);
      expect((await ask('over the cap', { ...asked, actorId: 'carol' })).status).to.equal(429);
      expect((await ask('no actor', { userId: customer })).status).to.equal(400);
      expect((await ask('break-glass refused', { ...bound, breakGlass: { reason: 'hurry' } })).status).to.equal(403);
      expect((await ask('break-glass token', { ...bound, breakGlass: { reason: backend } }, oncall)).status).to.equal(
        400,
      );
      expect(
        (await ask('break-glass unbound', { userId: customer, breakGlass: { reason: 'x' } }, oncall)).status,
      ).to.equal(400);
      expect((await ask('scope holding a token', { ...asked, scope: [backend] })).status).to.equal(400);
      const read = await apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, backend);
      canary.response('approval read', read);
      canary.response('approval read by another', await apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, oncall));

      // The customer approves; a token under the grant; the exchange; the grant ends and ends the session.
      await approveRequest(ap.deps, customer, id, { duration: 600 });
      const created = await ask('under the grant', asked);
      const subject = created.body['subjectToken'] as string;
      const exchanged = await exchange(ap.tp, {
        subject_token: subject,
        resource: API,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });
      canary.response('approval exchange', exchanged, [exchanged.body['access_token'] as string]);
      expect(exchanged.status).to.equal(200);
      const grantId = (await listGrants(ap.deps, customer)).items[0]!.id;
      const unused = await ask('before the end', asked);
      await endAccessGrant(ap.deps, customer, grantId);
      const refused = await exchange(ap.tp, {
        subject_token: unused.body['subjectToken'] as string,
        resource: API,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });
      expect(canary.response('approval exchange after the end', refused).body['error']).to.equal('invalid_grant');

      // A denial, library refusals that quote a token, and break-glass.
      const second = requestIdOf(await ask('second', asked));
      await denyRequest(ap.deps, customer, second, { reason: 'not now' });
      for (const call of [
        giveGrant(ap.deps, customer, { duration: 60, note: `${backend}\u0000` }),
        giveGrant(ap.deps, customer, { duration: 60, [backend]: true }),
        approveRequest(ap.deps, customer, second, { duration: 60 }),
        endAccessGrant(ap.deps, customer, backend),
      ]) {
        canary.sink(
          'approval library refusal',
          describeError(
            await call.then(
              () => undefined,
              (error: unknown) => error,
            ),
          ),
        );
      }
      const glass = await ask('break-glass', { ...bound, breakGlass: { reason: 'outage' } }, oncall);
      expect(glass.status).to.equal(201);
      canary.secret(subject, unused.body['subjectToken'] as string, exchanged.body['access_token'] as string);

      const names = new Set(canary.sinks.map((sink) => sink.label));
      for (const name of [
        EVENTS.approvalRequested,
        EVENTS.approvalApproved,
        EVENTS.approvalDenied,
        EVENTS.accessGrantCreated,
        EVENTS.accessGrantEnded,
        EVENTS.breakGlassUsed,
        EVENTS.sessionEnded,
      ]) {
        expect(names, name).to.include(`approval event ${name}`);
        expect(names, `the trail records ${name}`).to.include(`approval audit row ${name}`);
      }
      expect(canary.leaks()).to.deep.equal([]);
    } finally {
      await ap.tp.close();
    }
  });

  it('over an AuthZEN decision point: what it is sent, and every refusal, allowed, denied and unanswered', async () => {
    const pdp = await startDecisionPoint();
    const pdpToken = 'authzen-canary-bearer-5b2e';
    const pdpKey = 'authzen-canary-key-91c4';
    canary.secret(pdpToken, pdpKey);
    const ap = await startApprovalProvider({
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
      plugin: {
        telemetry: canary.traced(),
        authzen: { url: pdp.url, timeout: 200, token: pdpToken, headers: { 'x-api-key': pdpKey } },
        auditLog: {
          append: async (name, event) => canary.sink(`authzen audit row ${name}`, canonicalContent(rowOf(name, event))),
        },
      },
    });
    try {
      const emitter = ap.tp.provider as unknown as NodeJS.EventEmitter;
      for (const name of Object.values(EVENTS))
        emitter.on(name, (event: unknown) => canary.sink(`authzen event ${name}`, event));
      for (const name of ['grant.error', 'server_error']) {
        emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`authzen ${name}`, describeError(error)));
      }
      (ap.tp.provider as Koa).on('error', (error: unknown) => canary.sink('authzen app error', describeError(error)));
      const backend = await m2mToken(ap.tp);
      const oncall = await m2mToken(ap.tp, CLIENTS.oncall);
      const alice = await userAccessToken(ap.tp, 'alice');
      canary.secret(backend, oncall, alice);
      const ask = async (label: string, body: Record<string, unknown>, token = backend) => {
        const reply = await managementRequest(ap.tp, body, token);
        return canary.response(`authzen ${label}`, reply, [reply.body['subjectToken'] as string | undefined]);
      };
      const swapAs = async (
        label: string,
        params: Record<string, string>,
        client: ClientCredentials = CLIENTS.console,
      ) => {
        canary.secret(params['subject_token'], params['actor_token']);
        const reply = await exchange(ap.tp, params, client);
        canary.accessToken(reply.body['access_token'] as string | undefined);
        return canary.response(`authzen ${label}`, reply, [reply.body['access_token'] as string | undefined]);
      };
      const customer = newCustomer();
      const asked = {
        userId: customer,
        actorId: 'alice',
        clientId: CLIENTS.console.client_id,
        context: { ticketId: 'T-9', reason: 'refund' },
      };
      const actAs = (subject: string) => ({
        subject_token: subject,
        resource: API,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });

      for (const answer of [
        { allow: true },
        { deny: 'no' },
        { hang: true },
        { status: 500 },
        { body: '{}' },
      ] as const) {
        pdp.answer = answer;
        ap.policy.answer = 'none';
        await ask(`creation ${Object.keys(answer)[0]}`, asked);
        await ask(`break-glass ${Object.keys(answer)[0]}`, { ...asked, breakGlass: { reason: 'outage' } }, oncall);
        pdp.answer = (evaluation) => (evaluation.action.name === 'impersonate' ? { allow: true } : answer);
        const subject = (await ask('a subject token', asked)).body['subjectToken'] as string;
        const impersonated = await swapAs(`exchange ${Object.keys(answer)[0]}`, actAs(subject));
        const token = impersonated.body['access_token'] as string | undefined;
        const own = await userAccessToken(ap.tp, 'bob', { resource: API, scope: 'openid profile:read' });
        canary.secret(own);
        await swapAs(
          `delegation ${Object.keys(answer)[0]}`,
          { subject_token: own, resource: DOWNSTREAM_API },
          CLIENTS.orders,
        );
        if (token) {
          await swapAs(
            'delegation of the impersonation',
            { subject_token: token, resource: DOWNSTREAM_API },
            CLIENTS.orders,
          );
        }
        ap.policy.answer = 'grant';
        pdp.answer = (evaluation) => (evaluation.action.name === 'approve' ? answer : { allow: true });
        const approving = newCustomer();
        const pending = await ask('an approval request', { ...asked, userId: approving });
        const refusal = await approveRequest(ap.deps, approving, requestIdOf(pending), { duration: 60 }).then(
          () => undefined,
          (error: unknown) => error,
        );
        if (refusal) canary.sink('authzen approval refusal', describeError(refusal));
      }

      expect(pdp.received.map((sent) => sent.body.action.name)).to.include.members([
        'impersonate',
        'break-glass',
        'exchange',
        'delegate',
        'approve',
      ]);
      for (const sent of pdp.received) {
        const { authorization, ...headers } = sent.headers;
        expect(authorization).to.equal(`Bearer ${pdpToken}`);
        canary.sink(`authzen request body ${sent.body.action.name}`, sent.raw);
        canary.sink(`authzen request headers ${sent.body.action.name}`, { ...headers, 'x-api-key': undefined });
      }
      expect(canary.leaks()).to.deep.equal([]);
    } finally {
      await ap.tp.close();
      await pdp.close();
    }
  });

  it('over ID-JAG redemptions: success, replay and every refusal of an assertion', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'idp', alg: 'ES256' }] };
    const agent = { client_id: 'canary-agent', client_secret: 'canary-agent-secret-5b0c' };
    canary.secret(agent.client_secret);
    const rp = await startProvider({
      plugin: {
        telemetry: canary.traced(),
        idJag: { trustedIssuers: [{ issuer: 'https://idp.example.com', jwks, accountOf: ({ sub }) => sub }] },
        auditLog: {
          append: async (name, event) => canary.sink(`audit row ${name}`, canonicalContent(rowOf(name, event))),
        },
      },
      configuration: {
        clients: [
          ...FIXTURE_CLIENTS,
          agentAtRedeemer(agent),
          {
            client_id: 'canary-public-agent',
            token_endpoint_auth_method: 'none',
            grant_types: [JWT_BEARER_GRANT],
            response_types: [],
            redirect_uris: [],
          },
        ],
      },
    });
    try {
      const emitter = rp.provider as unknown as NodeJS.EventEmitter;
      for (const name of Object.values(EVENTS))
        emitter.on(name, (event: unknown) => canary.sink(`event ${name}`, event));
      for (const name of ['grant.error', 'server_error']) {
        emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`${name} listener`, describeError(error)));
      }
      (rp.provider as Koa).on('error', (error: unknown) => canary.sink('app error', describeError(error)));
      const now = Math.floor(Date.now() / 1000);
      const sign = (claims: Record<string, unknown>, typ = 'oauth-id-jag+jwt') =>
        new SignJWT({
          iss: 'https://idp.example.com',
          sub: 'alice',
          aud: rp.issuer,
          client_id: agent.client_id,
          jti: randomBytes(8).toString('hex'),
          iat: now,
          exp: now + 60,
          resource: API,
          scope: 'profile:read',
          ...claims,
        })
          .setProtectedHeader({ alg: 'ES256', typ, kid: 'idp' })
          .sign(privateKey);
      const redeem = async (label: string, assertion: string, params = {}, client: ClientCredentials = agent) => {
        canary.secret(assertion);
        const reply = await tokenRequest(rp, { grant_type: JWT_BEARER_GRANT, assertion, ...params }, client);
        canary.accessToken(reply.body['access_token'] as string | undefined);
        return canary.response(`ID-JAG ${label}`, reply, [reply.body['access_token'] as string | undefined]);
      };
      const redeemed = await sign({ impersonation_session: 'imp_canaryIssuerSession0000' });
      expect((await redeem('redeemed', redeemed)).status).to.equal(200);
      expect((await redeem('replayed', redeemed)).status).to.equal(400);
      // The redemption's session, listed and stopped: its stop is an event too.
      const admin = await m2mToken(rp, CLIENTS.admin, 'impersonations:read impersonations:revoke');
      canary.secret(admin);
      const listed = canary.response('list redemption sessions', await http(rp, 'GET', '/api/impersonations', admin));
      const [session] = (listed.body['items'] as Array<{ id: string; type: string }>).filter(
        (item) => item.type === 'id-jag-redemption',
      );
      const stopped = await http(rp, 'DELETE', `/api/impersonations/${session!.id}`, admin, { reason: 'left' });
      expect(canary.response('stop a redemption session', stopped).status).to.equal(204);
      const refusals: Array<[string, Promise<string>, Record<string, string>?, ClientCredentials?]> = [
        ['not a JWT', Promise.resolve(`${redeemed.slice(0, 40)}.not-a-jwt`)],
        ['typ', sign({}, 'JWT')],
        ['audience', sign({ aud: 'https://elsewhere.example.com' })],
        ['client_id', sign({ client_id: 'someone-else' })],
        ['expired', sign({ iat: now - 120, exp: now - 60 })],
        ['untrusted issuer', sign({ iss: 'https://evil.example.com' })],
        ['unknown account', sign({ sub: 'mallory' })],
        ['malformed issuer session', sign({ impersonation_session: 42 })],
        ['wider scope', sign({}), { scope: 'profile:write' }],
        ['other resource', sign({}), { resource: OPAQUE_API }],
        ['public client', sign({ client_id: 'canary-public-agent' }), {}, { client_id: 'canary-public-agent' }],
      ];
      for (const [label, assertion, params, client] of refusals) {
        expect((await redeem(label, await assertion, params, client)).status, label).to.be.within(400, 401);
      }
      expect(canary.leaks()).to.deep.equal([]);
    } finally {
      await rp.close();
    }
  });

  it('over ID-JAG issues: success, the session stopped, every refusal of an ID token, a refresh token or an actor token', async () => {
    const agent = { client_id: 'canary-chat-agent', client_secret: 'canary-chat-agent-secret-77d1' };
    canary.secret(agent.client_secret);
    const audience = 'https://chat.example.com';
    const idp = await startProvider({
      plugin: {
        telemetry: canary.traced(),
        idJagIssuance: { canIssue: ({ subject }) => subject !== 'carol' },
        auditLog: {
          append: async (name, event) => canary.sink(`audit row ${name}`, canonicalContent(rowOf(name, event))),
        },
      },
      configuration: {
        clients: [
          ...FIXTURE_CLIENTS,
          agentAtIdp(agent, audience, ['authorization_code', 'refresh_token', TOKEN_EXCHANGE]),
        ],
      },
    });
    try {
      const emitter = idp.provider as unknown as NodeJS.EventEmitter;
      for (const name of Object.values(EVENTS))
        emitter.on(name, (event: unknown) => canary.sink(`event ${name}`, event));
      for (const name of ['grant.error', 'server_error']) {
        emitter.on(name, (_ctx: unknown, error: unknown) => canary.sink(`${name} listener`, describeError(error)));
      }
      (idp.provider as Koa).on('error', (error: unknown) => canary.sink('app error', describeError(error)));
      const signIn = async (user: string, client: ClientCredentials = agent) => {
        const idToken = (await userSignIn(idp, user, { client, scope: 'openid' })).idToken!;
        canary.secret(idToken);
        return idToken;
      };
      const alice = await signIn('alice');
      const ask = async (label: string, params: Record<string, string>, client: ClientCredentials = agent) => {
        const reply = await exchangeForIdJag(idp, client, {
          subject_token: alice,
          audience,
          scope: 'chat.read',
          ...params,
        });
        canary.accessToken(reply.body['access_token'] as string | undefined);
        return canary.response(`ID-JAG issue ${label}`, reply, [reply.body['access_token'] as string | undefined]);
      };
      expect((await ask('issued', { resource: API })).status).to.equal(200);
      const actorToken = async (client: ClientCredentials = agent) => {
        const value = await userAccessToken(idp, 'bob', { client, scope: 'openid' });
        canary.secret(value);
        return { actor_token: value, actor_token_type: ACCESS_TOKEN };
      };
      const actor = await actorToken();
      expect((await ask('issued with an actor', { resource: API, ...actor })).status).to.equal(200);
      const admin = await m2mToken(idp, CLIENTS.admin, 'impersonations:read impersonations:revoke');
      canary.secret(admin);
      const listed = canary.response('list ID-JAG sessions', await http(idp, 'GET', '/api/impersonations', admin));
      const [session] = (listed.body['items'] as Array<{ id: string; type: string }>).filter(
        (item) => item.type === 'id-jag',
      );
      const stopped = await http(idp, 'DELETE', `/api/impersonations/${session!.id}`, admin, { reason: 'left' });
      expect(canary.response('stop an ID-JAG session', stopped).status).to.equal(204);
      const refusals: Array<[string, Record<string, string>, ClientCredentials?]> = [
        ['not a JWT', { subject_token: `${alice.slice(0, 40)}.not-a-jwt` }],
        ['signature', { subject_token: `${alice.slice(0, -8)}AAAAAAAA` }],
        ['audience', { audience: 'https://elsewhere.example.com' }],
        ['resource', { resource: `${API}#fragment` }],
        ['another client', { subject_token: await signIn('bob', CLIENTS.web) }],
        ['policy', { subject_token: await signIn('carol') }],
        ['unauthorized client', { subject_token: await signIn('bob', CLIENTS.web) }, CLIENTS.web],
        ['actor of another client', await actorToken(CLIENTS.web)],
        ['actor invalid', { ...actor, actor_token: `${actor.actor_token.slice(0, -8)}AAAAAAAA` }],
      ];
      for (const [label, params, client] of refusals) {
        expect((await ask(label, params, client)).status, label).to.equal(400);
      }
      const refreshTokenOf = async (client: ClientCredentials) => {
        const signedIn = await userSignIn(idp, 'alice', { client, scope: 'openid offline_access', prompt: 'consent' });
        canary.secret(signedIn.refreshToken!);
        return {
          subject_token: signedIn.refreshToken!,
          subject_token_type: 'urn:ietf:params:oauth:token-type:refresh_token',
        };
      };
      const held = await refreshTokenOf(agent);
      expect((await ask('issued from a refresh token', { ...held, scope: 'openid' })).status).to.equal(200);
      const refreshTokenRefusals: Array<[string, Record<string, string>]> = [
        ['refresh token of another client', await refreshTokenOf(CLIENTS.customer)],
        ['refresh token unknown', { ...held, subject_token: `${held.subject_token.slice(0, -4)}AAAA` }],
        [
          'refresh token named an ID token',
          { ...held, subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
        ],
      ];
      for (const [label, params] of refreshTokenRefusals) {
        expect((await ask(label, params)).status, label).to.equal(400);
      }
      expect(canary.leaks()).to.deep.equal([]);
    } finally {
      await idp.close();
    }
  });

  it('is a canary that sings: it finds a token value put into an event', () => {
    const probe = new Canary();
    probe.secret('ist_canary');
    probe.sink('event', { accessTokenId: 'ist_canary' });
    expect(probe.leaks()).to.have.length(1);
  });

  it('is a canary that sings: it finds a token value put into a span', () => {
    const probe = new Canary();
    probe.secret('ist_canary');
    const tracer = probe.traced().tracerProvider.getTracer('probe');
    tracer.startSpan('probe', { attributes: { 'impersonation.subject': 'ist_canary' } }).end();
    tracer.startSpan('probe').addEvent('seen', { token: 'ist_canary' }).end();
    expect(probe.leaks()).to.have.length(2);
  });

  it('is a canary that sings: it finds a token value put into a metric', async () => {
    const probe = new Canary();
    probe.secret('ist_canary');
    const meter = probe.traced().meterProvider.getMeter('probe');
    meter.createCounter('probe').add(1, { 'impersonation.subject': 'ist_canary' });
    await probe.readMetrics();
    expect(probe.leaks()).to.have.length(1);
  });

  describe('the demo', () => {
    const DEMO_WEBHOOK_SECRET = webhookSecret('demo-canary');
    let demo: Demo;
    const lines: string[] = [];
    before(async () => {
      demo = await startDemo({
        identityPort: 0,
        backendPort: 0,
        log: (line) => lines.push(line),
        backend: { pendingSignIns: { max: 2 } },
        webhookSecret: DEMO_WEBHOOK_SECRET,
      });
    });
    after(() => demo?.close());

    it('logs no token value or secret over the flow, customer approval and the refusals', async () => {
      const demoCanary = new Canary();
      demoCanary.secret(
        'support-web-secret',
        'impersonation-backend-secret',
        'customer-account-secret',
        'emergency-access-secret',
        DEMO_WEBHOOK_SECRET,
        DEMO_WEBHOOK_SECRET.slice('whsec_'.length),
      );
      // Every token the identity service issues, the backend's own included (M2M, the customer's refresh token and token).
      demo.identity.provider.on('grant.success', (ctx: Koa.Context) => {
        const issued = ctx.body as Record<string, unknown> | undefined;
        for (const name of ['access_token', 'refresh_token', 'id_token'])
          if (typeof issued?.[name] === 'string') demoCanary.secret(issued[name]);
      });
      const alice = await demoHttp.signIn(demo, { login: 'alice', password: 'alice-password' });
      const aliceWeb = await demoHttp.signIn(demo, {
        login: 'alice',
        password: 'alice-password',
        client: 'support-web',
      });
      const bob = await demoHttp.signIn(demo, { login: 'bob', password: 'bob-password' });
      demoCanary.secret(alice, aliceWeb, bob);
      // Dave needs no approval; bob's comes below.
      const request = { userId: 'dave', reason: 'Cannot see the invoices', ticketId: 'T-1234' };

      const granted = await demoHttp.requestImpersonation(demo, alice, request);
      const subject = granted.body['subjectToken'] as string;
      demoCanary.secret(subject);
      const exchanged = await demoHttp.exchange(demo, subject, alice);
      const accessToken = exchanged.body['access_token'] as string;
      demoCanary.secret(accessToken);
      expect((await demoHttp.callResourceApi(demo, accessToken)).status).to.equal(200);

      // Refusals: replay, wrong actor, wrong client, not support staff, protected user, bad tokens.
      expect((await demoHttp.exchange(demo, subject, alice)).status).to.equal(400);
      const second = (await demoHttp.requestImpersonation(demo, alice, request)).body['subjectToken'] as string;
      demoCanary.secret(second);
      expect((await demoHttp.exchange(demo, second, bob)).status).to.equal(400);
      expect(
        (await demoHttp.exchange(demo, second, aliceWeb, { id: 'support-web', secret: 'support-web-secret' })).status,
      ).to.equal(400);
      expect((await demoHttp.requestImpersonation(demo, bob, request)).status).to.equal(403);
      expect((await demoHttp.requestImpersonation(demo, alice, { ...request, userId: 'carol' })).status).to.equal(403);
      expect((await demoHttp.requestImpersonation(demo, `${alice}x`, request)).status).to.equal(401);
      expect((await demoHttp.callResourceApi(demo, `${accessToken.slice(0, -4)}AAAA`)).status).to.equal(401);
      expect((await demoHttp.callResourceApi(demo, alice)).status).to.equal(401);

      // The support product: the customer's data, a refused change, the status and stop of the impersonation, the account page, the trail.
      const api = (path: string, token: string, init: RequestInit = {}) =>
        fetch(`${demo.backend.url}${path}`, {
          ...init,
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            ...(init.headers as Record<string, string>),
          },
        }).then(
          async (response) =>
            `${response.status} ${await response.text()} ${response.headers.get('www-authenticate') ?? ''}`,
        );
      const sessionId = JSON.parse(Buffer.from(accessToken.split('.')[1]!, 'base64url').toString())[
        'impersonation_session'
      ] as string;
      const answers = [
        await api('/api/customer', accessToken),
        await api('/api/customer/shipping-address', accessToken, {
          method: 'PUT',
          body: JSON.stringify({ line1: 'x', city: 'y', postcode: 'z', country: 'w' }),
        }),
        await api(`/api/impersonation-status?sessionId=${sessionId}`, alice),
        await api('/api/stop-impersonation', alice, { method: 'POST', body: JSON.stringify({ sessionId }) }),
        await api(`/api/impersonation-status?sessionId=${sessionId}`, alice),
        await api('/api/stop-impersonation', bob, { method: 'POST', body: JSON.stringify({ sessionId }) }),
      ];
      expect(answers.map((answer) => answer.slice(0, 3))).to.deep.equal(['200', '403', '200', '204', '200', '403']);
      for (const [index, answer] of answers.entries()) demoCanary.sink(`demo API answer ${index}`, answer);

      // Bob must approve: alice waits, bob approves on his page, alice goes on; bob ends the access, then denies.
      const bobRequest = { ...request, userId: 'bob' };
      const asked = await demoHttp.requestImpersonation(demo, alice, bobRequest);
      expect(asked.status).to.equal(202);
      demoCanary.sink('the request waiting for bob', asked.body);
      const requestId = (asked.body['approvalRequest'] as { id: string }).id;
      const { jar, html: before } = await demoHttp.accountSignIn(demo.backend.url, 'bob');
      const csrf = demoHttp.csrfOf(before);
      const form = (action: string, fields: Record<string, string>) =>
        demoHttp
          .postAccountForm(demo.backend.url, jar, action, { csrf, ...fields })
          .then(
            async (response) => `${response.status} ${response.headers.get('location') ?? ''} ${await response.text()}`,
          );
      const forms = [await form(`/account/support-access/requests/${requestId}/approve`, { duration: '3600' })];
      const approval = await fetch(`${demo.backend.url}/api/impersonation-approval?requestId=${requestId}`, {
        headers: { authorization: `Bearer ${alice}` },
      });
      const approved = (await approval.json()) as Record<string, unknown>;
      expect(approved['status']).to.equal('approved');
      demoCanary.secret(approved['subjectToken'] as string);
      const bobToken = (await demoHttp.exchange(demo, approved['subjectToken'] as string, alice)).body['access_token'];
      demoCanary.secret(bobToken as string);
      const grantId = /id="grant-(agr_[A-Za-z0-9_-]{22})"/.exec(
        await (await demoHttp.request(jar, `${demo.backend.url}/account`)).text(),
      )?.[1];
      forms.push(await form(`/account/support-access/grants/${grantId}/end`, {}));
      const deniedId = (
        (await demoHttp.requestImpersonation(demo, alice, bobRequest)).body['approvalRequest'] as { id: string }
      ).id;
      forms.push(await form(`/account/support-access/requests/${deniedId}/deny`, { reason: 'Call me first' }));
      forms.push(
        await demoHttp
          .postAccountForm(demo.backend.url, jar, '/account/support-access/grants', {
            csrf: 'forged',
            duration: '3600',
            access: 'read',
          })
          .then((response) => response.text()),
      );
      expect(forms.map((answer) => answer.slice(0, 3))).to.deep.equal(['303', '303', '303', '<!d']);
      for (const [index, answer] of forms.entries()) demoCanary.sink(`account form ${index}`, answer);
      demoCanary.sink(
        'the denial as the console reads it',
        await (
          await fetch(`${demo.backend.url}/api/impersonation-approval?requestId=${deniedId}`, {
            headers: { authorization: `Bearer ${alice}` },
          })
        ).text(),
      );
      const html = await (await demoHttp.request(jar, `${demo.backend.url}/account`)).text();
      expect(html).to.contain('Alice Adams (support) accessed your account on');
      demoCanary.sink('the account page', html);
      // Sign-ins started and never finished, until the bound refuses one.
      const started = [];
      for (let i = 0; i < 3; i += 1) {
        const response = await demoHttp.request(new demoHttp.CookieJar(), `${demo.backend.url}/web/login`);
        started.push(`${response.status} ${response.headers.get('location') ?? ''} ${await response.text()}`);
      }
      expect(started.map((answer) => answer.slice(0, 3))).to.deep.equal(['302', '302', '503']);
      for (const [index, answer] of started.entries()) demoCanary.sink(`sign-in started ${index}`, answer);
      for (const row of (demo.auditLog as MemoryAuditLog).rows) demoCanary.sink(`audit row ${row.seq}`, row);

      // The customers' notifications arrived, by the identity service's signed webhooks.
      const notified = Date.now();
      while (!lines.some((line) => line.startsWith('[backend] notification for bob: ')) && Date.now() - notified < 5000)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lines.some((line) => line.startsWith('[backend] notification for dave: '))).to.equal(true);
      expect(lines.some((line) => line.startsWith('[backend] notification for bob: '))).to.equal(true);
      expect(lines.length, 'the demo logged the flow').to.be.above(5);
      for (const [index, line] of lines.entries()) demoCanary.sink(`demo log line ${index}`, line);
      expect(demoCanary.leaks()).to.deep.equal([]);
    });
  });
});
