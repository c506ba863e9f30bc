import type { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import bodyParser from '@koa/bodyparser';
import express, { type Express } from 'express';
import Koa from 'koa';
import mount from 'koa-mount';
import type Provider from 'oidc-provider';
import type { Impersonation, ImpersonationOptions } from '../../lib/index.js';
import {
  actorParams,
  apiRequest,
  basic,
  decodeJwt,
  exchange,
  expectError,
  m2mToken,
  managementRequest,
  tokenRequest,
  userAccessToken,
} from '../support/http.js';
import {
  API,
  CLIENTS,
  MANAGEMENT,
  MANAGEMENT_SCOPE,
  READ_SCOPE,
  REVOKE_SCOPE,
  startProvider,
  type TestProvider,
} from '../support/provider.js';

/**
 * Every host oidc-provider's documentation mounts it on, each running the
 * code of its section in docs/adding-to-your-deployment.md (the block after
 * `<!-- host: name -->`) on a provider from the suite's configuration and
 * adapter, with the issuer below /oidc.
 */

const ACR = 'urn:example:mfa';
const SESSIONS = '/api/impersonations';
const MANAGEMENT_SCOPES = [MANAGEMENT_SCOPE, READ_SCOPE, REVOKE_SCOPE];

interface Host {
  title: string;
  /** The docs block it runs; none for the provider served on its own. */
  snippet?: string;
  /** Whether the host app, not the provider, serves the Management API (at the origin's /api). */
  apiOnHost?: boolean;
}

const HOSTS: Host[] = [
  { title: 'a provider served on its own (provider.callback())' },
  { title: 'koa-mount in a parent Koa app, install() first', snippet: 'koa-mount' },
  {
    title: 'koa-mount in a parent Koa app, install() after mounting, the Management API on the parent',
    snippet: 'koa-mount-then-install',
    apiOnHost: true,
  },
  {
    title: 'koa-mount in a parent Koa app whose @koa/bodyparser parses every body first',
    snippet: 'koa-bodyparser',
  },
  { title: "Express, the Management API under the provider's path", snippet: 'express' },
  { title: 'Express with a global express.json() ahead of the provider', snippet: 'express-json' },
  { title: 'Express, the Management API served by the Express app', snippet: 'express-api', apiOnHost: true },
  { title: "Fastify with @fastify/middie, the Management API under the provider's path", snippet: 'fastify' },
  {
    title: 'Fastify with @fastify/middie, the Management API served by Fastify',
    snippet: 'fastify-api',
    apiOnHost: true,
  },
];

/** What a refusal looks like to a client: compared byte for byte across hosts. */
interface Refusal {
  status: number;
  contentType: string | null;
  wwwAuthenticate: string | null;
  body: string;
}

const refusalsByHost = new Map<string, Record<string, Refusal>>();

describe('the plugin on every host oidc-provider documents', function () {
  this.timeout(30_000);

  for (const host of HOSTS) {
    describe(host.title, () => {
      let running: Running;
      before(async () => {
        running = await startHost(host);
      });
      after(() => running?.close());

      it('lists none of the management scopes in discovery', async () => {
        const { tp } = running;
        for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
          const response = await fetch(`${tp.base}${path}`);
          expect(response.status, path).to.equal(200);
          const discovery = (await response.json()) as Record<string, unknown>;
          expect(discovery['issuer'], path).to.equal(tp.issuer);
          expect(discovery['token_endpoint'], path).to.equal(`${tp.issuer}/token`);
          expect(discovery['scopes_supported'], path).to.include('openid');
          expect(discovery['scopes_supported'], path).to.not.include.any.members(MANAGEMENT_SCOPES);
        }
      });

      it('serves the Management API where its section says, and only there', async () => {
        const { tp, api, origin } = running;
        const backend = await m2mToken(tp);
        expect((await managementRequest(api, { userId: 'bob' }, backend)).status).to.equal(201);
        if (origin === tp.base) return; // the provider is the host
        const elsewhere = host.apiOnHost ? tp : { ...tp, base: origin };
        expect((await managementRequest(elsewhere, { userId: 'bob' }, backend)).status).to.equal(404);
        // What the API does not answer goes on to the host, as it came.
        const own = await fetch(`${origin}${HOST_ROUTE}`);
        expect(own.status).to.equal(200);
        expect(await own.text()).to.equal('host');
        const unknown = await fetch(`${origin}/elsewhere`);
        expect(unknown.status).to.equal(404);
        await unknown.arrayBuffer();
      });

      it('runs the whole flow: M2M token, subject token, exchange with an actor, sessions listed and revoked', async () => {
        const { tp, api } = running;
        const backend = await m2mToken(tp);
        const created = await managementRequest(api, { userId: 'bob', context: { ticketId: 'T-1' } }, backend);
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        const actor = await userAccessToken(tp, 'alice', { acr: ACR });
        const exchanged = await exchange(tp, {
          subject_token: created.body['subjectToken'] as string,
          resource: API,
          ...actorParams(actor),
        });
        expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
        const claims = decodeJwt(exchanged.body['access_token'] as string);
        expect(claims).to.include({ sub: 'bob', iss: tp.issuer });
        expect(claims['act']).to.deep.equal({ sub: 'alice' });
        const session = claims['impersonation_session'] as string;

        const admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
        const listed = await apiRequest(api, 'GET', `${SESSIONS}?subject=bob&limit=100`, admin);
        expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
        expect((listed.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.include(session);
        const revoked = await apiRequest(api, 'DELETE', `${SESSIONS}/${session}`, admin, { reason: 'done' });
        expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
        const read = await apiRequest(api, 'GET', `${SESSIONS}/${session}`, admin);
        expect(read.body).to.include({ id: session, state: 'revoked', revokedBy: CLIENTS.admin.client_id });
        const after = await apiRequest(api, 'GET', `${SESSIONS}?subject=bob&limit=100`, admin);
        expect((after.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.not.include(session);
      });

      it('refuses what it must, each refusal an OAuth-style error', async () => {
        const { tp, api } = running;
        const refusals: Record<string, Refusal> = {};
        const keep = async (name: string, response: Promise<Response>) => {
          const answer = await response;
          refusals[name] = {
            status: answer.status,
            contentType: answer.headers.get('content-type'),
            wwwAuthenticate: answer.headers.get('www-authenticate'),
            body: await answer.text(),
          };
        };
        const weakActor = await userAccessToken(tp, 'alice');
        const subjectToken = (await managementRequest(api, { userId: 'bob' }, await m2mToken(tp))).body[
          'subjectToken'
        ] as string;
        await keep('a weak actor sign-in', exchangeRaw(tp, { subject_token: subjectToken, ...actorParams(weakActor) }));
        await keep('an unknown subject token', exchangeRaw(tp, { subject_token: 'ist_unknown' }));
        await keep(
          'the Management API resource for a client without the metadata',
          postForm(
            tp,
            '/token',
            { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
            {
              authorization: basic(CLIENTS.noScopeBackend),
            },
          ),
        );
        await keep(
          'the Management API without a token',
          fetch(`${api.base}/api/subject-tokens`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{"userId":"bob"}',
          }),
        );
        const admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
        await keep(
          'the revocation of an unknown session',
          fetch(`${api.base}${SESSIONS}/unknown`, { method: 'DELETE', headers: { authorization: `Bearer ${admin}` } }),
        );

        expect(refusals['a weak actor sign-in']!.status).to.equal(400);
        expect(JSON.parse(refusals['a weak actor sign-in']!.body)).to.include({
          error: 'insufficient_user_authentication',
          acr_values: ACR,
        });
        for (const [name, refusal] of Object.entries(refusals)) {
          expect(refusal.status, name).to.be.within(400, 499);
          expect(refusal.contentType, name).to.match(/^application\/json/);
          const body = JSON.parse(refusal.body) as Record<string, unknown>;
          expect(body['error'], name).to.be.a('string');
          expect(body['error_description'], name).to.be.a('string');
        }
        // The subject token the weak actor could not redeem is still good: a refusal burns nothing.
        const actor = await userAccessToken(tp, 'alice', { acr: ACR });
        expect(
          (await exchange(tp, { subject_token: subjectToken, resource: API, ...actorParams(actor) })).status,
        ).to.equal(200);
        refusalsByHost.set(host.title, refusals);
      });
    });
  }

  describe('a body parser ahead of the Management API', () => {
    const PARSERS: Array<{ title: string; build: BuildApp; apiOnHost?: boolean }> = [
      { title: 'express.json() ahead of the provider', build: (p, i) => runSnippet('express-json', p, i) },
      {
        title: 'express.json() ahead of managementApiHandler()',
        apiOnHost: true,
        build: async (provider, impersonation) => {
          impersonation.install(provider, { mountManagementApi: false });
          const app = express();
          app.use(express.json());
          app.use(impersonation.managementApiHandler());
          app.use('/oidc', provider.callback());
          return app;
        },
      },
      { title: '@koa/bodyparser ahead of koa-mount', build: (p, i) => runSnippet('koa-bodyparser', p, i) },
      {
        title: '@koa/bodyparser ahead of managementApi() on the parent',
        apiOnHost: true,
        build: async (provider, impersonation) => {
          impersonation.install(provider, { mountManagementApi: false });
          const app = new Koa();
          app.use(bodyParser());
          app.use(impersonation.managementApi());
          app.use(mount('/oidc', provider));
          return app;
        },
      },
    ];
    for (const parser of PARSERS) {
      describe(parser.title, () => {
        let running: Running;
        let backend: string;
        before(async () => {
          running = await hostWith(parser.build, parser.apiOnHost);
          backend = await m2mToken(running.tp);
        });
        after(() => running?.close());

        it('creates a subject token from the body the parser read', async () => {
          const created = await managementRequest(
            running.api,
            { userId: 'bob', context: { ticketId: 'T-1' } },
            backend,
          );
          expect(created.status, JSON.stringify(created.body)).to.equal(201);
        });

        it('applies the checks of a body it reads itself: an object, storable fields, the size limit', async () => {
          expectError(
            await managementRequest(running.api, [{ userId: 'bob' }], backend),
            400,
            'invalid_request',
            /^body must be a JSON object$/,
          );
          expectError(
            await managementRequest(running.api, { userId: 'bob', context: { note: '\ud800' } }, backend),
            400,
            'invalid_request',
            /^context holds text that cannot be stored/,
          );
          // Chunked, so that no Content-Length announces the size: the parsed body itself is measured.
          const padded = JSON.stringify({ userId: 'bob', padding: 'x'.repeat(10_000) });
          const response = await fetch(`${running.api.base}/api/subject-tokens`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${backend}` },
            body: new Blob([padded]).stream(),
            duplex: 'half',
          } as RequestInit);
          expect(response.status).to.equal(413);
          expect(await response.json()).to.deep.equal({
            error: 'request_too_large',
            error_description: 'body exceeds 6144 bytes',
          });
        });
      });
    }

    describe('a middleware that sets the body stream to text (req.setEncoding)', () => {
      let running: Running;
      before(async () => {
        running = await hostWith(async (provider, impersonation) => {
          impersonation.install(provider);
          const app = express();
          // On the Management API's requests only: oidc-provider's own body parser takes bytes.
          app.use((req, _res, next) => {
            if (req.url.includes('/api/')) req.setEncoding('utf8');
            next();
          });
          app.use('/oidc', provider.callback());
          return app;
        });
      });
      after(() => running?.close());

      it('reads the text as it reads bytes, and still refuses a body past the limit in bytes', async () => {
        const backend = await m2mToken(running.tp);
        const created = await managementRequest(running.api, { userId: 'bob', context: { ticketId: 'T-é' } }, backend);
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        const padded = JSON.stringify({ userId: 'bob', padding: 'é'.repeat(5_000) });
        const response = await fetch(`${running.api.base}/api/subject-tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${backend}` },
          body: new Blob([padded]).stream(),
          duplex: 'half',
        } as RequestInit);
        expect(response.status).to.equal(413);
      });
    });

    describe('a middleware that reads the body and leaves no parsed one', () => {
      let running: Running;
      const reported: unknown[] = [];
      before(async () => {
        running = await hostWith(async (provider, impersonation) => {
          impersonation.install(provider);
          (provider as unknown as EventEmitter).on('error', (error: unknown) => reported.push(error));
          const app = express();
          // Reads JSON bodies (as a signature check might) and keeps nothing of them.
          app.use((req, _res, next) => {
            if (!req.is('application/json')) return next();
            req.on('end', () => next()).resume();
          });
          app.use('/oidc', provider.callback());
          return app;
        });
      });
      after(() => running?.close());

      it('answers 500 server_error saying what to configure, not that the body is not JSON', async () => {
        const refused = await managementRequest(running.api, { userId: 'bob' }, await m2mToken(running.tp));
        expectError(
          refused,
          500,
          'server_error',
          /^the request body was read before the Management API.*express\.json\(\) or @koa\/bodyparser/,
        );
        // The operator's log has it too.
        expect(reported.map(String)).to.include(`ManagementError: ${refused.body['error_description'] as string}`);
      });
    });
  });

  describe('koa-mount in a parent Koa app, install() after mounting, the Management API left to install()', () => {
    let running: Running;
    before(async () => {
      running = await hostWith(async (provider, impersonation) => {
        const app = new Koa();
        app.use(mount('/oidc', provider));
        impersonation.install(provider);
        return app;
      });
    });
    after(() => running?.close());

    it('keeps the management scopes out of discovery', async () => {
      const discovery = (await (await fetch(`${running.tp.base}/.well-known/openid-configuration`)).json()) as {
        scopes_supported: string[];
      };
      expect(discovery.scopes_supported).to.not.include.any.members(MANAGEMENT_SCOPES);
    });

    it("refuses the Management API's token and every exchange, saying what to change", async () => {
      const m2m = await tokenRequest(
        running.tp,
        { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
        CLIENTS.backend,
      );
      const exchanged = await exchange(running.tp, { subject_token: 'ist_anything', resource: API });
      for (const refused of [m2m, exchanged]) {
        expectError(
          refused,
          500,
          'server_error',
          /install\(\) right after new Provider\(\).*mountManagementApi: false/,
        );
      }
    });
  });

  describe("Express, install() after app.use('/oidc', provider.callback())", () => {
    it('throws from install(), saying what to change', async () => {
      let thrown: unknown;
      const running = await hostWith(async (provider, impersonation) => {
        const app = express();
        app.use('/oidc', provider.callback());
        try {
          impersonation.install(provider);
        } catch (error) {
          thrown = error;
          impersonation.install(provider, { mountManagementApi: false });
        }
        return app;
      });
      await running.close();
      expect(String(thrown)).to.match(/TypeError: impersonation.install\(\) ran after.*mountManagementApi: false/);
    });

    it('refuses the Management API and every exchange when the provider had an error listener first, unless what install() added is served', async () => {
      const running = await hostWith(async (provider, impersonation) => {
        // Koa's callback() adds its own error listener only when there is none: install() cannot tell.
        (provider as unknown as EventEmitter).on('error', () => {});
        const app = express();
        app.use('/oidc', provider.callback());
        impersonation.install(provider);
        return app;
      });
      try {
        // A koa-compose that reads its middleware array at each request serves what install() added late.
        const served = (await fetch(`${running.api.base}/api/subject-tokens`, { method: 'POST' })).status !== 404;
        const m2m = await tokenRequest(
          running.tp,
          { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
          CLIENTS.backend,
        );
        if (served) {
          expect(m2m.status, JSON.stringify(m2m.body)).to.equal(200);
          return;
        }
        expectError(m2m, 500, 'server_error', /install\(\) right after new Provider\(\)/);
        const exchanged = await exchange(running.tp, { subject_token: 'ist_anything', resource: API });
        expectError(exchanged, 500, 'server_error', /install\(\) right after new Provider\(\)/);
      } finally {
        await running.close();
      }
    });
  });

  describe('managementApiHandler() as the whole of a node:http server', () => {
    it('serves the Management API and answers 404 to anything else', async () => {
      const apiServer = createServer();
      const running = await hostWith(async (provider, impersonation) => {
        impersonation.install(provider, { mountManagementApi: false });
        apiServer.on('request', impersonation.managementApiHandler());
        const app = express();
        app.use('/oidc', provider.callback());
        return app;
      });
      await new Promise<void>((resolve) => apiServer.listen(0, '127.0.0.1', resolve));
      try {
        const api = { ...running.tp, base: `http://127.0.0.1:${(apiServer.address() as AddressInfo).port}` };
        expect((await managementRequest(api, { userId: 'bob' }, await m2mToken(running.tp))).status).to.equal(201);
        const elsewhere = await fetch(`${api.base}/elsewhere`);
        expect(elsewhere.status).to.equal(404);
        await elsewhere.arrayBuffer();
      } finally {
        apiServer.closeAllConnections();
        await new Promise((resolve) => apiServer.close(resolve));
        await running.close();
      }
    });
  });

  describe('Express, managementApiHandler() when the API fails', () => {
    let running: Running;
    const failure = new Error('the caller check cannot answer');
    const reported: unknown[] = [];
    before(async () => {
      running = await hostWith(
        (provider, impersonation) => {
          // A deployment's own listener, there before the host composes the provider.
          (provider as unknown as EventEmitter).on('error', (error: unknown) => reported.push(error));
          return runSnippet('express-api', provider, impersonation);
        },
        true,
        {
          authenticateManagementRequest: () => {
            throw failure;
          },
        },
      );
    });
    after(() => running?.close());

    it("answers 503 temporarily_unavailable and hands the failure to the provider's error listeners", async () => {
      const refused = await managementRequest(running.api, { userId: 'bob' }, 'any-token');
      expect(refused.status).to.equal(503);
      expect(refused.body).to.deep.equal({
        error: 'temporarily_unavailable',
        error_description: 'the identity service cannot reach its store; retry shortly',
      });
      expect(reported).to.include(failure);
    });
  });

  describe('across hosts', () => {
    it('every refusal carries the same status and body on every host', () => {
      expect([...refusalsByHost.keys()]).to.deep.equal(HOSTS.map((host) => host.title));
      const [first, ...others] = [...refusalsByHost.values()];
      expect(Object.keys(first!)).to.have.length(5);
      for (const [index, refusals] of others.entries()) {
        expect(refusals, HOSTS[index + 1]!.title).to.deep.equal(first);
      }
    });
  });
});

interface Running {
  /** The provider: its issuer, and the base URL of its endpoints (issuer's). */
  tp: TestProvider;
  /** The host's origin (the provider's own, for the provider served on its own). */
  origin: string;
  /** Where the Management API is: the provider's base, or the host's origin. */
  api: TestProvider;
  close(): Promise<void>;
}

type BuildApp = (provider: Provider, impersonation: Impersonation) => Promise<unknown>;

async function startHost(host: Host): Promise<Running> {
  const snippet = host.snippet;
  if (!snippet) {
    const tp = await startProvider({ plugin: PLUGIN });
    return { tp, origin: tp.base, api: tp, close: tp.close };
  }
  return hostWith((provider, impersonation) => runSnippet(snippet, provider, impersonation), host.apiOnHost);
}

const PLUGIN = { actorAuthentication: { acrValues: [ACR] } };

/** A provider below /oidc of the app `build` returns, served on a port of its own. */
async function hostWith(
  build: BuildApp,
  apiOnHost = false,
  plugin: Partial<ImpersonationOptions> = PLUGIN,
): Promise<Running> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let served: Served | undefined;
  const tp = await startProvider({
    issuer: `${origin}/oidc`,
    plugin,
    mount: async (provider, _install, impersonation) => {
      served = await serve(await build(provider, impersonation));
    },
  });
  server.on('request', served!.listener);
  const close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await served!.close();
    await tp.close();
  };
  const provider = { ...tp, base: tp.issuer, close };
  return { tp: provider, origin, api: apiOnHost ? { ...provider, base: origin } : provider, close };
}

const DOCS = new URL('../../../docs/adding-to-your-deployment.md', import.meta.url);

/** The code block after `<!-- host: name -->` in the docs. */
function snippetOf(name: string): string {
  const docs = readFileSync(DOCS, 'utf8');
  const match = new RegExp(`<!-- host: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(docs);
  if (!match) throw new Error(`docs/adding-to-your-deployment.md has no block <!-- host: ${name} -->`);
  return match[1]!;
}

type SnippetFunction = (...args: unknown[]) => Promise<unknown>;
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...args: string[]) => SnippetFunction;

/**
 * Runs a docs block as written, `provider` and `impersonation` in scope, its
 * default imports resolved from this package's node_modules; returns its `app`.
 */
async function runSnippet(name: string, provider: Provider, impersonation: Impersonation): Promise<unknown> {
  const code = snippetOf(name);
  const imports: Array<{ binding: string; specifier: string }> = [];
  const body = code.replace(/^import .*$/gm, (line) => {
    const match = /^import (\w+) from '([^']+)';$/.exec(line);
    if (!match) throw new Error(`the host block ${name} has an import the test cannot run: ${line}`);
    imports.push({ binding: match[1]!, specifier: match[2]! });
    return '';
  });
  const modules = await Promise.all(
    imports.map(async ({ specifier }) => ((await import(specifier)) as { default: unknown }).default),
  );
  const run = new AsyncFunction(
    'provider',
    'impersonation',
    ...imports.map(({ binding }) => binding),
    `${body}\nreturn app;`,
  );
  return run(provider, impersonation, ...modules);
}

interface Served {
  listener: RequestListener;
  close(): Promise<void>;
}

interface FastifyLike {
  ready(): Promise<unknown>;
  routing: RequestListener;
  get(path: string, handler: () => Promise<string>): unknown;
  close(): Promise<unknown>;
}

/** A route of the host's own, after what the docs block mounted: it must answer as if the plugin were not there. */
const HOST_ROUTE = '/host-route';

/** Serves `app` as its own listen() would: Koa's callback(), Express itself, Fastify's routing once ready. */
async function serve(app: unknown): Promise<Served> {
  if (app instanceof Koa) {
    app.use(async (ctx, next) => {
      if (ctx.path !== HOST_ROUTE) return next();
      ctx.body = 'host';
    });
    return { listener: app.callback(), close: async () => {} };
  }
  const fastify = app as Partial<FastifyLike>;
  if (typeof fastify.ready === 'function' && typeof fastify.routing === 'function') {
    fastify.get!(HOST_ROUTE, async () => 'host');
    await fastify.ready();
    return { listener: fastify.routing, close: async () => void (await fastify.close!()) };
  }
  if (typeof app === 'function' && 'get' in app) {
    const express = app as Express;
    express.get(HOST_ROUTE, (_req, res) => {
      res.send('host');
    });
    return { listener: express, close: async () => {} };
  }
  throw new Error('the host block built no app this test can serve');
}

function postForm(
  tp: TestProvider,
  path: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${tp.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params),
  });
}

/** A token exchange by the public console, its raw response kept. */
function exchangeRaw(tp: TestProvider, params: Record<string, string>): Promise<Response> {
  return postForm(tp, '/token', {
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
    subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    resource: API,
    client_id: CLIENTS.console.client_id,
    ...params,
  });
}
