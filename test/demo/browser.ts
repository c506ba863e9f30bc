import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium; nothing here ever downloads a browser. */
export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = path.resolve('test-artifacts');
/** The screenshots the documentation shows; written there when UPDATE_SCREENSHOTS=1. */
export const SCREENSHOTS = path.resolve('docs/screenshots');
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1']);

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Script errors of the pages. */
  pageErrors: string[];
  /** Requests that tried to leave this machine (refused). */
  offHost: string[];
  close(): Promise<void>;
}

/** Headless Chromium with a profile of its own, at the size of a laptop screen; nothing it asks for leaves this machine. */
export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (the test never downloads a browser)`);
  }
  const userDataDir = await mkdtemp(path.join(tmpdir(), 'demo-chromium-'));
  await mkdir(ARTIFACTS, { recursive: true });
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    viewport: { width: 1280, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  context.setDefaultTimeout(10_000);
  const pageErrors: string[] = [];
  const offHost: string[] = [];
  await context.route('**/*', async (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || LOCAL_HOSTS.has(url.hostname)) return route.continue();
    offHost.push(url.href);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => pageErrors.push(error.message));
  return {
    context,
    page,
    pageErrors,
    offHost,
    close: async () => {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/** A screenshot of what is on screen, kept with the test's artifacts, and in docs/screenshots/ when UPDATE_SCREENSHOTS=1. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file });
  if (process.env['UPDATE_SCREENSHOTS'] === '1') {
    await mkdir(SCREENSHOTS, { recursive: true });
    await copyFile(file, path.join(SCREENSHOTS, name));
  }
}

let axeSource: string | undefined;

/**
 * Runs axe-core in the page (evaluated through the browser's devtools
 * protocol, so the page's Content-Security-Policy stays as it is) and fails
 * on any serious or critical violation, naming each with its elements.
 */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  axeSource ??= await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run(context: Document): Promise<{
            violations: Array<{ id: string; impact?: string; help: string; nodes: Array<{ target: unknown[] }> }>;
          }>;
        };
      }
    ).axe;
    const result = await axe.run(document);
    return result.violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map(
        (violation) =>
          `${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')})`,
      );
  });
  expect(violations, `${what}: axe-core found serious or critical violations`).to.deep.equal([]);
}
