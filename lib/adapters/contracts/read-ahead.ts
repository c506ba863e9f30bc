import type { Adapter } from 'oidc-provider';

/** A provider's adapter that may read an access token with its Session and Grant at once (PostgreSQL: one statement). */
export interface ReadAheadAdapter extends Adapter {
  /** Reads entry `id`, its Session and its Grant; within this turn, one find of each takes it, once per readAhead. */
  readAhead?(id: string): Promise<void>;
  /** Drops what was read ahead and what is being read: a write that a later read must see was answered elsewhere. */
  forgetReadAheads?(): void;
}
