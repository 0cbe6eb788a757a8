// The operator dashboard, served by a real Cordon and driven in a real
// Chromium with a virtual passkey authenticator: enroll, log in, and do an
// operator's work while agents use the API.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  shot, addAuthenticator, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, login, operatorPage,
  removeDir, serverFn, startCordon, waitFor,
} from './helpers.js';

let dataDir, server, browser, admin, key;

before(async () => {
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e agent']).trim();
  server = await startCordon(dataDir);
  browser = await launchBrowser();
  assert.ok(server.enrollLink, 'serve printed no enrollment link');
  admin = await operatorPage(browser);
  await admin.page.setViewportSize({ width: 1280, height: 800 });
  await enroll(admin.page, server.enrollLink, server.url);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (dataDir) removeDir(dataDir);
});

test('the overview shows health and what waits for operators', async () => {
  const { page } = admin;
  await page.goto(server.url + '/');
  await live(page);
  await page.waitForSelector('#tiles');
  assert.equal(await page.textContent('[data-check="database"]'), 'ok');
  assert.match(await page.textContent('#tile-pool'), /sandbox driver: (bwrap|process)/);
  assert.match(await page.textContent('#whoami'), /admin/);
  await shot(page, 'overview');
});

test('a session appears in the live list when an agent opens it and leaves it when it closes', async () => {
  const { page } = admin;
  await page.goto(server.url + '/sessions');
  await live(page);
  await page.waitForSelector('#no-sessions');
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const id = opened.json.session_id;
  const row = `#sessions tr[data-session="${id}"]`;
  // No reload: the row arrives through the change stream.
  await page.waitForSelector(row, { timeout: 30_000 });
  assert.match(await page.textContent(row), /acme/);
  await shot(page, 'sessions');
  const closed = await agentApi(server.url, key, 'DELETE', `/api/sessions/${id}`);
  assert.equal(closed.status, 200, JSON.stringify(closed.json));
  await page.waitForSelector(row, { state: 'detached', timeout: 30_000 });
  await page.waitForSelector('#no-sessions');
});

test('an operator ends a session from its page, audited with their id', async () => {
  const { page } = admin;
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const id = opened.json.session_id;
  await page.goto(`${server.url}/sessions/${id}`);
  await live(page);
  await page.waitForSelector('#end-session:not([disabled])');
  await page.click('#end-session');
  await waitFor('the session to end', async () =>
    /closed|closing/.test(await page.textContent('#session-state')));
  // "closing" comes before the reason is written: wait for the end.
  const after = await waitFor('the session closed with its reason', async () => {
    const r = await agentApi(server.url, key, 'GET', `/api/sessions/${id}`);
    return r.json.state === 'closed' ? r : null;
  });
  assert.equal(after.json.close_reason, 'operator', JSON.stringify(after.json));
  await page.waitForSelector('#session-audit');
  const trail = await page.textContent('#session-audit');
  assert.match(trail, /operator:op_/);
  assert.match(trail, /session\.close/);
});

test('approving a grant request hands the token to the polling agent; deny and revoke work too', async () => {
  const { page } = admin;
  await page.goto(server.url + '/grants');
  await live(page);
  const ask = async (domain) => {
    const r = await agentApi(server.url, key, 'POST', '/api/grants/requests',
      { domains: [domain], reason: `e2e wants ${domain}` });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return r.json.request_id;
  };
  const approved = await ask('approve.test');
  const denied = await ask('deny.test');
  // Both show up without a reload.
  await page.waitForSelector(`#pending [data-request="${approved}"]`);
  await page.waitForSelector(`#pending [data-request="${denied}"]`);
  await shot(page, 'grants');

  const card = page.locator(`#pending [data-request="${approved}"]`);
  await card.locator('select[name="expires_min"]').selectOption('60');
  await card.locator('button.approve').click();
  await page.waitForSelector(`#pending [data-request="${approved}"]`, { state: 'detached' });
  const polled = await waitFor('the token to reach the agent', async () => {
    const r = await agentApi(server.url, key, 'GET', `/api/grants/requests/${approved}`);
    return r.json.grant_token ? r.json : null;
  });
  assert.match(polled.grant_token, /^cgt_/);
  assert.equal(polled.state, 'approved');

  await page.locator(`#pending [data-request="${denied}"] button.deny`).click();
  await page.waitForSelector(`#pending [data-request="${denied}"]`, { state: 'detached' });
  const d = await agentApi(server.url, key, 'GET', `/api/grants/requests/${denied}`);
  assert.equal(d.json.state, 'denied');
  assert.equal(d.json.grant_token, undefined);

  // Revoke the issued token: the agent's next use of it fails.
  const tokenRow = page.locator(`#tokens tr[data-jti="${polled.jti}"]`);
  await tokenRow.locator('button.revoke').click();
  await waitFor('the token to show revoked', async () =>
    /revoked/.test(await tokenRow.textContent()));
  const use = await agentApi(server.url, key, 'POST', '/api/sessions', {
    credential_mode: 'operator', domains: ['approve.test'], grant_token: polled.grant_token,
  });
  assert.equal(use.status, 403, JSON.stringify(use.json));
  assert.equal(use.json.error.code, 'grant_revoked');
});

