import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Provider, { type Configuration } from 'oidc-provider';
import { createImpersonation } from '../../lib/index.js';
import { MINIMAL_CONFIGURATION } from '../support/keys.js';
import { MANAGEMENT } from '../support/provider.js';

const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';
const CIBA = 'urn:openid:params:grant-type:ciba';
const SECRET = 'a-secret-long-enough-for-the-test-client';

/** Device flow and CIBA, whose requests expire after two seconds. */
const CONFIGURATION: Configuration = {
  ...MINIMAL_CONFIGURATION,
  clients: [
    {
      client_id: 'device',
      client_secret: SECRET,
      grant_types: [DEVICE_CODE, CIBA],
      response_types: [],
      redirect_uris: [],
      backchannel_token_delivery_mode: 'poll',
    },
  ],
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  ttl: { DeviceCode: 2, BackchannelAuthenticationRequest: 2 },
  features: {
    ...MINIMAL_CONFIGURATION.features,
    deviceFlow: { enabled: true },
    ciba: {
      enabled: true,
      deliveryModes: ['poll'],
      processLoginHint: (_ctx, hint) => hint,
      verifyUserCode: () => undefined,
      validateBindingMessage: () => undefined,
      validateRequestContext: () => undefined,
      triggerAuthenticationDevice: () => undefined,
    },
  },
};

/** What polling gets for a device code and a CIBA request half a second after they expired. */
async function pollsAfterExpiry(withPlugin: boolean): Promise<{ device: unknown; ciba: unknown }> {
  const impersonation = createImpersonation({ managementResource: MANAGEMENT });
  const provider = new Provider(
    'http://127.0.0.1',
    withPlugin ? impersonation.configure(CONFIGURATION) : CONFIGURATION,
  );
  if (withPlugin) impersonation.install(provider);
  const server = provider.listen(0);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const post = async (path: string, form: Record<string, string>) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`device:${SECRET}`).toString('base64')}` },
      body: new URLSearchParams(form),
    });
    return (await response.json()) as Record<string, string>;
  };
  try {
    const { device_code: deviceCode } = await post('/device/auth', { scope: 'openid' });
    const { auth_req_id: authReqId } = await post('/backchannel', { scope: 'openid', login_hint: 'alice' });
    await new Promise((resolve) => setTimeout(resolve, 2500));
    return {
      device: (await post('/token', { grant_type: DEVICE_CODE, device_code: deviceCode! })).error,
      ciba: (await post('/token', { grant_type: CIBA, auth_req_id: authReqId! })).error,
    };
  } finally {
    server.close();
  }
}

describe("oidc-provider's own models on the plugin's default store", () => {
  it('answers expired_token to a device code and a CIBA request polled inside the clock tolerance, as without the plugin', async () => {
    const [without, withPlugin] = await Promise.all([pollsAfterExpiry(false), pollsAfterExpiry(true)]);
    expect(without).to.deep.equal({ device: 'expired_token', ciba: 'expired_token' });
    expect(withPlugin).to.deep.equal(without);
  });
});

describe("configure(): oidc-provider's configuration refused in oidc-provider's words", () => {
  const refusal = (build: () => unknown): string => {
    try {
      build();
    } catch (error) {
      return (error as Error).message;
    }
    return 'accepted';
  };

  for (const [name, changed] of [
    ['scopes that are no Array or Set', { scopes: 5 }],
    ['a string for scopes', { scopes: 'openid' }],
    ['clients that are no array', { clients: {} }],
  ] as const) {
    it(`refuses ${name} as oidc-provider does`, () => {
      const configuration = { ...MINIMAL_CONFIGURATION, ...changed } as unknown as Configuration;
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const bare = refusal(() => new Provider('https://id.example.com', configuration));
      expect(bare).to.not.equal('accepted');
      expect(refusal(() => new Provider('https://id.example.com', impersonation.configure(configuration)))).to.equal(
        bare,
      );
    });
  }

  it('refuses an issuer with a query in its own words, not as a bad managementResource (the quick start derives it)', () => {
    const issuer = 'https://id.example.com/?tenant=a';
    const refused = refusal(() => {
      const impersonation = createImpersonation({ managementResource: `${issuer}/api` });
      impersonation.install(new Provider(issuer, impersonation.configure(MINIMAL_CONFIGURATION)));
    });
    expect(refused).to.equal('Issuer Identifier must not have a query component');
  });
});
