/** Errors of the parts that run without oidc-provider loaded; importing this file never loads it. */

/** An error class's constructor as a function, as every throw site calls its error. */
export function construct<Args extends unknown[], E>(ErrorClass: new (...args: Args) => E): (...args: Args) => E {
  return (...args) => new ErrorClass(...args);
}

/** Configuration: `<function>: option "<name>" <requirement>`, thrown at the call that was given the option. */
export function invalidOption(fn: string, option: string, requirement: string): TypeError {
  return new TypeError(`${fn}: option "${option}" ${requirement}`);
}

/** Configuration: `<function>: argument "<name>" <requirement>`, for a positional argument. */
export function invalidArgument(fn: string, argument: string, requirement: string): TypeError {
  return new TypeError(`${fn}: argument "${argument}" ${requirement}`);
}

/** Configuration: `<function>: <what is wrong and what to do>`, when no single option is at fault. */
export function invalidCall(fn: string, problem: string, cause?: unknown): TypeError {
  return new TypeError(`${fn}: ${problem}`, cause === undefined ? undefined : { cause });
}

/** A TypeError whose message is the caller's `problem` as it stands. */
function typeError(problem: string, cause?: unknown): TypeError {
  return new TypeError(problem, cause === undefined ? undefined : { cause });
}

/** The command line: `--<option> ...`, as typed; never quotes a value, which may be a secret typed in the wrong place. */
export const invalidCommandLine = typeError;

/** A value handed to an adapter that it cannot store as given: `<adapter>: <requirement>`. */
export const unstorableValue = invalidCall;

/** A call at the wrong moment of the provider's life, whose `description` says what to do instead. */
export const calledTooLate = typeError;

/** A store, a feed or a log that cannot answer now; names the service, never a value (a key can be a token). */
export function unavailable(problem: string, cause?: unknown): Error {
  return new Error(problem, cause === undefined ? undefined : { cause });
}

/** A push refused before it was sent: its host resolved to an address it may not reach; names the host, not the address. */
export function pushTargetRefused(host: string): Error {
  return Object.assign(new Error(`the push endpoint's host ${host} resolves to an internal address`), {
    code: 'ERR_PUSH_TARGET_REFUSED',
  });
}

/** PostgreSQL refused or failed a statement; `code` is its SQLSTATE, which tells a refused value from an outage. */
export function postgresFailed(operation: string, reason: string, code?: string): Error {
  const failure = new Error(`the PostgreSQL store failed (${operation}): ${reason}`);
  return code === undefined ? failure : Object.assign(failure, { code });
}

/** A published head (of an audit trail) that is not one: `a published head <requirement>`. */
export function invalidPublishedHead(requirement: string): TypeError {
  return new TypeError(`a published head ${requirement}`);
}

/** A head file (appendHeadsToFile's) whose last line gives no head. */
export const invalidHeadFile = typeError;

/** An audit trail read where it is not: `problem` names the table and where it was looked for; `code` tells the command so. */
export function missingAuditTable(problem: string): Error {
  return Object.assign(new Error(problem), { code: MISSING_AUDIT_TABLE });
}

export const MISSING_AUDIT_TABLE = 'ERR_MISSING_AUDIT_TABLE';

/** A schema the database lacks: the plugin creates tables, never their schema, whose grants are the administrator's. */
export function missingSchema(fn: string, schema: string, cause: unknown): Error {
  return new Error(
    `${fn}: option "schema" names ${JSON.stringify(schema)}, a schema this database does not have; ` +
      `create it first (CREATE SCHEMA "${schema}"), or correct the option: the tables are created in it, the schema never is`,
    { cause },
  );
}

/** A stored row that is not one of this trail's (its content was altered). */
export function notATrailRow(): Error {
  return new Error('not a row of this trail');
}

/** A query of the audit log: `<parameter> <requirement>`, the parameter named as the caller passed it. */
export function invalidAuditQuery(parameter: string, requirement: string): TypeError {
  return new TypeError(`${parameter} ${requirement}`);
}

/** A signing or verification key of the wrong kind; names the key's place, never the key. */
export const invalidKey = typeError;

/** An oidc-provider this plugin cannot work with: `missing` lists what it lacks. */
export function unsupportedProvider(missing: readonly string[]): Error {
  return new Error(
    `oidc-provider-impersonation: this oidc-provider lacks internals the plugin uses (${missing.join(', ')}); ` +
      'install a version in the peerDependencies range of oidc-provider-impersonation',
  );
}

export function notAProvider(): TypeError {
  return new TypeError('not an oidc-provider instance');
}

export type ImpersonationTokenErrorCode = 'invalid_token' | 'session_revoked' | 'revocations_unavailable';

/** Why a token was refused; `status` is what to answer (401, or 503 when revocations cannot be known). */
export class ImpersonationTokenError extends Error {
  readonly code: ImpersonationTokenErrorCode;
  readonly status: 401 | 503;

  constructor(code: ImpersonationTokenErrorCode, message: string) {
    super(message);
    this.name = 'ImpersonationTokenError';
    this.code = code;
    this.status = code === 'revocations_unavailable' ? 503 : 401;
  }
}

export const tokenRefused = construct(ImpersonationTokenError);

/** A store that could not keep the plugin's records safely; the message names it and what to use instead. */
export const unfitStore = typeError;

/** A provider that cannot sign what the plugin must sign (Security Event Tokens): no asymmetric key for its algorithm. */
export function noSigningKey(alg: string | undefined): TypeError {
  return new TypeError(
    `the provider's keystore (its "jwks" configuration) has no signing key for ${alg ?? 'its ID token algorithm'}, ` +
      'which Security Event Tokens are signed with: add one, or leave the "ssf" option unset',
  );
}