test('the audit log filters by action and pages through the results without offsets', async () => {
  const { page } = admin;
  // Twelve tool calls on one session, with screenshots kept for the timeline.
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', { record: 'audit' });
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const id = opened.json.session_id;
  for (let i = 0; i < 9; i++) {
    const r = await agentApi(server.url, key, 'POST', `/api/sessions/${id}/snapshot`, {});
    assert.equal(r.status, 200, JSON.stringify(r.json));
  }
  for (let i = 0; i < 3; i++) {
    const r = await agentApi(server.url, key, 'POST', `/api/sessions/${id}/screenshot`, {});
    assert.equal(r.status, 200, JSON.stringify(r.json));
  }
  await agentApi(server.url, key, 'DELETE', `/api/sessions/${id}`);
  const seqs = async () => page.$$eval('#audit-events tbody tr', (rows) => rows.map((r) => Number(r.dataset.seq)));
  const actions = async () => page.$$eval('#audit-events tbody tr td:nth-child(6)', (tds) => tds.map((t) => t.textContent));
  await page.goto(`${server.url}/audit?session=${id}&action=tool.&limit=5`);
  await page.waitForSelector('#audit-events');
  const first = await seqs();
  assert.equal(first.length, 5, JSON.stringify(first));
  assert.ok((await actions()).every((a) => a.startsWith('tool.')), JSON.stringify(await actions()));
  await page.click('#page-older');
  await page.waitForFunction((f) => Number(document.querySelector('#audit-events tbody tr')?.dataset.seq) < f, first[4] + 1);
  const second = await seqs();
  assert.equal(second.length, 5, JSON.stringify(second));
  assert.ok(second[0] < first[4], `pages overlap: ${first} / ${second}`);
  await page.click('#page-older');
  await page.waitForFunction(() => document.querySelectorAll('#audit-events tbody tr').length === 2);
  const last = await seqs();
  assert.ok(last[0] < second[4], `pages overlap: ${second} / ${last}`);
  assert.equal(await page.getAttribute('#page-older', 'aria-disabled'), 'true');
  // Twelve distinct tool events across the three pages.
  assert.equal(new Set([...first, ...second, ...last]).size, 12);
  await page.click('#page-newer');
  await page.waitForFunction((s) => Number(document.querySelector('#audit-events tbody tr')?.dataset.seq) === s, second[0]);
  assert.deepEqual(await seqs(), second);
  // The last page holds the oldest five, ending with the oldest of all.
  await page.click('#page-oldest');
  await page.waitForFunction((s) => Number(document.querySelector('#audit-events tbody tr:last-child')?.dataset.seq) === s, last[1]);
  assert.deepEqual(await seqs(), [...second.slice(2), ...last]);
  // A bad filter says which field.
  await page.goto(`${server.url}/audit?from=yesterday`);
  await page.waitForSelector('[data-error="invalid"]');
  assert.match(await page.textContent('[data-error="invalid"]'), /from/);
  await page.goto(`${server.url}/audit?session=${id}&action=tool.`);
  await page.waitForSelector('#audit-events');
  await shot(page, 'audit');

  // The session's screenshots: a timeline of thumbnails, arrows step through.
  await page.goto(`${server.url}/sessions/${id}/screenshots`);
  await page.waitForSelector('body[data-hydrated="true"]');
  await page.waitForSelector('#timeline .shot');
  assert.equal(await page.locator('#timeline .shot').count(), 3);
  assert.match(await page.textContent('#retention'), /kept until/);
  const thumbs = await page.$$eval('#timeline img', (imgs) => imgs.map((i) => i.complete && i.naturalWidth));
  await page.waitForFunction(() => [...document.querySelectorAll('#timeline img')].every((i) => i.complete && i.naturalWidth > 0));
  await page.click('#timeline .shot >> nth=0');
  await page.waitForSelector('#viewer');
  assert.match(await page.textContent('#viewer-caption'), /#1 of 3/);
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => /#2 of 3/.test(document.querySelector('#viewer-caption')?.textContent));
  await page.waitForFunction(() => document.querySelector('#viewer-image')?.naturalWidth > 0);
  await page.keyboard.press('Escape');
  await page.waitForSelector('#viewer', { state: 'detached' });
  assert.ok(thumbs.length === 3);
  // Images are served by id only, and only to logged-in operators.
  const src = await page.getAttribute('#timeline img >> nth=0', 'src');
  assert.equal((await page.evaluate(async (u) => (await fetch(u)).status, src)), 200);
  assert.equal((await fetch(server.url + src, { redirect: 'manual' })).status, 401);
  for (const bad of ['/ui/screenshots/..%2F..%2Fcordon.db', '/ui/screenshots/acme:s_x:1', '/ui/screenshots/acme%3A..%3A1']) {
    assert.equal(await page.evaluate(async (u) => (await fetch(u)).status, bad), 404, bad);
  }
});

test('credentials list metadata only; export needs a fresh passkey check; delete removes one', async () => {
  const { page } = admin;
  const file = join(dataDir, 'state.json');
  const far = Math.floor(Date.now() / 1000) + 3 * 86400;
  writeFileSync(file, JSON.stringify({
    cookies: [{ name: 'sid', value: 'e2e-not-a-secret', domain: 'shop.test', path: '/', expires: far,
      httpOnly: true, secure: true, sameSite: 'Lax' }],
    origins: [],
  }));
  cordon(dataDir, ['creds', 'import', '--tenant', 'acme', '--domain', 'shop.test', file]);
  await page.goto(server.url + '/credentials');
  await live(page);
  const row = page.locator('#credentials tr[data-domain="shop.test"]');
  await row.waitFor();
  const text = await row.textContent();
  assert.match(text, /acme/);
  assert.doesNotMatch(text, /e2e-not-a-secret/, 'a cookie value reached the page');
  // Without a fresh check the export is refused.
  const direct = await page.evaluate(async () => {
    const r = await fetch('/ui/credentials/export?tenant=acme&domain=shop.test');
    return { status: r.status, body: await r.text() };
  });
  assert.equal(direct.status, 403, direct.body);
  assert.match(direct.body, /fresh passkey check/);
  // With it (the virtual authenticator answers), the file downloads once.
  const download = page.waitForEvent('download');
  await row.locator('form.export button').click();
  const file2 = await (await download).path();
  const exported = JSON.parse(readFileSync(file2, 'utf8'));
  assert.deepEqual(exported.cookies.map((c) => c.name), ['sid']);
  const again = await page.evaluate(async () => (await fetch('/ui/credentials/export?tenant=acme&domain=shop.test')).status);
  assert.equal(again, 403, 'one passkey check allows one export');
  // The overview lists it as expiring within a week.
  await page.goto(server.url + '/');
  await page.waitForSelector('#expiring');
  assert.match(await page.textContent('#expiring'), /shop\.test/);
  await page.goto(server.url + '/credentials');
  await live(page);
  await page.locator('#credentials tr[data-domain="shop.test"] button.danger').click();
  await page.waitForSelector('#no-credentials');
  assert.doesNotMatch(cordon(dataDir, ['creds', 'list']), /shop\.test/);
});

test('an admin creates a tenant and a key (shown once), revokes it, and invites an operator', async () => {
  const { page } = admin;
  await page.goto(server.url + '/tenants');
  await live(page);
  await page.fill('#create-tenant input[name="id"]', 'globex');
  await page.fill('#create-tenant input[name="name"]', 'Globex');
  await page.click('#create-tenant button[type="submit"]');
  const card = page.locator('article[data-tenant="globex"]');
  await card.waitFor();
  await card.locator('input[name="label"]').fill('nightly job');
  await card.locator('button[type="submit"]').click();
  await page.waitForSelector('#new-key');
  const newKey = await page.inputValue('#new-key input');
  assert.match(newKey, /^cordon_/);
  // The key works against the agent API, then stops working once revoked.
  assert.equal((await agentApi(server.url, newKey, 'GET', '/api/sessions')).status, 200);
  await card.locator('tr[data-key] button.danger').click();
  await card.locator('tr[data-key] .badge[data-status="revoked"]').waitFor();
  assert.equal((await agentApi(server.url, newKey, 'GET', '/api/sessions')).status, 401);
  // Inviting shows a one-time link for the new operator.
  await page.goto(server.url + '/operators');
  await live(page);
  await page.fill('#invite-form input[name="name"]', 'nina');
  await page.selectOption('#invite-form select[name="role"]', 'viewer');
  await page.click('#invite-form button[type="submit"]');
  await page.waitForSelector('#invite-link');
  assert.match(await page.inputValue('#invite-link input'), /\/enroll#cen_/);
  await page.waitForSelector('#operators tr[data-operator="nina"] .badge[data-status="not enrolled"]');
});

test('an operator adds a second passkey, removes one, and cannot remove the last, each after a passkey check', async () => {
  const { page } = admin;
  await page.goto(server.url + '/account');
  await page.waitForSelector('body[data-hydrated="true"]');
  await page.waitForSelector('#passkeys tbody tr');
  assert.equal(await page.locator('#passkeys tbody tr').count(), 1);
  assert.equal(await page.locator('#passkeys button.danger').first().isDisabled(), true);
  // Without a fresh passkey check the server refuses both (a stolen
  // dashboard session cannot swap the operator's passkeys).
  const started = await page.evaluate(async () => (await fetch('/ui/auth/passkeys/start', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ passkey_name: 'thief' }),
  })).status);
  assert.equal(started, 403);
  // Adding asks the passkey the operator has first; the new one comes
  // from a second device (the same device cannot register twice: the
  // server excludes its credential), swapped in once the check is done.
  let swapped = false;
  await page.route('**/ui/auth/passkeys/start', async (route) => {
    await admin.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: admin.authenticatorId });
    admin.authenticatorId = await addAuthenticator(admin.cdp);
    swapped = true;
    await route.continue();
  });
  await page.fill('#new-passkey-name', 'Backup key');
  await page.click('#add-passkey button[type="submit"]');
  await waitFor('the second passkey', async () =>
    (await page.locator('#passkeys tbody tr').count()) === 2
      || /error|fail|cancel|needs/i.test(await page.textContent('#add-passkey [data-passkey-status]')) && await page.textContent('#add-passkey [data-passkey-status]'));
  await page.unroute('**/ui/auth/passkeys/start');
  assert.ok(swapped, 'the check came before the new passkey');
  assert.equal(await page.locator('#passkeys tbody tr').count(), 2, await page.textContent('#add-passkey [data-passkey-status]'));
  assert.match(await page.textContent('#passkeys'), /Backup key/);
  // A removal without a check is refused and removes nothing.
  const first = await page.locator('#passkeys tbody tr').first().locator('input[name="id"]').inputValue();
  const refused = await serverFn(page, 'remove_passkey', { id: first });
  assert.equal(refused.status, 403, refused.body);
  assert.equal(await page.locator('#passkeys tbody tr').count(), 2);
  // The Remove button asks for a passkey (the device now holds "Backup
  // key"), then removes the first one.
  await page.locator('#passkeys tbody tr', { hasNotText: 'Backup key' }).locator('button.danger').click();
  await page.waitForFunction(() => document.querySelectorAll('#passkeys tbody tr').length === 1);
  assert.match(await page.textContent('#passkeys'), /Backup key/);
  assert.equal(await page.locator('#passkeys button.danger').first().isDisabled(), true);
  await shot(page, 'account');
});
