// The risk gate, end to end: an agent's clicks on "Delete account" wait on
// the dashboard's Approvals page (a badge on every page counts them, the
// card shows the outlined page); an operator approves one (the agent's
// call answers 200 and the click happened) and denies another (403
// denied_by_operator, and it never happened).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  shot, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir,
  startCordon, waitFor,
} from './helpers.js';
import { startSite } from './site.js';

let dataDir, server, browser, admin, key, site;

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e agent']).trim();
  server = await startCordon(dataDir, {
    CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
    CORDON_APPROVAL_TIMEOUT_S: '120',
  });
  browser = await launchBrowser();
  admin = await operatorPage(browser);
  await admin.page.setViewportSize({ width: 1280, height: 900 });
  await enroll(admin.page, server.enrollLink, server.url);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

const api = (method, path, body) => agentApi(server.url, key, method, path, body);

async function title(sid) {
  const tabs = await api('GET', `/api/sessions/${sid}/tabs`);
  return tabs.json[0]?.title;
}

/** Decides the one waiting card with `button` (`.approve` or `.deny`). */
async function decideOnPage(page, button) {
  const card = page.locator('[data-approval]');
  await card.waitFor({ timeout: 60_000 });
  assert.equal(await card.count(), 1);
  assert.match(await card.locator('.reasons').textContent(), /destructive_click.*Delete account/);
  assert.equal(await card.getAttribute('data-level'), 'high');
  const img = card.locator('img');
  await waitFor('the outlined screenshot to load', () =>
    img.evaluate((i) => i.complete && i.naturalWidth > 100), 30_000);
  await shot(page, button === '.approve' ? 'approvals' : 'approvals-phone', { fullPage: true });
  await card.locator(button).click();
  await page.waitForSelector('#no-approvals', { timeout: 30_000 });
}

test('an operator approves one waiting click and denies another on the Approvals page', async () => {
  const { page, errors } = admin;
  const opened = await api('POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const sid = opened.json.session_id;
  const nav = await api('POST', `/api/sessions/${sid}/navigate`, { url: site.url('/danger') });
  assert.equal(nav.status, 200, JSON.stringify(nav.json));

  await page.goto(server.url + '/approvals');
  await live(page);
  await page.waitForSelector('#no-approvals');
  assert.equal(await page.locator('#approvals-badge').count(), 0);

  // The agent clicks; the call waits for the operator.
  const first = api('POST', `/api/sessions/${sid}/click`, { selector: '#delete' });
  await page.waitForSelector('#approvals-badge', { timeout: 60_000 });
  assert.equal((await page.textContent('#approvals-badge')).trim(), '1');
  assert.equal(await title(sid), 'Danger');
  await decideOnPage(page, '.approve');
  const approved = await first;
  assert.equal(approved.status, 200, JSON.stringify(approved.json));
  await waitFor('the click to have happened', async () => (await title(sid)) === 'deleted 1');
  await waitFor('the badge to go', async () => (await page.locator('#approvals-badge').count()) === 0);

  // The badge shows on other pages too; the operator goes back and denies.
  await page.goto(server.url + '/sessions');
  await live(page);
  const second = api('POST', `/api/sessions/${sid}/click`, { selector: '#delete' });
  await page.waitForSelector('#approvals-badge', { timeout: 60_000 });
  await page.click('nav a[href="/approvals"]');
  if (process.env.CORDON_E2E_SCREENSHOTS) await page.setViewportSize({ width: 390, height: 844 });
  await decideOnPage(page, '.deny');
  await page.setViewportSize({ width: 1280, height: 900 });
  const denied = await second;
  assert.equal(denied.status, 403, JSON.stringify(denied.json));
  assert.equal(denied.json.error.code, 'denied_by_operator');
  assert.equal(await title(sid), 'deleted 1', 'the denied click never ran');

  const closed = await api('DELETE', `/api/sessions/${sid}`);
  assert.equal(closed.status, 200);
  assert.deepEqual(errors, []);
});
