import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import * as grants from 'oidc-provider/lib/helpers/grants.js';
import {
  assertModelInternals,
  certificateThumbprintOf,
  newBackingGrant,
  providerAdapter,
  providerConfiguration,
  providerJwks,
  providerSigningKey,
  setTokenLifetime,
  signWithProviderKey,
  tokenOriginsHold,
} from '../../lib/provider-internals.js';
import { userAccessToken } from '../../fixtures/flows.js';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import * as jwtHelpers from 'oidc-provider/lib/helpers/jwt.js';
import { API, CLIENTS, startProvider, type TestProvider } from '../support/provider.js';

// oidc-provider's internals are outside its semantic versioning. If an upgrade
// moves them, this file fails first, naming what moved.
describe('provider-internals: the one deep import into oidc-provider', () => {
  let tp: TestProvider;
  before(async () => {
    tp = await startProvider();
  });
  after(() => tp.close());

  it('finds every grant helper the exchange uses', () => {
    for (const name of [
      'resolveRequestedResources',
      'validateClientScope',
      'validateDpop',
      'checkDpopReplay',
      'checkDpopRequired',
      'checkMtlsCert',
    ] as const) {
      expect(grants[name], name).to.be.a('function');
    }
  });

  it("sets a token's lifetime, reads its certificate thumbprint and builds a Grant as the exchange needs them", async () => {
    const client = await tp.provider.Client.find(CLIENTS.console.client_id);
    const token = new tp.provider.AccessToken({ accountId: 'bob', client: client! } as never);
    setTokenLifetime(token, 42);
    expect(token.expiration).to.equal(42);
    expect(certificateThumbprintOf(token)).to.equal(undefined);
    token.setThumbprint(
      'x5t',
      readFileSync(new URL('../../../test/fixtures/client-cert.pem', import.meta.url), 'utf8'),
    );
    expect(certificateThumbprintOf(token)).to.match(/^[A-Za-z0-9_-]{43}$/);

    const grant = newBackingGrant(tp.provider, {
      jti: 'grant-id',
      accountId: 'bob',
      clientId: CLIENTS.console.client_id,
      resource: API,
      scope: ['profile:read'],
      expiresIn: 42,
    });
    expect(grant.jti).to.equal('grant-id');
    expect(grant.getResourceScope(API)).to.equal('profile:read');
    await grant.save();
    const saved = await tp.provider.Grant.find('grant-id');
    expect(saved?.accountId).to.equal('bob');
    expect(saved!.exp! - Math.floor(Date.now() / 1000)).to.be.within(40, 42);
    await tp.provider.Grant.adapter.destroy('grant-id');
  });

  it('checks, at install(), the model fields the exchange uses, and names the one a release moved', () => {
    expect(() => assertModelInternals(tp.provider)).to.not.throw();
    const AccessToken = tp.provider.AccessToken as unknown as { IN_PAYLOAD: string[] };
    const descriptor = Object.getOwnPropertyDescriptor(tp.provider.AccessToken, 'IN_PAYLOAD');
    Object.defineProperty(tp.provider.AccessToken, 'IN_PAYLOAD', {
      get: () => descriptor!.get!.call(AccessToken).filter((name: string) => name !== 'x5t#S256'),
      configurable: true,
    });
    try {
      expect(() => assertModelInternals(tp.provider)).to.throw(
        /lacks internals the plugin uses \(AccessToken 'x5t#S256'\)/,
      );
    } finally {
      Object.defineProperty(tp.provider.AccessToken, 'IN_PAYLOAD', descriptor!);
    }
  });

  it("reads a token's sign-in and Grant as oidc-provider's models judge them, whatever changed in either", async () => {
    const value = await userAccessToken(tp, 'alice');
    const { provider } = tp;
    const token = (await provider.AccessToken.find(value))!;
    const [session, grant] = [provider.Session.adapter, provider.Grant.adapter];
    const storedSession = (await session.findByUid(token.sessionUid!))!;
    const storedGrant = (await grant.find(token.grantId!))!;
    const now = Math.floor(Date.now() / 1000);
    const changes: [string, Record<string, unknown> | undefined, Record<string, unknown> | undefined][] = [
      ['nothing', {}, {}],
      ['the sign-in expired', { exp: now - 60 }, {}],
      ['the sign-in expired within the clock tolerance', { exp: now - 1 }, {}],
      ['the sign-in of another account', { accountId: 'bob' }, {}],
      [
        'the sign-in holding another Grant for the client',
        { authorizations: { [token.clientId!]: { grantId: 'x' } } },
        {},
      ],
      ['the sign-in holding none', { authorizations: undefined }, {}],
      ['an entry of another kind', { kind: 'Grant' }, {}],
      ['the sign-in gone', undefined, {}],
      ['the Grant expired', {}, { exp: now }],
      ['the Grant without expiry', {}, { exp: undefined }],
      ["the Grant another client's", {}, { clientId: 'other' }],
      ["the Grant another account's", {}, { accountId: 'bob' }],
      ['the Grant gone', {}, undefined],
    ];
    for (const [change, sessionChange, grantChange] of changes) {
      if (sessionChange) await session.upsert(storedSession.jti!, { ...storedSession, ...sessionChange }, 600);
      else await session.destroy(storedSession.jti!);
      if (grantChange) await grant.upsert(token.grantId!, { ...storedGrant, ...grantChange }, 600);
      else await grant.destroy(token.grantId!);
      const model = await provider.Grant.find(token.grantId!, { ignoreExpiration: true });
      const judged =
        !!(await provider.AccessToken.find(value)) &&
        !!model &&
        !model.isExpired &&
        model.clientId === token.clientId &&
        model.accountId === token.accountId;
      const held = await tokenOriginsHold(provider, token);
      expect(held !== false, change).to.equal(judged);
      // What holds answers with the sign-in it read: its loginTs is the actor's auth_time under step-up.
      if (held !== false) expect(held?.['loginTs'], change).to.equal(storedSession['loginTs']);
      expect(judged, change).to.equal(/nothing|within|without/.test(change));
    }
  });

  it('reads the configuration the provider was built with', () => {
    const configuration = providerConfiguration(tp.provider);
    expect(configuration.findAccount).to.be.a('function');
    expect(configuration.extraTokenClaims).to.be.a('function');
  });

  it("reads the provider's adapter", () => {
    expect(providerAdapter(tp.provider)).to.equal(tp.adapter);
  });

  it('reads the public signing keys the jwks_uri serves, without private parts', async () => {
    const served = await (await fetch(`${tp.base}/jwks`)).json();
    const jwks = providerJwks(tp.provider);
    expect(JSON.parse(JSON.stringify(jwks))).to.deep.equal(served);
    for (const key of jwks.keys) expect(key).to.not.have.property('d');
  });

  it("signs with the provider's key for its ID token algorithm, verifiable with its jwks_uri, the header's typ and kid set", async () => {
    expect(jwtHelpers.sign).to.be.a('function');
    expect(providerSigningKey(tp.provider).alg).to.equal('RS256');
    const jwt = await signWithProviderKey(tp.provider, { iss: tp.issuer, jti: 'probe', iat: 1 }, 'secevent+jwt');
    const served = (await (await fetch(`${tp.base}/jwks`)).json()) as JSONWebKeySet;
    const { payload, protectedHeader } = await jwtVerify(jwt, createLocalJWKSet(served), { typ: 'secevent+jwt' });
    expect(payload).to.deep.equal({ iss: tp.issuer, jti: 'probe', iat: 1 });
    expect(protectedHeader).to.deep.equal({ alg: 'RS256', typ: 'secevent+jwt', kid: served.keys[0]!.kid });
  });

  it('refuses something that is not a provider', () => {
    expect(() => providerConfiguration({} as never)).to.throw(TypeError, /oidc-provider/);
  });
});
