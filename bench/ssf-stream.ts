/**
 * An SSF stream in place on the provider under load (bench/server.ts, with a
 * webhook subscription): the transmitter (`ssf` option), a receiver client
 * that may manage streams, and one poll stream it creates through the stream
 * API before the provider serves its first request. Exchanges send no SET (a
 * stop does); what the stream costs them is the transmitter being installed.
 */
import type { ClientMetadata } from 'oidc-provider';
import { m2mToken } from '../fixtures/flows.js';
import type { FixtureProvider } from '../fixtures/provider.js';
import type { ImpersonationOptions } from '../lib/index.js';

const SCOPE = 'ssf:streams';
const RECEIVER = { client_id: 'bench-ssf-receiver', client_secret: 'bench-ssf-receiver-secret' };

export interface SsfStreamSetup {
  plugin: Pick<ImpersonationOptions, 'ssf'>;
  clients: readonly ClientMetadata[];
  /** Creates the stream on the started provider; rejects unless it was created. */
  open(tp: FixtureProvider): Promise<void>;
}

export function ssfStreamSetup(): SsfStreamSetup {
  return {
    plugin: { ssf: { scope: SCOPE } },
    clients: [
      {
        ...RECEIVER,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        impersonation_management_scope: SCOPE,
      },
    ],
    async open(tp) {
      const token = await m2mToken(tp, RECEIVER, SCOPE);
      const response = await fetch(`${tp.base}/ssf/streams`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ description: 'bench' }),
        signal: AbortSignal.timeout(10_000),
      });
      if (response.status !== 201) throw new Error(`the SSF stream was not created: ${response.status}`);
    },
  };
}
