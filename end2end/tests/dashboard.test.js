// The dashboard shell, served by a real Cordon and driven in a real Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cordon, freshDataDir, startCordon, launchBrowser, removeDir } from './helpers.js';

let dataDir, server, browser;

before(async () => {
  dataDir = freshDataDir();
  // Two audited actions through the CLI, so the audit page has rows.
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  cordon(dataDir, ['tenant', 'create', 'globex']);
  server = await startCordon(dataDir);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (dataDir) removeDir(dataDir);
});

async function hydratedPage(path) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(server.url + path);
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 20_000 });
  return { page, errors };
}

test('the overview renders on the server and shows the health checks', async () => {
  const res = await fetch(server.url + '/');
  assert.equal(res.status, 200);
  const html = await res.text();
  assert.match(html, /<h1>Overview<\/h1>/);
  const { page, errors } = await hydratedPage('/');
  await page.waitForSelector('#status');
  assert.equal(await page.textContent('[data-check="database"]'), 'ok');
  assert.equal(await page.textContent('[data-check="chromium"]'), 'ok');
  assert.match(await page.textContent('#status'), /sqlite/);
  // Each tenant's recordings against its disk quota.
  await page.waitForSelector('#recordings');
  for (const tenant of ['acme', 'globex']) {
    assert.match(
      await page.textContent(`#recordings tr[data-tenant="${tenant}"]`),
      /0\.0 MiB of 2048\.0 MiB/,
    );
  }
  assert.deepEqual(errors, []);
  await page.close();
});

test('after hydration "Check again" re-runs the checks in place', async () => {
  const { page } = await hydratedPage('/');
  await page.waitForSelector('#checked-at');
  const first = await page.textContent('#checked-at');
  assert.equal(await page.textContent('#check-count'), 'checks: 1');
  await page.waitForTimeout(5); // the timestamp has millisecond resolution
  await page.click('#recheck');
  await page.waitForFunction((t) => document.querySelector('#checked-at')?.textContent !== t, first);
  assert.equal(await page.textContent('#check-count'), 'checks: 2');
  await page.close();
});

test('the navigation toggle collapses the sidebar', async () => {
  const { page } = await hydratedPage('/');
  const toggle = page.locator('button.nav-toggle');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  assert.equal(await page.locator('nav.sidebar').isVisible(), false);
  await page.close();
});

test('client-side navigation reaches the audit log, which lists events newest first', async () => {
  const { page } = await hydratedPage('/');
  await page.click('nav >> text=Audit log');
  await page.waitForSelector('#audit-events');
  assert.equal(new URL(page.url()).pathname, '/audit');
  const actions = await page.$$eval('#audit-events tbody tr', (rows) =>
    rows.map((r) => [...r.children].map((td) => td.textContent)));
  assert.equal(actions.length >= 2, true, JSON.stringify(actions));
  // Columns: seq, ts, tenant, session, actor, action, params, outcome, hash.
  assert.equal(actions[0][2], 'globex');
  assert.equal(actions[1][2], 'acme');
  assert.equal(actions[1][5], 'tenant.create');
  assert.equal(actions[1][4], 'cli');
  await page.close();
});

test('verifying the audit chain reports it intact, then names a tampered row', async () => {
  const { page } = await hydratedPage('/audit');
  await page.click('#verify');
  await page.waitForFunction(() => /Chain/.test(document.querySelector('#verify-result')?.textContent));
  assert.match(await page.textContent('#verify-result'), /Chain intact: 2 events verified/);

  // An attacker with write access to the database file edits event 1.
  const db = join(dataDir, 'cordon.db');
  execFileSync('sqlite3', [db,
    "DROP TRIGGER audit_events_no_update; UPDATE audit_events SET params = '{\"name\":\"Evil\"}' WHERE seq = 1;"]);

  await page.click('#verify');
  await page.waitForFunction(() => /broken/.test(document.querySelector('#verify-result')?.textContent));
  assert.match(await page.textContent('#verify-result'), /Chain broken at seq 1/);
  await page.close();
});

test('an unknown page answers 404 with the dashboard frame', async () => {
  const res = await fetch(server.url + '/no-such-page');
  assert.equal(res.status, 404);
  assert.match(await res.text(), /Not found/);
});
