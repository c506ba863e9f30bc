import type { ImpersonationEvent } from '../../lib/index.js';

/**
 * Some of an event's fields, as a test hands them to an audit log directly:
 * a log stores whatever subset of the fields it is given, and these tests are
 * about what it stores, not about which event carries which field.
 */
export function eventFields(fields: Partial<ImpersonationEvent>): ImpersonationEvent {
  return fields as ImpersonationEvent;
}
