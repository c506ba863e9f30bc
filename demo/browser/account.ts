/**
 * The customer's account page script (served as /account.js): asks every few
 * seconds whether what the page shows changed (a request arrived, an access
 * was given or ended, a notification came) and reloads the page when it did,
 * unless the customer is filling in one of its forms: then it says so and
 * lets them reload.
 */

const POLL_MS = 3000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => window.setTimeout(resolve, ms));
}

async function follow(): Promise<void> {
  const updates = document.getElementById('account-updates');
  if (!updates) return;
  const shown = updates.dataset['version'];
  // Once the customer starts on a form (or opens one), a reload would lose what they did: the page says so instead.
  let editing = false;
  const started = () => {
    editing = true;
  };
  for (const form of document.querySelectorAll('form')) {
    form.addEventListener('input', started);
    form.addEventListener('focusin', started);
  }
  for (const details of document.querySelectorAll('details')) details.addEventListener('toggle', started);
  for (;;) {
    await sleep(POLL_MS);
    let version: unknown;
    try {
      const answer = await fetch('/account/support-access/version', { cache: 'no-store' });
      if (!answer.ok) continue;
      ({ version } = (await answer.json()) as { version?: unknown });
    } catch {
      continue;
    }
    if (typeof version !== 'string' || version === shown) continue;
    if (!editing) {
      location.reload();
      return;
    }
    updates.hidden = false;
  }
}

document.body.dataset['ready'] = 'true';
void follow();
