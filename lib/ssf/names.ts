/** The names SSF 1.0 and CAEP 1.0 define; imports nothing, so the resource-server entry can read them. */
export const SESSION_REVOKED_EVENT = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
export const VERIFICATION_EVENT = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
export const PUSH_METHOD = 'urn:ietf:rfc:8935';
export const POLL_METHOD = 'urn:ietf:rfc:8936';
export const SET_TYPE = 'secevent+jwt';
/** The events a stream can carry besides verification, which every stream carries on request. */
export const EVENTS_SUPPORTED: readonly string[] = Object.freeze([SESSION_REVOKED_EVENT]);
