import type Koa from 'koa';
import type { JsonObject } from '../json.js';
import { providerConfiguration } from '../provider-internals.js';
import { CRITICAL_SUBJECT_MEMBERS } from './set.js';
import { POLL_METHOD, PUSH_METHOD } from './names.js';
import type { Transmitter } from './transmit.js';

/** The well-known segment of the transmitter configuration metadata (SSF 1.0 7.2). */
export const SSF_CONFIGURATION_PATH = '/.well-known/ssf-configuration';

/** The SSF 1.0 7.2 metadata path: the issuer's path after the well-known segment, as RFC 8414 3.1 does. */
export function ssfConfigurationLocation(issuer: string): string {
  return `${SSF_CONFIGURATION_PATH}${new URL(issuer).pathname.replace(/\/$/, '')}`;
}

/** The issuer without its trailing slash, which every URL of the transmitter is built on. */
function issuerBase(transmitter: Transmitter): string {
  return transmitter.provider.issuer.replace(/\/$/, '');
}

/** Where the stream API is reached: under the issuer, unless the deployment serves it elsewhere. */
export function streamApiBase(transmitter: Transmitter): string {
  return `${transmitter.options.baseUrl ?? issuerBase(transmitter)}${transmitter.options.path}`;
}

/** The transmitter configuration metadata (SSF 1.0 7.1): public, as a JWKS is. */
export function transmitterMetadata(transmitter: Transmitter): JsonObject {
  const configuration = providerConfiguration(transmitter.provider);
  const jwksPath = (configuration.routes as { jwks?: string } | undefined)?.jwks ?? '/jwks';
  const api = streamApiBase(transmitter);
  return {
    spec_version: '1_0',
    issuer: transmitter.provider.issuer,
    jwks_uri: `${issuerBase(transmitter)}${jwksPath}`,
    delivery_methods_supported: [PUSH_METHOD, POLL_METHOD],
    configuration_endpoint: `${api}/streams`,
    status_endpoint: `${api}/status`,
    add_subject_endpoint: `${api}/subjects/add`,
    remove_subject_endpoint: `${api}/subjects/remove`,
    verification_endpoint: `${api}/verify`,
    critical_subject_members: [...CRITICAL_SUBJECT_MEMBERS],
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6749' }],
    // Every impersonation session is a subject of every stream: a receiver cannot know one before it stops.
    default_subjects: 'ALL',
  };
}

/** The metadata at its SSF 1.0 7.2 location as a Koa middleware for the host app's root; passes other requests on. */
export function ssfDiscoveryMiddleware(transmitter: Transmitter): Koa.Middleware {
  const location = ssfConfigurationLocation(transmitter.provider.issuer);
  return async (ctx, next) => {
    if (ctx.path !== location || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.set('Cache-Control', 'no-store');
    ctx.body = transmitterMetadata(transmitter);
  };
}
