/**
 * Rules a Security Event Token and SSF/CAEP messages must meet, written from
 * the specifications' texts (RFC 8417, RFC 9493, RFC 8935, RFC 8936, OpenID
 * SSF 1.0 and CAEP 1.0), independently of lib/: each returns the rules broken,
 * so a test names every one at once.
 */

const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
const INITIATING_ENTITIES = ['admin', 'user', 'policy', 'system'];

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isNumericDate = (value: unknown) => typeof value === 'number' && Number.isFinite(value) && value >= 0;
const isHttpsUrl = (value: unknown, allowLoopbackHttp: boolean) => {
  const url = typeof value === 'string' ? URL.parse(value) : null;
  if (!url || url.search || url.hash) return false;
  return url.protocol === 'https:' || (allowLoopbackHttp && url.protocol === 'http:' && url.hostname === '127.0.0.1');
};

/** RFC 9493 3: a Subject Identifier of a registered format, with exactly the members that format defines. */
export function subjectIdentifierProblems(value: unknown, where: string): string[] {
  if (!isObject(value)) return [`${where}: a Subject Identifier is a JSON object (RFC 9493 3)`];
  const members: Record<string, string[]> = {
    account: ['uri'],
    email: ['email'],
    iss_sub: ['iss', 'sub'],
    opaque: ['id'],
    phone_number: ['phone_number'],
    did: ['url'],
    uri: ['uri'],
  };
  const format = value['format'];
  if (typeof format !== 'string') return [`${where}: "format" is REQUIRED (RFC 9493 3)`];
  const required = members[format];
  if (!required) return [`${where}: format ${format} is not one this check knows`];
  const problems: string[] = [];
  for (const name of required) {
    if (typeof value[name] !== 'string' || !value[name]) problems.push(`${where}: ${format} needs a string "${name}"`);
  }
  for (const name of Object.keys(value)) {
    if (name !== 'format' && !required.includes(name)) {
      problems.push(`${where}: ${format} has no member "${name}" (RFC 9493 3.2)`);
    }
  }
  return problems;
}

/** SSF 1.0 3.2: a complex subject's members are each a simple Subject Identifier, at most once. */
function subjectProblems(value: unknown): string[] {
  if (!isObject(value)) return ['sub_id: REQUIRED in an SSF event (SSF 1.0 3.4)'];
  if (value['format'] !== 'complex') return subjectIdentifierProblems(value, 'sub_id');
  const members = Object.keys(value).filter((name) => name !== 'format');
  if (!members.length) return ['sub_id: a complex subject has one or more members (SSF 1.0 3.3)'];
  return members.flatMap((name) => subjectIdentifierProblems(value[name], `sub_id.${name}`));
}

/** The JOSE header and claims of a SET under SSF 1.0 4.1 and RFC 8417 2.2. */
export function setProblems(header: Record<string, unknown>, claims: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (header['typ'] !== 'secevent+jwt') problems.push('typ must be secevent+jwt (SSF 1.0 4.1.1, RFC 8417 2.3)');
  if (typeof header['alg'] !== 'string' || header['alg'] === 'none') problems.push('a SET is signed (SSF 1.0 4.1)');
  if (typeof claims['iss'] !== 'string') problems.push('iss is REQUIRED (RFC 8417 2.2)');
  if (typeof claims['jti'] !== 'string' || !claims['jti']) problems.push('jti is REQUIRED (RFC 8417 2.2)');
  if (!isNumericDate(claims['iat'])) problems.push('iat is REQUIRED, a NumericDate (RFC 8417 2.2)');
  const aud = claims['aud'];
  if (!(typeof aud === 'string' || (Array.isArray(aud) && aud.length && aud.every((v) => typeof v === 'string')))) {
    problems.push('aud is a string or an array of strings (SSF 1.0 4.1.7)');
  }
  if ('sub' in claims) problems.push('sub MUST NOT be present (SSF 1.0 4.1.2)');
  if ('exp' in claims) problems.push('exp MUST NOT be used (SSF 1.0 4.1.6)');
  if ('txn' in claims && typeof claims['txn'] !== 'string') problems.push('txn is a string (RFC 8417 2.2)');
  const events = claims['events'];
  if (!isObject(events)) problems.push('events is REQUIRED, a JSON object (RFC 8417 2.2)');
  else {
    const types = Object.keys(events);
    if (types.length !== 1) problems.push('events SHOULD contain only one event (SSF 1.0 4.2.1)');
    for (const type of types) {
      if (!isObject(events[type])) problems.push(`events["${type}"] is a JSON object (RFC 8417 2.2)`);
    }
    problems.push(...subjectProblems(claims['sub_id']));
    const revoked = events[SESSION_REVOKED];
    if (isObject(revoked)) problems.push(...caepProblems(revoked));
    const verification = events[VERIFICATION];
    if (isObject(verification)) {
      const sub = claims['sub_id'] as Record<string, unknown> | undefined;
      if (sub?.['format'] !== 'opaque')
        problems.push('a verification sub_id is opaque, the stream_id (SSF 1.0 8.1.4.1)');
      if ('state' in verification && typeof verification['state'] !== 'string') problems.push('state is a string');
    }
  }
  return problems;
}

