// Second-factor codes end to end, in real Chromiums: a loopback site asks
// for a password and then a TOTP code (checked with its own RFC 6238 code,
// Node's HMAC). An operator stores the seed on the Credentials page from a
// QR code image, logs in through the live view and has Cordon type the
// code; an agent's operator-mode session with a `totp` grant then passes
// the site's step-up prompt with `type_totp`. The site saw the right
// codes; the agent's answers, the audit log and the server's log hold none.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import QRCode from 'qrcode';
import {
  shot, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir,
  serverFn, startCordon, waitFor, withServerLog,
} from './helpers.js';
import { PASSWORD, USER, startSite, totpCode } from './site.js';

let dataDir, server, browser, admin, key, site, secret, uri;

const base32 = (buf) => {
  const A = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0; let acc = 0; let out = '';
  for (const b of buf) {
    acc = (acc << 8) | b; bits += 8;
    while (bits >= 5) { bits -= 5; out += A[(acc >> bits) & 31]; }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += A[(acc << (5 - bits)) & 31];
  return out;
};

/** Whether `text` holds any code of the secret from the last few minutes. */
// A code stands alone wherever it leaks (`code=123456`, `"123456"`); six
// digits inside a longer run of digits or hex (a timestamp, a hash) are
// not one, and would make this check fail at random.
const holdsACode = (text) => {
  const now = Date.now() / 1000;
  for (let i = -2; i < 12; i++) {
    const alone = new RegExp(`(^|[^0-9A-Za-z])${totpCode(secret, now - i * 30)}($|[^0-9A-Za-z])`);
    if (alone.test(text)) return true;
  }
  return false;
};

before(async () => {
  site = await startSite();
  secret = randomBytes(20);
  site.requireTotp(secret);
  uri = `otpauth://totp/Loopback:${USER}?secret=${base32(secret)}&issuer=Loopback`;
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e agent']).trim();
  server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}` });
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

async function viewState(page) {
  return page.evaluate(() => {
    const v = document.querySelector('[data-live-view]');
    return v && { ...v.dataset };
  });
}

async function at(page, x, y, width = 1280) {
  const box = await page.locator('[data-canvas]').boundingBox();
  const scale = box.width / width;
  return [box.x + x * scale, box.y + y * scale];
}

test('an operator stores a seed from a QR code, logs in with a typed code, and an agent passes a step-up prompt without seeing a code', () => withServerLog(server, async () => {
  const { page, errors } = admin;

  // The seed, from a QR code image on the Credentials page.
  await page.goto(server.url + '/credentials');
  await live(page);
  await page.waitForSelector('#no-totp');
  await page.click('#add-totp summary');
  const form = page.locator('form[data-totp-add]');
  await form.locator('input[name="tenant"]').fill('acme');
  await form.locator('input[name="domain"]').fill('127.0.0.1');
  await form.locator('input[name="label"]').fill('alice');
  await form.locator('input[name="image"]').setInputFiles({
    name: 'qr.png', mimeType: 'image/png', buffer: await QRCode.toBuffer(uri, { scale: 6 }),
  });
  await form.locator('button[type="submit"]').click();
  await waitFor('the seed stored', async () => /Stored “alice”/.test(await form.locator('[data-totp-status]').textContent()));
  const row = page.locator('#totp-seeds tr', { hasText: 'alice' });
  await row.waitFor();
  assert.match(await row.textContent(), /SHA1.*6.*30 s/);

  // A second one pasted as a screenshot (not a QR code: a field error,
  // nothing stored), then a wrong secret by field, then one by secret that
  // is deleted again.
  const notQr = await QRCode.toBuffer('https://example.com/', { scale: 4 });
  await form.locator('input[name="label"]').fill('pasted');
  await form.locator('input[name="tenant"]').fill('acme');
  await form.locator('input[name="domain"]').fill('127.0.0.1');
  await page.evaluate((bytes) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(bytes)], 'shot.png', { type: 'image/png' }));
    document.querySelector('form[data-totp-add] input[name="label"]')
      .dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, [...notQr]);
  assert.match(await form.locator('[data-totp-pasted]').textContent(), /pasted image/);
  await form.locator('button[type="submit"]').click();
  await waitFor('the field error', async () => /otpauth/.test(await form.locator('[data-totp-status]').textContent()));
  assert.equal(await form.locator('[data-totp-status]').getAttribute('data-state'), 'error');
  await page.reload();
  await live(page);
  await page.click('#add-totp summary');
  await form.locator('input[name="tenant"]').fill('acme');
  await form.locator('input[name="domain"]').fill('127.0.0.1');
  await form.locator('input[name="label"]').fill('spare');
  await form.locator('input[name="secret"]').fill('not base32!');
  await form.locator('button[type="submit"]').click();
  await waitFor('the secret refused', async () => /secret/.test(await form.locator('[data-totp-status]').textContent()));
  assert.equal(await form.locator('input[name="secret"]').getAttribute('aria-invalid'), 'true');
  await form.locator('input[name="secret"]').fill(base32(randomBytes(20)));
  await form.locator('button[type="submit"]').click();
  await page.locator('#totp-seeds tr', { hasText: 'spare' }).waitFor();
  await shot(page, 'totp-seeds', { fullPage: true });
  await page.locator('#totp-seeds tr', { hasText: 'spare' }).locator('button.danger').click();
  await waitFor('the spare seed gone', async () => (await page.locator('#totp-seeds tr', { hasText: 'spare' }).count()) === 0);
  assert.equal(await page.locator('#totp-seeds tbody tr').count(), 1);
  const listed = await page.textContent('body');
  assert.ok(!listed.includes(base32(secret)), 'the page shows the secret');
  // Export: a fresh passkey check, then the set-up link as a file.
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 30_000 }),
    page.locator('#totp-seeds tr', { hasText: 'alice' }).locator('form.export button').click(),
  ]);
  const link = readFileSync(await download.path(), 'utf8');
  assert.ok(link.startsWith('otpauth://totp/'), 'the export is a set-up link');
  assert.ok(link.includes(`secret=${base32(secret)}`), 'the export holds the stored secret');

  // Log in through the live view: password, then "Type the code".
  await page.click('.new-login summary');
  await page.fill('#start-refresh input[name="tenant"]', 'acme');
  await page.fill('#start-refresh input[name="domains"]', '127.0.0.1');
  await page.fill('#start-refresh input[name="start_url"]', site.url('/login'));
  await page.click('#start-refresh button[type="submit"]');
  await page.waitForURL(/\/sessions\/s_[a-z0-9]+\/live$/, { timeout: 60_000 });
  await waitFor('the login page in the stream', async () => {
    const s = await viewState(page);
    return s?.state === 'live' && s.title === 'Sign in' && s.control === 'yours' ? s : null;
  }, 60_000);
  await page.mouse.click(...(await at(page, 170, 80)));
  await waitFor('keyboard focus', async () => (await page.evaluate(() => document.activeElement?.hasAttribute('data-keys'))));
  await page.keyboard.type(USER);
  await page.mouse.click(...(await at(page, 170, 140)));
  await page.keyboard.type(PASSWORD);
  await page.keyboard.press('Enter');
  await waitFor('the two-factor prompt', async () => (await viewState(page))?.title === 'Two-factor check', 60_000);
  const typeCode = page.locator('[data-type-code="alice"]');
  await typeCode.waitFor();
  await shot(page, 'totp-live', { fullPage: true });
  await typeCode.click();
  await waitFor('the code typed', async () => /Typed 6 digits/.test(await page.textContent('#code-status')));
  await page.mouse.click(...(await at(page, 170, 140)));
  await waitFor('the site to accept the code', async () => (await viewState(page))?.title === `Account of ${USER}`, 60_000);
  assert.deepEqual(site.codes.map((c) => c.ok), [true]);
  await page.click('#save-login');
  await page.waitForSelector('#save-diff', { timeout: 30_000 });
  // Leave the live page once its view has seen the end (as live.test.js does).
  await waitFor('the view to say the session ended', async () => (await viewState(page))?.state === 'ended', 30_000);

  // The agent asks for codes; the Grants page says so; approved.
  const asked = await agentApi(server.url, key, 'POST', '/api/grants/requests',
    { domains: ['127.0.0.1'], reason: 'renew the invoice export', totp: true });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));
  assert.equal(asked.json.totp, true);
  await page.goto(server.url + '/grants');
  await live(page);
  await page.waitForSelector('[data-totp="true"]');
  assert.match(await page.textContent('[data-totp="true"]'), /second-factor codes/);
  await shot(page, 'totp-grant');
  const approved = await serverFn(page, 'approve_grant', { id: asked.json.request_id, expires_min: '30', multi_use: 'false' });
  assert.equal(approved.status, 200, approved.body);
  const polled = await waitFor('the token', async () => {
    const r = await agentApi(server.url, key, 'GET', `/api/grants/requests/${asked.json.request_id}`);
    return r.json.grant_token ? r.json : null;
  });
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions',
    { credential_mode: 'operator', domains: ['127.0.0.1'], grant_token: polled.grant_token });
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const sid = opened.json.session_id;
  const call = (tool, body) => agentApi(server.url, key, 'POST', `/api/sessions/${sid}/${tool}`, body);

  // Logged in, the site asks again (a step-up prompt); Cordon types it.
  const nav = await call('navigate', { url: site.url('/stepup') });
  assert.equal(nav.json.title, 'Two-factor check', JSON.stringify(nav.json));
  const typed = await call('type_totp', { selector: '#code' });
  assert.equal(typed.status, 200, JSON.stringify(typed.json));
  assert.deepEqual(typed.json, { ok: true, typed_digits: 6, label: 'alice', domain: '127.0.0.1' });
  const snap = await call('snapshot', {});
  const dom = await call('read_dom', {});
  assert.ok(!holdsACode(JSON.stringify(snap.json) + JSON.stringify(dom.json)), 'the agent can read the code');
  const clicked = await call('click', { selector: '#go' });
  assert.equal(clicked.status, 200, JSON.stringify(clicked.json));
  await waitFor('the site to accept the agent\'s code', async () => site.codes.length === 2);
  assert.deepEqual(site.codes.map((c) => c.ok), [true, true]);
  const title = await call('navigate', { url: site.url('/account') });
  assert.equal(title.json.title, `Account of ${USER}`);
  await agentApi(server.url, key, 'DELETE', `/api/sessions/${sid}`);

  // No code in the audit log (exported) or the server's log.
  const exported = cordon(dataDir, ['audit', 'export']);
  assert.match(exported, /tool\.type_totp/);
  assert.match(exported, /vault\.totp\.add/);
  assert.ok(!holdsACode(exported), 'the audit log holds a code');
  assert.ok(!exported.includes(base32(secret)), 'the audit log holds the secret');
  assert.ok(!holdsACode(server.logs()), 'the server log holds a code');
  assert.ok(!server.logs().includes(base32(secret)), 'the server log holds the secret');
  assert.deepEqual(errors, []);
}));
