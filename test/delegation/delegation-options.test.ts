/** The delegation option and client metadata, each refused with what is wrong, at start-up or at registration. */
import { expect } from 'chai';
import type { ClientMetadata, KoaContextWithOIDC } from 'oidc-provider';
import { withDelegationMetadata } from '../../lib/exchange/delegation-metadata.js';
import { createImpersonation, DEFAULT_DELEGATION_LIMITS, type DelegationOptions } from '../../lib/index.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

function create(delegation: unknown) {
  return () =>
    createImpersonation({
      managementResource: 'https://id.example.com/api',
      delegation: delegation as DelegationOptions,
    });
}

describe('delegation options', () => {
  it('has defaults: a chain of 3 actors, 300 s tokens, no audience mapping', () => {
    const { delegation } = createImpersonation({ managementResource: 'https://id.example.com/api' }).options;
    expect(delegation).to.include({ maxChainDepth: 3, accessTokenTTL: 300, resolveAudience: undefined });
  });

  it('refuses a misspelt option, bounds out of range, and a custom type that takes an RFC 8693 type', () => {
    expect(create({ maxChainDept: 2 })).to.throw(/delegation\.maxChainDept.*maxChainDepth/);
    expect(create({ maxChainDepth: 0 })).to.throw(/delegation\.maxChainDepth/);
    expect(create({ maxChainDepth: 11 })).to.throw(/delegation\.maxChainDepth/);
    expect(create({ accessTokenTTL: 1.5 })).to.throw(/delegation\.accessTokenTTL/);
    expect(create({ canDelegate: 'yes' })).to.throw(/delegation\.canDelegate/);
    expect(create({ subjectTokenTypes: { 'urn:ietf:params:oauth:token-type:jwt': () => undefined } })).to.throw(
      /subjectTokenTypes/,
    );
    expect(create({ subjectTokenTypes: { 'not a uri': () => undefined } })).to.throw(/subjectTokenTypes/);
    expect(create({ subjectTokenTypes: { 'urn:example:x': 'resolver' } })).to.throw(/subjectTokenTypes/);
  });

  it('bounds new delegations per principal by default, and takes shares of its own, each checked', () => {
    const defaults = createImpersonation({ managementResource: 'https://id.example.com/api' }).options.delegation;
    expect(defaults.limits).to.deep.equal(DEFAULT_DELEGATION_LIMITS);
    expect(DEFAULT_DELEGATION_LIMITS).to.deep.equal({
      perSubjectToken: 20,
      perUser: 100,
      perClient: 5000,
      perImpersonationSession: 100,
    });
    const { delegation } = createImpersonation({
      managementResource: 'https://id.example.com/api',
      delegation: { limits: { perUser: 10 } },
    }).options;
    expect(delegation.limits).to.deep.equal({ ...DEFAULT_DELEGATION_LIMITS, perUser: 10 });
    expect(create({ limits: { perUsers: 10 } })).to.throw(
      /delegation\.limits\.perUsers" is not one of perSubjectToken/,
    );
    expect(create({ limits: { perClient: 0 } })).to.throw(/delegation\.limits\.perClient" must be an integer from 1/);
    expect(create({ limits: { perClient: 2.5 } })).to.throw(/delegation\.limits\.perClient/);
    expect(create({ limits: { perClient: Infinity } })).to.throw(/delegation\.limits\.perClient/);
    expect(create({ limits: 5 })).to.throw(/delegation\.limits" must be an object/);
  });
});

describe('token_exchange_delegation client metadata', () => {
  const { validator } = withDelegationMetadata({});
  /** The description of the refusal, or undefined when the metadata is taken. */
  const refusal = (metadata: ClientMetadata, route = 'token'): string | undefined => {
    try {
      validator!(
        { oidc: { route } } as unknown as KoaContextWithOIDC,
        'token_exchange_delegation',
        metadata['token_exchange_delegation'],
        metadata,
      );
      return undefined;
    } catch (error) {
      expect((error as { error?: string }).error).to.equal('invalid_client_metadata');
      return (error as { error_description: string }).error_description;
    }
  };
  const confidential = {
    client_id: 'svc',
    grant_types: [TOKEN_EXCHANGE],
    token_endpoint_auth_method: 'client_secret_basic',
  };

  it('takes resource indicators, normalised', () => {
    const metadata = {
      ...confidential,
      token_exchange_delegation: 'https://a.example https://a.example',
    } as ClientMetadata;
    expect(refusal(metadata)).to.equal(undefined);
    expect(metadata['token_exchange_delegation']).to.equal('https://a.example');
  });

  it('cannot be set through registration, by a public client, without the grant, or as anything but indicators', () => {
    const value = { token_exchange_delegation: 'https://a.example' };
    expect(refusal({ ...confidential, ...value } as ClientMetadata, 'registration')).to.match(/registration/);
    expect(refusal({ ...confidential, ...value, token_endpoint_auth_method: 'none' } as ClientMetadata)).to.match(
      /authenticates/,
    );
    expect(refusal({ ...confidential, ...value, grant_types: ['client_credentials'] } as ClientMetadata)).to.match(
      /grant type/,
    );
    expect(refusal({ ...confidential, token_exchange_delegation: 42 } as unknown as ClientMetadata)).to.match(
      /resource indicators/,
    );
  });
});