/** CAEP 1.0 2 (optional event claims) as session-revoked (3.1) uses them. */
function caepProblems(event: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if ('event_timestamp' in event && !isNumericDate(event['event_timestamp'])) {
    problems.push('event_timestamp is a JSON number of seconds (CAEP 1.0 2)');
  }
  if ('initiating_entity' in event && !INITIATING_ENTITIES.includes(event['initiating_entity'] as string)) {
    problems.push('initiating_entity is admin, user, policy or system (CAEP 1.0 2)');
  }
  for (const name of ['reason_admin', 'reason_user']) {
    const reason = event[name];
    if (reason !== undefined && (!isObject(reason) || !Object.keys(reason).length)) {
      problems.push(`${name} is an object of one or more language tags to text (CAEP 1.0 2)`);
    }
  }
  return problems;
}

/** SSF 1.0 7.1.1 Transmitter Configuration Metadata. */
export function transmitterMetadataProblems(metadata: Record<string, unknown>, issuer: string, test = true): string[] {
  const problems: string[] = [];
  if (metadata['issuer'] !== issuer)
    problems.push('issuer MUST be the Issuer the metadata was asked of (SSF 1.0 7.2.3)');
  if (metadata['spec_version'] !== undefined && metadata['spec_version'] !== '1_0') {
    problems.push('spec_version is "1_0" for the final 1.0');
  }
  for (const name of [
    'jwks_uri',
    'configuration_endpoint',
    'status_endpoint',
    'verification_endpoint',
    'add_subject_endpoint',
    'remove_subject_endpoint',
  ]) {
    if (metadata[name] !== undefined && !isHttpsUrl(metadata[name], test)) {
      problems.push(`${name} MUST be an https URL (SSF 1.0 7.1.1)`);
    }
  }
  const methods = metadata['delivery_methods_supported'];
  if (!Array.isArray(methods) || !methods.every((m) => typeof m === 'string')) {
    problems.push('delivery_methods_supported is RECOMMENDED, a list of URIs');
  }
  const critical = metadata['critical_subject_members'];
  if (critical !== undefined && (!Array.isArray(critical) || !critical.every((m) => typeof m === 'string'))) {
    problems.push('critical_subject_members is an array of member names');
  }
  const defaults = metadata['default_subjects'];
  if (defaults !== undefined && defaults !== 'ALL' && defaults !== 'NONE') {
    problems.push('default_subjects is "ALL" or "NONE" (SSF 1.0 7.1.1)');
  }
  const schemes = metadata['authorization_schemes'];
  if (
    schemes !== undefined &&
    (!Array.isArray(schemes) || !schemes.every((s) => isObject(s) && typeof s['spec_urn'] === 'string'))
  ) {
    problems.push('authorization_schemes is an array of objects with spec_urn (SSF 1.0 7.1.1.1)');
  }
  return problems;
}

/** SSF 1.0 8.1.1 Stream Configuration, as a create, read, update or replace answers it. */
export function streamConfigurationProblems(stream: Record<string, unknown>, issuer: string): string[] {
  const problems: string[] = [];
  if (typeof stream['stream_id'] !== 'string' || !/^[A-Za-z0-9._~-]+$/.test(stream['stream_id'])) {
    problems.push('stream_id is REQUIRED, of RFC 3986 unreserved characters');
  }
  if (stream['iss'] !== issuer) problems.push('iss is REQUIRED and the Issuer');
  const aud = stream['aud'];
  if (!(typeof aud === 'string' || (Array.isArray(aud) && aud.every((v) => typeof v === 'string')))) {
    problems.push('aud is REQUIRED, a string or an array of strings');
  }
  const delivered = stream['events_delivered'];
  if (!Array.isArray(delivered)) problems.push('events_delivered is REQUIRED');
  else {
    const supported = (stream['events_supported'] as unknown[] | undefined) ?? delivered;
    const requested = (stream['events_requested'] as unknown[] | undefined) ?? delivered;
    if (!delivered.every((uri) => supported.includes(uri) && requested.includes(uri))) {
      problems.push('events_delivered is a subset of events_supported and events_requested');
    }
  }
  const delivery = stream['delivery'];
  if (!isObject(delivery)) problems.push('delivery is REQUIRED');
  else if (delivery['method'] === 'urn:ietf:rfc:8936') {
    if (typeof delivery['endpoint_url'] !== 'string')
      problems.push("a poll delivery has the transmitter's endpoint_url");
  } else if (delivery['method'] === 'urn:ietf:rfc:8935') {
    if (typeof delivery['endpoint_url'] !== 'string') problems.push("a push delivery has the receiver's endpoint_url");
  } else problems.push('delivery.method is urn:ietf:rfc:8935 or urn:ietf:rfc:8936');
  const interval = stream['min_verification_interval'];
  if (interval !== undefined && !Number.isSafeInteger(interval))
    problems.push('min_verification_interval is an integer');
  return problems;
}

/** RFC 8936 2.5: a poll response is `{ sets: { jti: SET }, moreAvailable? }`. */
export function pollResponseProblems(body: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (!isObject(body['sets'])) problems.push('sets is REQUIRED, a JSON object (RFC 8936 2.5)');
  else if (!Object.values(body['sets']).every((set) => typeof set === 'string' && set.split('.').length === 3)) {
    problems.push('each member of sets is a SET in compact serialisation');
  }
  if ('moreAvailable' in body && typeof body['moreAvailable'] !== 'boolean')
    problems.push('moreAvailable is a boolean');
  return problems;
}
