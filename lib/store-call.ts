import { DomainError, ManagementError, serviceUnavailable } from './errors.js';

/**
 * A call to a store: its failure is an outage, not a bug, and never a
 * half-done write. A store that is full says so (storeFull) and its words
 * are kept; any other failure reads "cannot reach its store". A refusal the
 * call made itself passes through as it is.
 */
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
