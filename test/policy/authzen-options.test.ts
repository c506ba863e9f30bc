/**
 * The `authzen` option, checked at start-up: each wrong setting named,
 * never its value (a token or a header may be a secret).
 */
import { expect } from 'chai';
import { resolveOptions } from '../../lib/options.js';
import type { AuthzenOptions } from '../../lib/index.js';

const BASE = { managementResource: 'https://id.example.com/api' };
const SECRET = 'pdp-secret-77a1';

describe('the authzen option', () => {
  it('resolves the evaluation endpoint, the timeout and the headers it sends', () => {
    const { authzen } = resolveOptions({
      ...BASE,
      authzen: { url: 'https://pdp.example.com/authz/', token: SECRET, headers: { 'x-tenant': 'acme' } },
    });
    expect(authzen).to.deep.equal({
      endpoint: 'https://pdp.example.com/authz/access/v1/evaluation',
      timeout: 1000,
      headers: { 'x-tenant': 'acme', authorization: `Bearer ${SECRET}` },
    });
    expect(Object.isFrozen(authzen)).to.equal(true);
    expect(resolveOptions(BASE)).not.to.have.property('authzen');
  });

  const wrong: Array<[string, unknown, RegExp]> = [
    ['not an object', 'https://pdp.example.com', /option "authzen" must be an object/],
    ['no url', {}, /option "authzen.url" must be an absolute http\(s\) URL/],
    ['a relative url', { url: '/pdp' }, /option "authzen.url"/],
    ['another scheme', { url: 'ftp://pdp.example.com' }, /option "authzen.url"/],
    ['a query', { url: 'https://pdp.example.com/?a=1' }, /option "authzen.url"/],
    ['credentials in the url', { url: `https://user:${SECRET}@pdp.example.com` }, /must carry no credentials/],
    ['a zero timeout', { url: 'https://pdp.example.com', timeout: 0 }, /"authzen.timeout" must be an integer/],
    ['a long timeout', { url: 'https://pdp.example.com', timeout: 30_001 }, /"authzen.timeout"/],
    ['an empty token', { url: 'https://pdp.example.com', token: '' }, /"authzen.token"/],
    ['a token with a line break', { url: 'https://pdp.example.com', token: `${SECRET}\n` }, /"authzen.token"/],
    [
      'its own Authorization header',
      { url: 'https://pdp.example.com', headers: { Authorization: SECRET } },
      /may not set Authorization/,
    ],
    [
      'a header that is not text',
      { url: 'https://pdp.example.com', headers: { 'x-key': 7 } },
      /x-key must be a string/,
    ],
    [
      'a misspelt setting',
      { url: 'https://pdp.example.com', timeOut: 5 },
      /"authzen.timeOut" is unknown; did you mean "authzen.timeout"/,
    ],
  ];
  for (const [what, authzen, message] of wrong) {
    it(`refuses ${what}, naming the setting and never its value`, () => {
      let thrown: unknown;
      try {
        resolveOptions({ ...BASE, authzen: authzen as AuthzenOptions });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).to.be.instanceOf(TypeError);
      expect((thrown as Error).message)
        .to.match(/^createImpersonation: /)
        .and.to.match(message);
      expect((thrown as Error).message).not.to.include(SECRET);
    });
  }
});
