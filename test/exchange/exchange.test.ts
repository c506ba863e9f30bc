import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { createMemoryAdapter, EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { providerJwks } from '../../lib/provider-internals.js';
import { DpopKey } from '../support/dpop.js';
import {
  ACCESS_TOKEN,
  ACTOR_API,
  API,
  CLIENT_CERT_HEADER,
  CLIENTS,
  MANAGEMENT,
  OPAQUE_API,
  SHORT_API,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  actorParams,
  decodeHeader,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  m2mToken,
  subjectToken,
  userAccessToken,
} from '../support/http.js';

describe('token exchange grant', () => {
  let tp: TestProvider;
  let alice: string;
  before(async () => {
    tp = await startProvider({
      plugin: {
        canExchange: ({ scope, subject }) => {
          if (subject === 'carol') return false;
          return scope.includes('profile:write') ? { reason: 'profile:write needs a second approver' } : true;
        },
      },
    });
    alice = await userAccessToken(tp, 'alice');
  });
  after(() => tp.close());

  describe('the happy path', () => {
    it('issues a JWT access token for the subject, bound to the resource, with act naming the actor', async () => {
      const subject = await subjectToken(tp, { userId: 'bob', context: { ticketId: 'T-1' } });
      const result = await exchange(tp, {
        subject_token: subject,
        resource: API,
        scope: 'profile:read',
        ...actorParams(alice),
      });
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(result.headers.get('cache-control')).to.equal('no-store');
      expect(Object.keys(result.body).sort()).to.deep.equal([
        'access_token',
        'expires_in',
        'issued_token_type',
        'scope',
        'token_type',
      ]);
      expect(result.body).to.include({ issued_token_type: ACCESS_TOKEN, token_type: 'Bearer', scope: 'profile:read' });

      const accessToken = result.body['access_token'] as string;
      const { payload, protectedHeader } = await jwtVerify(
        accessToken,
        createLocalJWKSet(providerJwks(tp.provider) as never),
        {
          issuer: tp.issuer,
          audience: API,
          typ: 'at+jwt',
        },
      );
      expect(protectedHeader.alg).to.not.equal('none');
      expect(payload).to.include({
        sub: 'bob',
        aud: API,
        iss: tp.issuer,
        client_id: CLIENTS.console.client_id,
        scope: 'profile:read',
      });
      expect(payload.act).to.deep.equal({ sub: 'alice' });
      expect(payload.jti).to.be.a('string');
      expect(payload.exp! - payload.iat!).to.equal(result.body['expires_in']);
    });

    it('has no act claim without an actor token', async () => {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        scope: 'profile:read',
      });
      expect(result.status).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)).to.not.have.property('act');
    });

    it('accepts requested_token_type access_token', async () => {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        scope: 'profile:read',
        requested_token_type: ACCESS_TOKEN,
      });
      expect(result.status).to.equal(200);
    });

    it('caps the lifetime at accessTokenTTL (900 s) when the resource server allows more (3600 s)', async () => {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        scope: 'profile:read',
      });
      expect(result.body['expires_in']).to.equal(900);
    });

    it("keeps the resource server's lifetime when it is lower than the cap, and its opaque format", async () => {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: OPAQUE_API,
        scope: 'read',
        ...actorParams(alice),
      });
      expect(result.status).to.equal(200);
      expect(result.body['expires_in']).to.equal(120);
      const accessToken = result.body['access_token'] as string;
      expect(accessToken.split('.')).to.have.length(1);

      const introspection = await introspect(tp, accessToken);
      expect(introspection).to.include({
        active: true,
        sub: 'bob',
        aud: OPAQUE_API,
        scope: 'read',
        client_id: CLIENTS.console.client_id,
      });
      expect(introspection['act']).to.deep.equal({ sub: 'alice' });
    });

    it('grants no scope when none is asked for, and says so with an empty scope', async () => {
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
      expect(result.status).to.equal(200);
      expect(result.body['scope']).to.equal('');
      expect(decodeJwt(result.body['access_token'] as string)).to.not.have.property('scope');
    });
  });

  describe('client authentication (spec 5)', () => {
    it('lets a confidential client authenticate with client_secret_basic', async () => {
      const result = await exchange(
        tp,
        { subject_token: await subjectToken(tp), resource: API, scope: 'profile:read' },
        CLIENTS.web,
      );
      expect(result.status).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)['client_id']).to.equal(CLIENTS.web.client_id);
    });

    it('answers 401 invalid_client to a confidential client without the Authorization header, and keeps the token', async () => {
      const subject = await subjectToken(tp);
      const result = await exchange(
        tp,
        { subject_token: subject, resource: API },
        { client_id: CLIENTS.web.client_id },
      );
      expectError(result, 401, 'invalid_client');
      const wrongSecret = await exchange(
        tp,
        { subject_token: subject, resource: API },
        { ...CLIENTS.web, client_secret: 'wrong' },
      );
      expectError(wrongSecret, 401, 'invalid_client');
      expect((await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.web)).status).to.equal(200);
    });

    it('answers 401 invalid_client to an unknown client', async () => {
      const result = await exchange(
        tp,
        { subject_token: await subjectToken(tp), resource: API },
        { client_id: 'nobody' },
      );
      expectError(result, 401, 'invalid_client');
    });

    it('refuses a client whose grant_types do not list token exchange', async () => {
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.notAllowed);
      expectError(result, 400, 'invalid_request', /grant type is not allowed/);
    });

    it('advertises the grant in discovery', async () => {
      const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as Record<
        string,
        string[]
      >;
      expect(discovery['grant_types_supported']).to.include('urn:ietf:params:oauth:grant-type:token-exchange');
    });
  });

  describe('request parameters (RFC 8693 2.1)', () => {
    const cases: Array<[string, Record<string, string | undefined>, RegExp]> = [
      ['a missing subject_token', { subject_token: undefined }, /subject_token/],
      ['a missing subject_token_type', { subject_token_type: undefined }, /subject_token_type/],
      [
        'a jwt subject_token_type',
        { subject_token_type: 'urn:ietf:params:oauth:token-type:jwt' },
        /subject_token_type/,
      ],
      [
        'an id_token subject_token_type',
        { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
        /subject_token_type/,
      ],
      ['actor_token without actor_token_type', { actor_token: 'x' }, /actor_token_type is required/],
      ['actor_token_type without actor_token', { actor_token_type: ACCESS_TOKEN }, /without actor_token/],
      [
        'an unsupported actor_token_type',
        { actor_token: 'x', actor_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
        /actor_token_type/,
      ],
      [
        'requested_token_type refresh_token',
        { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
        /requested_token_type/,
      ],
      [
        'requested_token_type id_token',
        { requested_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
        /requested_token_type/,
      ],
    ];
    for (const [name, params, description] of cases) {
      it(`answers invalid_request to ${name}, and keeps the subject token`, async () => {
        const subject = await subjectToken(tp);
        const result = await exchange(tp, { subject_token: subject, resource: API, ...params });
        expectError(result, 400, 'invalid_request', description);
        expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
      });
    }

    it('refuses the audience parameter with a clear invalid_target, instead of ignoring it', async () => {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        audience: 'https://other.example.com',
      });
      expectError(result, 400, 'invalid_target', /audience parameter is not supported/);
    });
  });

  describe('the subject token (RFC 8693 2.2.2: invalid_request for any reason)', () => {
    it('refuses an unknown subject token', async () => {
      for (const value of ['ist_' + 'A'.repeat(43), 'nonsense', 'ist_short']) {
        const result = await exchange(tp, { subject_token: value, resource: API });
        expectError(result, 400, 'invalid_request', /subject_token is unknown/);
      }
    });

    it('refuses an access token as a subject token: only subject tokens from the Management API count', async () => {
      const result = await exchange(tp, { subject_token: alice, resource: API });
      expectError(result, 400, 'invalid_request', /subject_token is unknown/);
    });

    it('is single-use: the second exchange is told it was already used', async () => {
      const subject = await subjectToken(tp);
      expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
      const again = await exchange(tp, { subject_token: subject, resource: API });
      expectError(again, 400, 'invalid_request', /already used/);
    });

    it('refuses an expired subject token', async () => {
      const short = await startProvider({ plugin: { subjectTokenTTL: 1 } });
      try {
        const subject = await subjectToken(short);
        await new Promise((resolve) => setTimeout(resolve, 2100));
        const result = await exchange(short, { subject_token: subject, resource: API });
        expectError(result, 400, 'invalid_request', /expired/);
      } finally {
        await short.close();
      }
    });

    it('refuses what canExchange refuses, with its reason, and keeps the token for an allowed request', async () => {
      const subject = await subjectToken(tp);
      const refused = await exchange(tp, { subject_token: subject, resource: API, scope: 'profile:write' });
      expectError(refused, 400, 'invalid_request', /second approver/);
      expect((await exchange(tp, { subject_token: subject, resource: API, scope: 'profile:read' })).status).to.equal(
        200,
      );
      const carol = await exchange(tp, { subject_token: await subjectToken(tp, { userId: 'carol' }), resource: API });
      expectError(carol, 400, 'invalid_request', /exchange policy refused/);
    });

    it('enforces a client binding made at creation', async () => {
      const subject = await subjectToken(tp, { userId: 'bob', clientId: CLIENTS.web.client_id });
      expectError(
        await exchange(tp, { subject_token: subject, resource: API }),
        400,
        'invalid_request',
        /another client/,
      );
      expect((await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.web)).status).to.equal(200);
    });

    it('enforces an actor binding made at creation', async () => {
      const subject = await subjectToken(tp, { userId: 'bob', actorId: 'alice' });
      expectError(
        await exchange(tp, { subject_token: subject, resource: API }),
        400,
        'invalid_request',
        /bound to an actor/,
      );
      const carolToken = await userAccessToken(tp, 'carol');
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(carolToken) }),
        400,
        'invalid_request',
        /not from the actor/,
      );
      const result = await exchange(tp, { subject_token: subject, resource: API, ...actorParams(alice) });
      expect(result.status).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)['act']).to.deep.equal({ sub: 'alice' });
    });
  });

  describe('resource (RFC 8707)', () => {
    const cases: Array<[string, string | string[] | undefined, RegExp]> = [
      ['no resource', undefined, /exactly one resource/],
      ['two resources', [API, OPAQUE_API], /exactly one resource/],
      ['an unknown resource', 'https://unknown.example.com', /./],
      ['a relative resource', 'api.example.com/path', /absolute URI/],
      ['a resource with a fragment', `${API}#part`, /fragment/],
      ['the Management API itself', MANAGEMENT, /Management API/],
    ];
    for (const [name, resource, description] of cases) {
      it(`answers invalid_target to ${name}, and keeps the subject token`, async () => {
        const subject = await subjectToken(tp);
        expectError(await exchange(tp, { subject_token: subject, resource }), 400, 'invalid_target', description);
        expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
      });
    }
  });

  describe('scope', () => {
    const cases: Array<[string, string]> = [
      ['a scope the resource server does not define', 'profile:read admin'],
      ['openid, which belongs to no resource server here', 'openid profile:read'],
      ['a scope of another resource server', 'read'],
    ];
    for (const [name, scope] of cases) {
      it(`answers invalid_scope to ${name}, and keeps the subject token`, async () => {
        const subject = await subjectToken(tp);
        expectError(
          await exchange(tp, { subject_token: subject, resource: API, scope }),
          400,
          'invalid_scope',
          /not defined by the resource server/,
        );
        expect((await exchange(tp, { subject_token: subject, resource: API, scope: 'profile:read' })).status).to.equal(
          200,
        );
      });
    }

    it('never honours offline_access and never returns a refresh token', async () => {
      const subject = await subjectToken(tp);
      const refused = await exchange(tp, {
        subject_token: subject,
        resource: API,
        scope: 'profile:read offline_access',
      });
      expectError(refused, 400, 'invalid_scope', /offline_access/);
      const result = await exchange(
        tp,
        { subject_token: subject, resource: API, scope: 'profile:read profile:write' },
        CLIENTS.console,
      );
      expect(result.body).to.not.have.property('refresh_token');
      expect(result.body).to.not.have.property('id_token');
    });
  });

  describe('actor token', () => {
    it('accepts a JWT actor token with openid in its scope set', async () => {
      const jwtActor = await userAccessToken(tp, 'alice', { scope: 'openid profile:read', resource: ACTOR_API });
      expect(decodeHeader(jwtActor)['typ']).to.equal('at+jwt');
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        ...actorParams(jwtActor),
      });
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)['act']).to.deep.equal({ sub: 'alice' });
    });

    it('refuses an actor token without openid, and keeps the subject token', async () => {
      const noOpenid = await userAccessToken(tp, 'alice', { scope: 'profile:read', resource: ACTOR_API });
      const subject = await subjectToken(tp);
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(noOpenid) }),
        400,
        'invalid_request',
        /openid/,
      );
      expect((await exchange(tp, { subject_token: subject, resource: API, ...actorParams(alice) })).status).to.equal(
        200,
      );
    });

    it('tests openid as a set member, not a substring (openidx is not openid)', async () => {
      const lookalike = await userAccessToken(tp, 'alice', { scope: 'openidx profile:read', resource: ACTOR_API });
      expect(String(decodeJwt(lookalike)['scope'])).to.include('openidx');
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        ...actorParams(lookalike),
      });
      expectError(result, 400, 'invalid_request', /openid/);
    });

    it('refuses an invalid, tampered, foreign or client-credentials actor token', async () => {
      const other = await startProvider();
      try {
        const foreign = await userAccessToken(other, 'alice', { scope: 'openid profile:read', resource: ACTOR_API });
        const jwtActor = await userAccessToken(tp, 'alice', { scope: 'openid profile:read', resource: ACTOR_API });
        const [header, payload, signature] = jwtActor.split('.');
        const claims = decodeJwt(jwtActor);
        const tampered = [
          header,
          Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url'),
          signature,
        ].join('.');
        const machine = await m2mToken(tp);
        for (const [name, value] of [
          ['garbage', 'garbage'],
          ['tampered', tampered],
          ['foreign', foreign],
          ['m2m', machine],
          ['payload only', payload!],
        ] as const) {
          const result = await exchange(tp, {
            subject_token: await subjectToken(tp),
            resource: API,
            ...actorParams(value),
          });
          expect(result.status, name).to.equal(400);
          expect(result.body['error'], name).to.equal('invalid_request');
          expect(result.body['error_description'], name).to.match(/actor_token/);
        }
      } finally {
        await other.close();
      }
    });

    it('refuses a JWT actor token once it expires, though it was accepted (and its signature check remembered) before', async () => {
      const shortLived = await userAccessToken(tp, 'alice', { scope: 'openid', resource: SHORT_API });
      const first = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        ...actorParams(shortLived),
      });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      await new Promise((resolve) =>
        setTimeout(resolve, ((decodeJwt(shortLived)['exp'] as number) + 1) * 1000 - Date.now()),
      );
      const again = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        ...actorParams(shortLived),
      });
      expectError(again, 400, 'invalid_request', /actor_token/);
    });

    it('refuses a revoked actor token', async () => {
      const revoked = await userAccessToken(tp, 'alice');
      const revocation = await fetch(`${tp.base}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: revoked, client_id: CLIENTS.console.client_id }),
      });
      expect(revocation.status).to.equal(200);
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        ...actorParams(revoked),
      });
      expectError(result, 400, 'invalid_request', /actor_token/);
    });

    it("refuses an opaque actor token once its user's session ended, though it was accepted before", async () => {
      const actor = await userAccessToken(tp, 'alice');
      const first = await exchange(tp, { subject_token: await subjectToken(tp), resource: API, ...actorParams(actor) });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);

      // What a logout does to the session, through oidc-provider's own models.
      const stored = await tp.provider.AccessToken.find(actor);
      const session = await tp.provider.Session.findByUid(stored!.sessionUid!);
      expect(session, 'the actor token is bound to a live session').to.not.equal(undefined);
      await session!.destroy();

      const subject = await subjectToken(tp);
      const again = await exchange(tp, { subject_token: subject, resource: API, ...actorParams(actor) });
      expectError(again, 400, 'invalid_request', /actor_token/);
      const unspent = await exchange(tp, { subject_token: subject, resource: API });
      expect(unspent.status, 'the refused exchange kept the subject token').to.equal(200);
    });

    it('nests an act the actor token already carries (RFC 8693 4.1), never dropping it', async () => {
      // carol acts for dave... here: alice impersonates bob on a resource that grants openid,
      // and that impersonation token then acts as the actor of a second exchange for carol's ticket.
      const first = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: ACTOR_API,
        scope: 'openid',
        ...actorParams(alice),
      });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      const bobActingForAlice = first.body['access_token'] as string;
      const second = await exchange(tp, {
        subject_token: await subjectToken(tp, { userId: 'admin' }),
        resource: API,
        ...actorParams(bobActingForAlice),
      });
      expect(second.status, JSON.stringify(second.body)).to.equal(200);
      expect(decodeJwt(second.body['access_token'] as string)['act']).to.deep.equal({
        sub: 'bob',
        act: { sub: 'alice' },
      });
    });
  });

  describe('sender constraints', () => {
    it('binds the token to a DPoP key: token_type DPoP and cnf.jkt', async () => {
      const key = await DpopKey.generate();
      const result = await exchange(
        tp,
        { subject_token: await subjectToken(tp), resource: API, scope: 'profile:read' },
        CLIENTS.console,
        {
          dpop: await key.proof(`${tp.base}/token`),
        },
      );
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(result.body['token_type']).to.equal('DPoP');
      expect(decodeJwt(result.body['access_token'] as string)['cnf']).to.deep.equal({ jkt: key.thumbprint });
    });

    it('refuses a replayed DPoP proof, and keeps the subject token', async () => {
      const key = await DpopKey.generate();
      const proof = await key.proof(`${tp.base}/token`);
      expect(
        (await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, { dpop: proof }))
          .status,
      ).to.equal(200);
      const subject = await subjectToken(tp);
      const replay = await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, { dpop: proof });
      expectError(replay, 400, 'invalid_dpop_proof', /Replay/);
      expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
    });

    it('accepts a DPoP-bound actor token only with a proof of the same key', async () => {
      const key = await DpopKey.generate();
      const bound = await userAccessToken(tp, 'alice', { headers: { dpop: await key.proof(`${tp.base}/token`) } });
      const subject = await subjectToken(tp);
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(bound) }),
        400,
        'invalid_request',
        /DPoP-bound/,
      );
      const otherKey = await DpopKey.generate();
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(bound) }, CLIENTS.console, {
          dpop: await otherKey.proof(`${tp.base}/token`),
        }),
        400,
        'invalid_request',
        /DPoP-bound/,
      );
      const result = await exchange(
        tp,
        { subject_token: subject, resource: API, ...actorParams(bound) },
        CLIENTS.console,
        {
          dpop: await key.proof(`${tp.base}/token`),
        },
      );
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
    });
  });

  describe('mutual TLS', () => {
    const pem = readFileSync(new URL('../../../test/fixtures/client-cert.pem', import.meta.url), 'utf8');
    const thumbprint = createHash('sha256').update(new X509Certificate(pem).raw).digest('base64url');

    it('binds the token to the client certificate: cnf.x5t#S256', async () => {
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.mtls, {
        [CLIENT_CERT_HEADER]: encodeURIComponent(pem),
      });
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)['cnf']).to.deep.equal({ 'x5t#S256': thumbprint });
    });

    it('refuses a certificate-bound client without its certificate, and keeps the subject token', async () => {
      const subject = await subjectToken(tp);
      expectError(
        await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.mtls),
        400,
        'invalid_request',
        /certificate/,
      );
      const result = await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.mtls, {
        [CLIENT_CERT_HEADER]: encodeURIComponent(pem),
      });
      expect(result.status).to.equal(200);
    });

    it('accepts a certificate-bound actor token only over the same certificate', async () => {
      const bound = await userAccessToken(tp, 'alice', {
        client: CLIENTS.mtls,
        headers: { [CLIENT_CERT_HEADER]: encodeURIComponent(pem) },
      });
      const subject = await subjectToken(tp);
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(bound) }),
        400,
        'invalid_request',
        /certificate-bound/,
      );
      const result = await exchange(
        tp,
        { subject_token: subject, resource: API, ...actorParams(bound) },
        CLIENTS.mtls,
        {
          [CLIENT_CERT_HEADER]: encodeURIComponent(pem),
        },
      );
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(decodeJwt(result.body['access_token'] as string)['act']).to.deep.equal({ sub: 'alice' });
    });
  });

  describe('audit events', () => {
    it('emits impersonation.exchange.succeeded with actor, subject, client, resource, scope, context and ids, never a token', async () => {
      const events: ImpersonationEvent[] = [];
      const stop = onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, (event) => events.push(event));
      try {
        const subject = await subjectToken(tp, { userId: 'bob', context: { ticketId: 'T-7', reason: 'billing' } });
        const result = await exchange(tp, {
          subject_token: subject,
          resource: API,
          scope: 'profile:read',
          ...actorParams(alice),
        });
        expect(events).to.have.length(1);
        const [event] = events;
        expect(event).to.include({
          subject: 'bob',
          actor: 'alice',
          clientId: CLIENTS.console.client_id,
          resource: API,
          scope: 'profile:read',
          createdBy: CLIENTS.backend.client_id,
          accessTokenId: decodeJwt(result.body['access_token'] as string)['jti'],
        });
        expect(event!.context).to.deep.equal({ ticketId: 'T-7', reason: 'billing' });
        expect(event!.subjectTokenId).to.match(/^stid_/);
        const serialized = JSON.stringify(event);
        for (const secret of [subject, alice, result.body['access_token'] as string])
          expect(serialized).to.not.include(secret);
      } finally {
        stop();
      }
    });

    it('emits impersonation.exchange.refused with the reason', async () => {
      const events: ImpersonationEvent[] = [];
      const stop = onImpersonationEvent(tp.provider, EVENTS.exchangeRefused, (event) => events.push(event));
      try {
        const subject = await subjectToken(tp, { userId: 'bob', context: { ticketId: 'T-8' } });
        await exchange(tp, { subject_token: subject, resource: API, scope: 'profile:write', ...actorParams(alice) });
        expect(events).to.have.length(1);
        expect(events[0]).to.include({
          subject: 'bob',
          actor: 'alice',
          clientId: CLIENTS.console.client_id,
          resource: API,
          error: 'invalid_request',
          reason: 'profile:write needs a second approver',
        });
        expect(JSON.stringify(events[0])).to.not.include(subject);
      } finally {
        stop();
      }
    });

    it('never reports an exchange as refused because a listener of its success threw', async () => {
      const refused: ImpersonationEvent[] = [];
      const stopRefused = onImpersonationEvent(tp.provider, EVENTS.exchangeRefused, (event) => refused.push(event));
      const stopThrowing = onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, () => {
        throw new Error('audit sink down');
      });
      try {
        await exchange(tp, {
          subject_token: await subjectToken(tp),
          resource: API,
          scope: 'profile:read',
          ...actorParams(alice),
        });
        expect(refused).to.deep.equal([]);
      } finally {
        stopThrowing();
        stopRefused();
      }
    });
  });

  describe('single use under concurrency', () => {
    it('lets exactly one of 25 concurrent redemptions of one token succeed', async () => {
      const subject = await subjectToken(tp);
      const results = await Promise.all(
        Array.from({ length: 25 }, () =>
          exchange(tp, { subject_token: subject, resource: API, ...actorParams(alice) }),
        ),
      );
      const ok = results.filter((result) => result.status === 200);
      const refused = results.filter((result) => result.status === 400 && result.body['error'] === 'invalid_request');
      expect(ok).to.have.length(1);
      expect(refused).to.have.length(24);
      for (const result of refused) expect(result.body['error_description']).to.match(/already used/);
    });

    it("destroys the opaque token a losing racer saved, so only the winner's token is live", async () => {
      const saved: string[] = [];
      const destroyed: string[] = [];
      const onSaved = (token: { jti: string; gty?: string }) => {
        if (token.gty === 'urn:ietf:params:oauth:grant-type:token-exchange') saved.push(token.jti);
      };
      const onDestroyed = (token: { jti: string }) => {
        destroyed.push(token.jti);
      };
      tp.provider.on('access_token.saved', onSaved as never);
      tp.provider.on('access_token.destroyed', onDestroyed as never);
      try {
        const subject = await subjectToken(tp);
        const results = await Promise.all(
          Array.from({ length: 10 }, () =>
            exchange(tp, { subject_token: subject, resource: OPAQUE_API, scope: 'read' }),
          ),
        );
        const winners = results.filter((result) => result.status === 200);
        expect(winners).to.have.length(1);
        const winner = winners[0]!.body['access_token'] as string;
        expect(saved).to.include(winner);
        const losers = saved.filter((jti) => jti !== winner);
        expect([...destroyed].sort()).to.deep.equal([...losers].sort());
        for (const jti of losers) expect((await introspect(tp, jti))['active']).to.equal(false);
        expect((await introspect(tp, winner))['active']).to.equal(true);
      } finally {
        tp.provider.off('access_token.saved', onSaved as never);
        tp.provider.off('access_token.destroyed', onDestroyed as never);
      }
    });
  });
});

describe('token exchange grant: the store fails while the actor token is looked up', () => {
  // The real memory adapter underneath; only reads of access tokens fail, on demand.
  let failAccessTokenReads = false;
  const Memory = createMemoryAdapter();
  class AccessTokenReadsFail extends Memory {
    readonly #model: string;
    constructor(model: string) {
      super(model);
      this.#model = model;
    }
    override async find(id: string) {
      if (failAccessTokenReads && this.#model === 'AccessToken') throw new Error('store unreachable');
      return super.find(id);
    }
  }
  let tp: TestProvider;
  let alice: string;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };
  before(async () => {
    tp = await startProvider({ adapter: AccessTokenReadsFail });
    alice = await userAccessToken(tp, 'alice');
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    failAccessTokenReads = false;
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await tp.close();
  });

  it('answers 500 server_error, issues nothing and keeps the subject token', async () => {
    const subject = await subjectToken(tp);
    failAccessTokenReads = true;
    const failed = await exchange(tp, {
      subject_token: subject,
      resource: API,
      scope: 'profile:read',
      ...actorParams(alice),
    });
    expectError(failed, 500, 'server_error');
    expect(failed.body).to.not.have.property('access_token');

    failAccessTokenReads = false;
    const redeemed = await exchange(tp, {
      subject_token: subject,
      resource: API,
      scope: 'profile:read',
      ...actorParams(alice),
    });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
  });

  it('still refuses a bad subject token first, and leaves no rejection unhandled', async () => {
    failAccessTokenReads = true;
    const unknown = await exchange(tp, {
      subject_token: `ist_${'B'.repeat(43)}`,
      resource: API,
      ...actorParams(alice),
    });
    expectError(unknown, 400, 'invalid_request', /subject_token is unknown/);
    // An unhandled rejection is reported after the microtask queue drains.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(unhandled).to.deep.equal([]);
  });
});
