import { errors } from 'oidc-provider';

/**
 * Every error the plugin raises comes from here. At the token endpoint they are
 * oidc-provider's own classes, so its error rendering, `grant.error` event and
 * status codes apply; at the Management API they are `ManagementError`s.
 */

/** RFC 8693 2.2.2: anything wrong with the request or with a subject or actor token. */
export function invalidRequest(description: string, cause?: unknown): errors.InvalidRequest {
  return new errors.InvalidRequest(description, 400, cause === undefined ? undefined : { cause });
}

export function invalidTarget(description: string): errors.InvalidTarget {
  return new errors.InvalidTarget(description);
}

export function invalidScope(description: string, scope: string): errors.InvalidScope {
  return new errors.InvalidScope(description, scope);
}

export type ManagementErrorCode =
  | 'invalid_request'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'access_denied'
  | 'user_not_found'
  | 'request_too_large'
  | 'temporarily_unavailable'
  | 'server_error';

/** An OAuth-style error of the Management API: `{ error, error_description }` with `status`. */
export class ManagementError extends Error {
  readonly status: number;
  readonly error: ManagementErrorCode;

  constructor(status: number, error: ManagementErrorCode, description: string, options?: { cause?: unknown }) {
    super(description, options);
    this.name = 'ManagementError';
    this.status = status;
    this.error = error;
  }

  toJSON(): { error: ManagementErrorCode; error_description: string } {
    return { error: this.error, error_description: this.message };
  }
}

export { errors };
