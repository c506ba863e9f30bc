/**
 * Every element of the support console's page that has an id, and its type.
 * The page (console-page.ts) writes each id through `consoleId()` and the
 * script (browser/console.ts) looks each one up by a key of this map, so a
 * renamed or mistyped id fails the type-check of both instead of a lookup in
 * the browser. A type, not a value: the script is served on its own and
 * imports nothing at run time.
 */
export interface ConsoleElements {
  /** The page's configuration (ConsoleConfig as JSON). */
  config: HTMLScriptElement;
  'signed-in-user': HTMLSpanElement;
  'sign-out': HTMLButtonElement;
  'acting-banner': HTMLDivElement;
  'banner-customer': HTMLElement;
  'banner-ticket': HTMLElement;
  'banner-time': HTMLSpanElement;
  stop: HTMLButtonElement;
  error: HTMLDivElement;
  'error-message': HTMLParagraphElement;
  'error-code': HTMLParagraphElement;
  'error-action': HTMLButtonElement;
  notice: HTMLDivElement;
  'sign-in-card': HTMLElement;
  'sign-in': HTMLButtonElement;
  'not-support-card': HTMLElement;
  'impersonate-card': HTMLElement;
  'impersonate-form': HTMLFormElement;
  user: HTMLInputElement;
  reason: HTMLInputElement;
  ticket: HTMLInputElement;
  impersonate: HTMLButtonElement;
  'waiting-card': HTMLElement;
  'waiting-message': HTMLParagraphElement;
  'waiting-detail': HTMLParagraphElement;
  'stop-waiting': HTMLButtonElement;
  'customer-card': HTMLElement;
  'customer-title': HTMLHeadingElement;
  'customer-access': HTMLParagraphElement;
  'profile-name': HTMLElement;
  'profile-email': HTMLElement;
  'profile-plan': HTMLElement;
  'profile-since': HTMLElement;
  'profile-address': HTMLElement;
  'edit-address': HTMLButtonElement;
  'address-form': HTMLFormElement;
  'address-line1': HTMLInputElement;
  'address-city': HTMLInputElement;
  'address-postcode': HTMLInputElement;
  'address-country': HTMLInputElement;
  'save-address': HTMLButtonElement;
  'cancel-address': HTMLButtonElement;
  orders: HTMLTableElement;
  invoices: HTMLTableElement;
  details: HTMLDetailsElement;
  'progress-card': HTMLElement;
  steps: HTMLOListElement;
  'token-card': HTMLElement;
  'claim-sub': HTMLElement;
  'claim-act': HTMLElement;
  'claim-aud': HTMLElement;
  'claim-scope': HTMLElement;
  'claim-context': HTMLPreElement;
  'claim-exp': HTMLSpanElement;
  'claims-raw': HTMLPreElement;
  'api-card': HTMLElement;
  'api-message': HTMLParagraphElement;
  'api-answer': HTMLPreElement;
  'details-empty': HTMLParagraphElement;
}

export type ConsoleElementId = keyof ConsoleElements;

/** The id as the page writes it, checked against ConsoleElements. */
export function consoleId(id: ConsoleElementId): string {
  return id;
}
