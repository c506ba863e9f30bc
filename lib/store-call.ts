import { DomainError, ManagementError, serviceUnavailable } from './errors.js';

/** A call to a store: a failure is an outage (storeFull keeps its words), never a half-done write; own refusals pass through. */
export async function storeCall<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof DomainError || error instanceof ManagementError) throw error;
    const full = error as { statusCode?: unknown; error?: unknown; error_description?: unknown };
    const description =
      full.statusCode === 503 && full.error === 'temporarily_unavailable' && typeof full.error_description === 'string'
        ? full.error_description
        : 'the identity service cannot reach its store; retry shortly';
    throw serviceUnavailable(description, error);
  }
}
