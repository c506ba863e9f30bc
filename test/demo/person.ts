import { expect } from 'chai';
import type { Locator, Page } from 'playwright-core';
import type { Demo } from '../../demo/demo.js';

export const TICKET = { reason: 'Cannot see the invoices', ticket: 'T-1234' };

/** What a person does in the console and on the account page, over real HTTP, in headless Chromium. */
export class Person {
  constructor(
    readonly page: Page,
    readonly demo: Demo,
  ) {}

  async openConsole(): Promise<void> {
    await this.page.goto(`${this.demo.backend.url}/`);
    await this.ready();
  }

  async ready(): Promise<void> {
    await this.page.locator('body[data-ready="true"]').waitFor();
  }

  /** Signs out first when someone is signed in (ending the identity service's session too). */
  async signIn(login: string, password: string): Promise<void> {
    await this.openConsole();
    if (await this.page.locator('#sign-out').isVisible()) {
      await this.page.click('#sign-out');
      await this.page.waitForURL(`${this.demo.identity.issuer}/session/end**`);
      await this.page.click('#logout-yes');
      await this.page.waitForURL(`${this.demo.backend.url}/`);
      await this.ready();
      expect(await this.page.locator('#sign-in-card').isVisible()).to.equal(true);
    }
    await this.page.click('#sign-in');
    await this.enterPassword(login, password);
    await this.page.waitForURL(`${this.demo.backend.url}/`);
    await this.ready();
  }

  /** Signs in at the account page (`/account`), which always asks for the password. */
  async openAccount(login: string, password = `${login}-password`): Promise<void> {
    await this.page.goto(`${this.demo.backend.url}/account`);
    await this.page.click('#account-sign-in');
    await this.enterPassword(login, password);
    await this.page.waitForURL(`${this.demo.backend.url}/account`);
    await this.ready();
  }

  async enterPassword(login: string, password: string): Promise<void> {
    await this.page.waitForURL(`${this.demo.identity.baseUrl}/interaction/**`);
    await this.saysNoError(this.page.locator('input[name="login"]'));
    await this.page.fill('input[name="login"]', login);
    await this.page.fill('input[name="password"]', password);
    await this.page.click('button[type="submit"]');
  }

  async impersonate(user: string, reason = TICKET.reason, ticket = TICKET.ticket): Promise<void> {
    await this.page.fill('#user', user);
    await this.page.fill('#reason', reason);
    await this.page.fill('#ticket', ticket);
    await this.page.click('#impersonate');
  }

  /** Waits for `expected`, failing at once with the page's words when it shows an error instead. */
  async saysNoError(expected: Locator): Promise<void> {
    const error = this.page.getByRole('alert');
    await expected.or(error).filter({ visible: true }).first().waitFor();
    if (!(await expected.filter({ visible: true }).count())) {
      throw new Error(`${this.page.url()} shows an error: ${(await error.first().innerText()).trim()}`);
    }
  }

  text(selector: string): Promise<string> {
    return this.page.locator(selector).innerText();
  }

  /** The impersonation token the console holds (for checking what the resource API says of it). */
  async actingToken(): Promise<string> {
    const acting = await this.page.evaluate(() => sessionStorage.getItem('support-console.acting'));
    return (JSON.parse(acting ?? 'null') as { accessToken: string }).accessToken;
  }
}
