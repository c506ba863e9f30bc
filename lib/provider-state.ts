import type { JwtVerifier } from './access-token.js';
import type { EventSubscriber } from './events/subscriber.js';

/**
 * What the plugin keeps for one provider: the subscribers of its events
 * (the trail, webhooks, SSF streams, each holding its own store), the
 * Management API's record of the requests it served, the provider's JWT
 * verification. install() fills it; the code that runs inside the provider
 * (the grant, the Management API, a session's stop) reads it through the
 * provider oidc-provider hands it.
 */
export interface ProviderState {
  /** In the order they are told of an event: the trail first. */
  readonly subscribers: EventSubscriber[];
  /** Requests that went through the Management API that install() added to the provider's middleware. */
  served?: WeakSet<object>;
  /**
   * Requests the provider is answering now (counted by the first middleware install() adds): the
   * delivery of the outbox waits while there are any (lib/webhooks/worker.ts).
   */
  requestsInFlight: number;
  /** The provider's key set and the JWTs verified already (lib/access-token.ts), made on first use. */
  jwtVerifier?: JwtVerifier;
}

/** The one table of per-provider state: an entry lives as long as its provider. */
const states = new WeakMap<object, ProviderState>();

/** The provider's state, made empty on first use (a provider the plugin is not installed on has no subscribers). */
export function stateOf(provider: object): ProviderState {
  let state = states.get(provider);
  if (!state) {
    state = { subscribers: [], requestsInFlight: 0 };
    states.set(provider, state);
  }
  return state;
}
